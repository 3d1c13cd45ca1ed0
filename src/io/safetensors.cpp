#include "io/safetensors.h"

#include <libdeflate.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>

#include "io/finite.h"
#include "io/output_file.h"
#include "io/random_access_file.h"
#include "tensor/float_formats.h"
#include "tensor/error.h"

namespace tfm::io {

using nlohmann::json;

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;

// The format's dtype names tfm reads (Hugging Face checkpoints come in F32, F16 and BF16;
// reference files hold integer ids and u8 images too).
constexpr std::pair<const char*, DType> kDTypeNames[] = {{"F32", DType::f32}, {"F16", DType::f16}, {"BF16", DType::bf16},
                                                        {"I64", DType::i64}, {"I32", DType::i32}, {"I8", DType::i8},
                                                        {"U8", DType::u8},   {"BOOL", DType::boolean}};

std::optional<DType> dtype_named(const std::string& name) {
  for (const auto& [n, t] : kDTypeNames)
    if (name == n) return t;
  return std::nullopt;
}

// The CRC-32 (zlib's) of the bytes after those `crc` covered.
uint32_t crc_update(uint32_t crc, const char* data, size_t n) { return libdeflate_crc32(crc, data, n); }

// Each tensor's CRC-32, as JSON in a metadata entry: {"name": crc, ...}.
constexpr const char* kTensorChecksums = "tfm.crc32.tensors";

// The file's tensor checksums (none where it has no such entry).
std::map<std::string, uint32_t> tensor_checksums(const std::map<std::string, std::string>& metadata, const std::string& origin) {
  std::map<std::string, uint32_t> sums;
  const auto it = metadata.find(kTensorChecksums);
  if (it == metadata.end()) return sums;
  const json j = json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  TFM_CHECK(j.is_object() && !j.empty(), origin << ": the metadata's tensor checksums are malformed");
  for (auto e = j.begin(); e != j.end(); ++e) {
    TFM_CHECK(e.value().is_number_unsigned() && e.value().get<uint64_t>() <= UINT32_MAX, origin << ": the metadata's tensor checksums are malformed");
    sums[e.key()] = e.value().get<uint32_t>();
  }
  return sums;
}

// Which tensors a reader keeps: all (an empty function), or those `skip` does not name.
using Skip = std::function<bool(const std::string& name)>;

// The header is validated before any data is read, then each tensor is read straight
// into its own buffer: no copy of the whole file is held besides the tensors. Each
// tensor is checked against its own checksum, and a skipped one is not read at all;
// in a file with one checksum over all the data (written before 2026-11-26), a skipped
// tensor's bytes pass through a small buffer for it. Values are checked last.
SafeTensors parse(uint64_t file_size, const ReadAt& read_at, const std::string& origin, const Skip& skip = {}) {
  TFM_CHECK(file_size >= 8, origin << ": too short to be a safetensors file (" << file_size << " bytes)");
  uint64_t header_len = 0;
  read_at(0, 8, reinterpret_cast<char*>(&header_len));  // little-endian on every supported target
  TFM_CHECK(header_len <= kMaxHeaderBytes, origin << ": the header length field says " << header_len << " bytes, over tfm's limit of "
                                                  << kMaxHeaderBytes << " (corrupted or not safetensors)");
  TFM_CHECK(header_len <= file_size - 8, origin << ": the header length field says " << header_len << " bytes, but only " << file_size - 8
                                                << " bytes follow it (truncated or not safetensors)");
  std::string header_text(static_cast<size_t>(header_len), '\0');
  read_at(8, header_text.size(), header_text.data());
  json header;
  try {
    header = json::parse(header_text);
  } catch (const json::exception&) {  // parse errors, and numbers too large for any type
    throw Error(origin + ": header is not valid JSON (corrupted or not a safetensors file)");
  }
  TFM_CHECK(header.is_object(), origin << ": header is not a JSON object");
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = file_size - data_start;

  SafeTensors out;
  struct Entry {
    std::string name;
    Shape shape;
    DType dtype;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      TFM_CHECK(v.is_object(), origin << ": __metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        TFM_CHECK(m.value().is_string(), origin << ": metadata '" << m.key() << "' is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    TFM_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
              origin << ": tensor '" << name << "' lacks dtype, shape or data_offsets");
    TFM_CHECK(v["dtype"].is_string(), origin << ": tensor '" << name << "' has a non-string dtype");
    const std::string dtype = v["dtype"].get<std::string>();
    const std::optional<DType> type = dtype_named(dtype);
    TFM_CHECK(type, origin << ": tensor '" << name << "' has dtype " << v["dtype"].dump() << "; tfm reads F32, F16, BF16, I64, I32, I8, U8 and BOOL");
    Entry e{name, {}, *type, 0, 0};
    TFM_CHECK(v["shape"].is_array(), origin << ": tensor '" << name << "' has a malformed shape");
    // `span` is the product of the nonzero dimensions: it bounds numel and every stride,
    // which a zero dimension would otherwise let overflow ([0, 2^40-1, 2^40-1] has numel 0).
    uint64_t numel = 1, span = 1;
    for (const json& d : v["shape"]) {
      TFM_CHECK(d.is_number_unsigned() && d.get<uint64_t>() < (1ull << 40), origin << ": tensor '" << name << "' has a malformed shape");
      e.shape.push_back(d.get<int64_t>());
      numel *= d.get<uint64_t>();
      span *= std::max<uint64_t>(d.get<uint64_t>(), 1);
      TFM_CHECK(span < (1ull << 40), origin << ": tensor '" << name << "' is implausibly large");
    }
    const json& off = v["data_offsets"];
    TFM_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(),
              origin << ": tensor '" << name << "' has malformed data_offsets");
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    TFM_CHECK(e.begin <= e.end, origin << ": tensor '" << name << "' has data_offsets [" << e.begin << ", " << e.end << "] that run backwards");
    TFM_CHECK(e.end - e.begin == numel * size_of(e.dtype),
              origin << ": tensor '" << name << "' has " << (e.end - e.begin) << " bytes of data for shape " << shape_str(e.shape) << " of "
                     << to_string(e.dtype) << " (" << numel * size_of(e.dtype) << " bytes)");
    TFM_CHECK(e.end <= data_size, origin << ": truncated: tensor '" << name << "' needs data up to byte " << e.end << " but only "
                                         << data_size << " bytes follow the header");
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  uint64_t expected = 0;
  for (const Entry& e : entries) {
    TFM_CHECK(e.begin == expected, origin << ": tensor data overlaps or leaves a gap at '" << e.name << "'");
    expected = e.end;
  }
  TFM_CHECK(expected == data_size, origin << ": " << (data_size - expected) << " trailing bytes after the last tensor");
  // Each tensor's checksum where the file has them (tfm writes them since 2026-11-26):
  // skipped tensors are then never read. Else the whole data's, over every byte.
  const std::map<std::string, uint32_t> sums = tensor_checksums(out.metadata, origin);
  const bool checksum = sums.empty() && out.metadata.count("tfm.crc32") > 0;
  uint32_t crc = 0;
  std::vector<char> passing;  // a skipped tensor's bytes, a piece at a time
  for (const Entry& e : entries) {
    if (skip && skip(e.name)) {
      for (uint64_t at = e.begin; checksum && at < e.end; at += passing.size()) {
        passing.resize(static_cast<size_t>(std::min<uint64_t>(e.end - at, 1u << 20)));
        read_at(data_start + at, passing.size(), passing.data());
        crc = crc_update(crc, passing.data(), passing.size());
      }
      continue;
    }
    Tensor t = Tensor::empty(e.shape, e.dtype);
    read_at(data_start + e.begin, e.end - e.begin, static_cast<char*>(t.raw_data()));
    if (checksum) crc = crc_update(crc, static_cast<const char*>(t.raw_data()), e.end - e.begin);
    if (!sums.empty()) {
      const auto it = sums.find(e.name);
      TFM_CHECK(it != sums.end() && it->second == crc_update(0, static_cast<const char*>(t.raw_data()), e.end - e.begin),
                origin << ": checksum mismatch in tensor '" << e.name << "', the file is corrupted");
    }
    out.tensors.emplace_back(e.name, t);
  }
  if (checksum) TFM_CHECK(std::to_string(crc) == out.metadata.at("tfm.crc32"), origin << ": checksum mismatch, the file is corrupted");
  out.metadata.erase(kTensorChecksums);  // (the file's own: a copy written elsewhere gets its own)
  for (const auto& [name, t] : out.tensors) TFM_CHECK(all_finite(t), origin << ": tensor '" << name << "' contains a non-finite value");
  return out;
}

}  // namespace

