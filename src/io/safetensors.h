#pragma once
// Reading and writing the safetensors format (an 8-byte little-endian header
// length, a JSON header, then raw tensor bytes). Files are read in F32, F16, BF16 and
// the integer dtypes, each tensor in its own dtype; tfm writes F32. Every field of a
// file we read is validated; writes go through io::OutputFile (temporary file + rename).
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace tfm::io {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct SafeTensors {
  std::map<std::string, std::string> metadata;
  NamedTensors tensors;  // in the order of their data in the file
  const Tensor* find(const std::string& name) const;
};

// An f16 or bf16 tensor widened exactly to f32 (an f32 one as it is).
Tensor to_f32(const Tensor& t);

// Throws tfm::Error naming the file and the first problem found.
SafeTensors read_safetensors(const std::string& path);
// The same without the tensors `skip` names (their bytes still read for the checksum
// where the file has one, but never kept).
SafeTensors read_safetensors(const std::string& path, const std::function<bool(const std::string& name)>& skip);
SafeTensors parse_safetensors(std::string_view bytes, const std::string& origin);

// Adds a "tfm.crc32" metadata entry over the tensor data, verified on reading.
std::string serialize_safetensors(const NamedTensors& tensors, std::map<std::string, std::string> metadata);
void write_safetensors(const std::string& path, const NamedTensors& tensors, const std::map<std::string, std::string>& metadata);

}  // namespace tfm::io
