#include "io/zip_archive.h"

#include <libdeflate.h>

#include <algorithm>
#include <array>
#include <string_view>

#include "tensor/error.h"

namespace tfm::io {

namespace {

// Beyond these a central directory is not a checkpoint's: torch writes three entries
// per tensor storage at most, and a model of 100,000 storages has a directory of ~10 MB.
constexpr uint64_t kMaxEntries = 1u << 20;
constexpr uint64_t kMaxDirectoryBytes = 64u << 20;
constexpr uint64_t kOverflowed = 0xFFFFFFFF;  // a 32-bit field whose value is in the zip64 extra field

// A little-endian field of `bytes` bytes (zip's byte order).
uint64_t le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// An entry's sizes and offset over 4 GiB are 0xFFFFFFFF in the central directory and 8
// bytes each in its zip64 extra field (id 1), in this order, for those that overflowed.
void apply_zip64(std::string_view extra, const std::array<uint64_t*, 3>& fields, const std::string& origin, const std::string& name) {
  for (size_t at = 0; at + 4 <= extra.size();) {
    const uint64_t id = le(&extra[at], 2), len = le(&extra[at + 2], 2);
    TFM_CHECK(len <= extra.size() - at - 4, origin << ": malformed zip archive (the extra field of entry '" << name << "')");
    size_t p = at + 4;
    for (uint64_t* field : fields)
      if (id == 1 && *field == kOverflowed) {
        TFM_CHECK(p + 8 <= at + 4 + len, origin << ": malformed zip archive (the zip64 field of entry '" << name << "')");
        *field = le(&extra[p], 8);
        p += 8;
      }
    at += 4 + len;
  }
}

}  // namespace

ZipArchive::ZipArchive(uint64_t size, ReadAt read_at, std::string origin)
    : size_(size), read_at_(std::move(read_at)), origin_(std::move(origin)) {
  read_directory(find_directory());
}

// The end-of-central-directory record is the last 22 bytes but for a comment (at most
// 65,535 bytes) after it: the last signature whose comment reaches the end of the file.
ZipArchive::Directory ZipArchive::find_directory() const {
  const std::string not_zip = origin_ + ": not a zip archive (PyTorch checkpoints are zip archives since PyTorch 1.6)";
  TFM_CHECK(size_ >= 22, not_zip);
  const uint64_t tail_size = std::min<uint64_t>(size_, 22 + 65535);
  std::string tail(static_cast<size_t>(tail_size), '\0');
  read_at_(size_ - tail_size, tail.size(), tail.data());
  size_t at = tail.size() - 22;
  while (!(le(&tail[at], 4) == 0x06054b50 && at + 22 + le(&tail[at + 20], 2) == tail.size())) {
    TFM_CHECK(at > 0, not_zip);
    --at;
  }
  const char* e = &tail[at];
  const uint64_t count = le(e + 10, 2), bytes = le(e + 12, 4), offset = le(e + 16, 4);
  if (count == 0xFFFF || bytes == kOverflowed || offset == kOverflowed) return find_zip64_directory(size_ - tail.size() + at);
  TFM_CHECK(le(e + 4, 2) == 0 && le(e + 6, 2) == 0 && le(e + 8, 2) == count, origin_ << ": a zip archive of several disks, which tfm does not read");
  return {offset, bytes, count};
}

// Zip64: a locator just before the end record points at the zip64 end record, whose
// fields are 8 bytes wide.
ZipArchive::Directory ZipArchive::find_zip64_directory(uint64_t end_record) const {
  const std::string malformed = origin_ + ": malformed zip64 archive (its end of central directory records)";
  TFM_CHECK(end_record >= 20, malformed);
  char locator[20];
  read_at_(end_record - 20, sizeof locator, locator);
  TFM_CHECK(le(locator, 4) == 0x07064b50, malformed);
  const uint64_t at = le(locator + 8, 8);
  TFM_CHECK(at <= end_record - 20 && end_record - 20 - at >= 56, malformed);
  char r[56];
  read_at_(at, sizeof r, r);
  TFM_CHECK(le(r, 4) == 0x06064b50, malformed);
  TFM_CHECK(le(r + 16, 4) == 0 && le(r + 20, 4) == 0 && le(r + 24, 8) == le(r + 32, 8),
            origin_ << ": a zip archive of several disks, which tfm does not read");
  return {le(r + 48, 8), le(r + 40, 8), le(r + 32, 8)};
}

void ZipArchive::read_directory(const Directory& d) {
  TFM_CHECK(d.count <= kMaxEntries && d.size <= kMaxDirectoryBytes,
            origin_ << ": the zip archive's directory declares " << d.count << " entries in " << d.size << " bytes, over tfm's limits of "
                    << kMaxEntries << " and " << kMaxDirectoryBytes << " (corrupted, or not a checkpoint)");
  TFM_CHECK(d.offset <= size_ && d.size <= size_ - d.offset, origin_ << ": truncated zip archive (its central directory lies beyond the end)");
  std::string cd(static_cast<size_t>(d.size), '\0');
  read_at_(d.offset, cd.size(), cd.data());
  size_t at = 0;
  for (uint64_t i = 0; i < d.count; ++i) {
    TFM_CHECK(cd.size() - at >= 46 && le(&cd[at], 4) == 0x02014b50, origin_ << ": malformed zip archive (central directory entry " << i << ")");
    const char* h = &cd[at];
    const uint64_t flags = le(h + 8, 2), method = le(h + 10, 2), name_len = le(h + 28, 2), extra_len = le(h + 30, 2);
    const uint64_t record = 46 + name_len + extra_len + le(h + 32, 2);
    TFM_CHECK(cd.size() - at >= record, origin_ << ": malformed zip archive (central directory entry " << i << ")");
    ZipEntry e{std::string(h + 46, name_len), le(h + 24, 4), static_cast<uint32_t>(le(h + 16, 4)), le(h + 42, 4)};
    uint64_t compressed = le(h + 20, 4);
    apply_zip64(std::string_view(h + 46 + name_len, extra_len), {&e.size, &compressed, &e.header_offset}, origin_, e.name);
    TFM_CHECK(!(flags & 1), origin_ << ": entry '" << e.name << "' is encrypted, which tfm does not read");
    TFM_CHECK(method == 0, origin_ << ": entry '" << e.name << "' is compressed (method " << method
                                   << "); tfm reads entries stored uncompressed, as torch.save writes them");
    TFM_CHECK(compressed == e.size, origin_ << ": malformed zip archive (entry '" << e.name << "' is stored with two sizes)");
    TFM_CHECK(by_name_.emplace(e.name, entries_.size()).second, origin_ << ": the zip archive holds entry '" << e.name << "' twice");
    entries_.push_back(std::move(e));
    at += record;
  }
}

const ZipEntry* ZipArchive::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

// Where an entry's bytes start: after its local header, whose name and extra field may
// differ in length from the central directory's (torch pads the extra field to align data).
uint64_t ZipArchive::data_offset(const ZipEntry& entry) const {
  TFM_CHECK(entry.header_offset <= size_ && size_ - entry.header_offset >= 30,
            origin_ << ": truncated zip archive (entry '" << entry.name << "' starts beyond the end)");
  char h[30];
  read_at_(entry.header_offset, sizeof h, h);
  TFM_CHECK(le(h, 4) == 0x04034b50, origin_ << ": malformed zip archive (entry '" << entry.name << "' has no local header)");
  const uint64_t start = entry.header_offset + 30 + le(h + 26, 2) + le(h + 28, 2);
  TFM_CHECK(start <= size_ && entry.size <= size_ - start,
            origin_ << ": truncated: entry '" << entry.name << "' needs " << entry.size << " bytes from byte " << start << " of " << size_);
  return start;
}

void ZipArchive::read(const ZipEntry& entry, char* dst) const {
  const uint64_t start = data_offset(entry);
  if (entry.size == 0) {  // (an empty storage's dst may be null)
    TFM_CHECK(entry.crc32 == 0, origin_ << ": checksum mismatch in entry '" << entry.name << "', the file is corrupted");
    return;
  }
  read_at_(start, static_cast<size_t>(entry.size), dst);
  TFM_CHECK(libdeflate_crc32(0, dst, static_cast<size_t>(entry.size)) == entry.crc32,
            origin_ << ": checksum mismatch in entry '" << entry.name << "', the file is corrupted");
}

std::string ZipArchive::read(const ZipEntry& entry, uint64_t max_bytes) const {
  TFM_CHECK(entry.size <= max_bytes, origin_ << ": entry '" << entry.name << "' is " << entry.size << " bytes, over tfm's limit of " << max_bytes);
  std::string bytes(static_cast<size_t>(entry.size), '\0');
  read(entry, bytes.data());
  return bytes;
}

}  // namespace tfm::io
