#pragma once
// A Hugging Face model directory, as `save_pretrained` writes it and the hub serves it:
// config.json (the architecture, `model_type` naming the family), the weights in
// model.safetensors or pytorch_model.bin (torch.save's zip archive, read without Python),
// or in shards listed by model.safetensors.index.json or pytorch_model.bin.index.json, and the
// tokenizer's and image processor's files. tfm reads the families marian (opus-mt),
// gpt2, bert and vit (deit among them).
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "tensor/error.h"

namespace tfm::hf {

struct Directory {
  std::string path;
  nlohmann::json config;   // config.json
  std::string model_type;  // "marian", "gpt2", "llama", "mistral", "qwen2", "bert", "vit" or "deit"

  std::string file(const std::string& name) const { return path + "/" + name; }
  bool has(const std::string& name) const;
  // A JSON file of the directory (generation_config.json, tokenizer_config.json, ...);
  // an empty object where the file is absent.
  nlohmann::json json_file(const std::string& name) const;
};

// Whether `path` names a directory (a Hugging Face model, or nothing tfm reads).
bool is_directory(const std::string& path);

// Opens a model directory: config.json read and its model_type one tfm knows. A
// directory without config.json, one without weights tfm reads (TensorFlow's or Flax's
// only), or an unsupported model_type is one line saying what is supported and what to do.
Directory open(const std::string& path);

// Every tensor of the weights (model.safetensors, else pytorch_model.bin, or the shards an
// index lists, as transformers prefers them), as stored (f32, f16 or bf16), under the names transformers loads them by (TensorFlow-era
// LayerNorm.gamma and LayerNorm.beta renamed weight and bias, as bert-base-uncased needs).
io::NamedTensors read_weights(const Directory& d);

// A setting of config.json, or `fallback` where absent or null.
template <class T>
T setting(const Directory& d, const char* key, T fallback) {
  const auto it = d.config.find(key);
  if (it == d.config.end() || it->is_null()) return fallback;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    TFM_CHECK(it->is_number_integer(), d.file("config.json") << ": '" << key << "' is " << it->dump() << ", not an integer");
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(d.file("config.json") + ": '" + key + "' has the wrong type (" + it->dump() + ")");
  }
}

}  // namespace tfm::hf
