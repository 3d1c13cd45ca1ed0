#pragma once
// The zip container of PyTorch's checkpoints (torch.save since PyTorch 1.6): the central
// directory read and checked, entries stored uncompressed as torch writes them, zip64's
// sizes and offsets for archives over 4 GiB. A compressed or encrypted entry, a
// multi-disk archive and anything malformed are one line naming the archive.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/random_access_file.h"

namespace tfm::io {

struct ZipEntry {
  std::string name;
  uint64_t size = 0;          // bytes, stored as they are
  uint32_t crc32 = 0;         // zlib's CRC-32 of them
  uint64_t header_offset = 0; // where its local header starts
};

class ZipArchive {
 public:
  // Reads and checks the central directory of an input of `size` bytes.
  ZipArchive(uint64_t size, ReadAt read_at, std::string origin);

  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(const std::string& name) const;
  // Where the entry's bytes start, checked to lie within the input: a reader calls it
  // before it allocates entry.size bytes for them.
  uint64_t data_offset(const ZipEntry& entry) const;
  // The entry's bytes into dst (entry.size of them), checked against its CRC-32.
  void read(const ZipEntry& entry, char* dst) const;
  // The same as a string, refusing an entry over `max_bytes` first.
  std::string read(const ZipEntry& entry, uint64_t max_bytes) const;

 private:
  struct Directory {
    uint64_t offset, size, count;
  };
  Directory find_directory() const;
  Directory find_zip64_directory(uint64_t end_record) const;
  void read_directory(const Directory& d);

  uint64_t size_;
  ReadAt read_at_;
  std::string origin_;
  std::vector<ZipEntry> entries_;
  std::map<std::string, size_t> by_name_;
};

}  // namespace tfm::io
