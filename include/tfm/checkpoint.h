#pragma once
// Checkpoints as maps of name -> array, for programs that read or write tfm's files
// (safetensors, float32, PyTorch's parameter names: README "Checkpoints and PyTorch").
//
//   tfm::Checkpoint c = tfm::read_checkpoint("runs/lm/best.safetensors");
//   const tfm::Array& w = c.tensors.at("tok_embed.weight");  // w.shape, w.values
//   tfm::write_checkpoint("edited.safetensors", c);
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tfm/export.h"

namespace tfm {

struct Array {
  std::vector<int64_t> shape;
  std::vector<float> values;  // row-major
};

struct Checkpoint {
  std::map<std::string, Array> tensors;
  std::map<std::string, std::string> metadata;  // "tfm.config", "tfm.tokenizer", ... (README)
};

// Throws std::runtime_error naming the file and the first problem found (every field
// is checked, and the checksum of files tfm wrote).
TFM_API Checkpoint read_checkpoint(const std::string& path);

// Writes atomically (a temporary file, synced and renamed: the previous file survives any
// failure), with a checksum of the data; shapes must fit their values.
TFM_API void write_checkpoint(const std::string& path, const Checkpoint& checkpoint);

// Which class runs a checkpoint tfm wrote: "translation" (tfm::Translator; `tfm train`),
// "gpt" (tfm::Generator; `tfm lm train`), "bert" (tfm::Encoder; `tfm bert train`) or
// "vit" (tfm::Classifier; `tfm vit train`). Throws std::runtime_error for any other file.
TFM_API std::string checkpoint_family(const std::string& path);

}  // namespace tfm