Tensor to_f32(const Tensor& t) {
  if (t.dtype() == DType::f32) return t;
  TFM_CHECK(t.dtype() == DType::f16 || t.dtype() == DType::bf16, "expected a floating-point tensor, got " << to_string(t.dtype()));
  const Tensor c = t.clone();  // contiguous
  Tensor out = Tensor::empty(t.shape());
  const uint16_t* in = static_cast<const uint16_t*>(c.raw_data());
  const bool half = t.dtype() == DType::f16;
  for (int64_t i = 0; i < t.numel(); ++i) out.data()[i] = half ? from_f16(in[i]) : from_bf16(in[i]);  // exact widenings
  return out;
}

const Tensor* SafeTensors::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

SafeTensors parse_safetensors(std::string_view bytes, const std::string& origin) {
  return parse(bytes.size(), memory_reader(bytes), origin);
}

SafeTensors read_safetensors(const std::string& path) { return read_safetensors(path, {}); }

SafeTensors read_safetensors(const std::string& path, const Skip& skip) {
  const RandomAccessFile file(path);
  return parse(file.size(), file.reader(), path, skip);
}

std::string serialize_safetensors(const NamedTensors& tensors, std::map<std::string, std::string> metadata) {
  std::string data;
  json header = json::object(), sums = json::object();
  for (const auto& [name, t] : tensors) {
    TFM_CHECK(!header.contains(name), "duplicate tensor name '" << name << "'");
    TFM_CHECK(name != "__metadata__", "a tensor may not be named '__metadata__' (the format's name for the metadata)");
    std::vector<float> values = t.to_vector();
    for (float v : values) TFM_CHECK(std::isfinite(v), "refusing to write tensor '" << name << "': it holds non-finite values");
    const size_t begin = data.size();
    data.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
    header[name] = {{"dtype", "F32"}, {"shape", t.shape()}, {"data_offsets", {begin, data.size()}}};
    sums[name] = crc_update(0, data.data() + begin, data.size() - begin);
  }
  metadata["tfm.crc32"] = std::to_string(crc_update(0, data.data(), data.size()));  // (what readers before the per-tensor sums check)
  if (!tensors.empty()) metadata[kTensorChecksums] = sums.dump();
  header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep tensor data 8-byte aligned
  const uint64_t len = text.size();
  std::string out(reinterpret_cast<const char*>(&len), 8);
  return out + text + data;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, serialize_safetensors(tensors, metadata));
}

}  // namespace tfm::io
