#pragma once
// A tfm model as a Hugging Face model: config.json (and generation_config.json or
// preprocessor_config.json) and the tensors under Hugging Face's names, the rules of
// hf/families run backwards, so that hf::convert reads them back bit for bit. A setting
// the family's Hugging Face class cannot express is refused with its name (tfm's
// interleaved sinusoids, a final LayerNorm Marian lacks, a pre-norm BERT, ...).
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "hf/directory.h"
#include "io/safetensors.h"

namespace tfm::hf {

struct Exported {
  std::map<std::string, nlohmann::json> json_files;  // config.json and the family's other settings files
  io::NamedTensors tensors;                          // model.safetensors
};

// A classifier's labels (a ViT's or a BERT classifier's; empty: LABEL_i), and whether a ViT
// was trained on MNIST-style files (its images unresized: config.json then says so as
// "tfm_mnist_style", for tfm to read back).
struct Labels {
  std::vector<std::string> names;
  bool mnist_style = false;
};

// What a Llama-family directory says that tfm's configuration does not keep, for
// export_model to write back: model_type, the token ids of config.json and
// generation_config.json. Checkpoints record it as kSourceKey.
inline constexpr const char* kSourceKey = "tfm.hf_source";
nlohmann::json source_record(const Directory& d);

// `kind` and `config_json` as a checkpoint records them; `source`, what the Hugging Face
// directory a Llama-family model was read from said that tfm's configuration does not
// keep (hf::source_record: model_type, token ids, generation_config.json), or empty.
Exported export_model(const std::string& kind, const std::string& config_json, io::NamedTensors parameters, const Labels& labels,
                      const std::string& origin, const nlohmann::json& source = nlohmann::json::object());

}  // namespace tfm::hf
