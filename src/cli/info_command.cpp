// `tfm info`: what a checkpoint of any family holds.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "decode/embedding.h"
#include "decode/family_checkpoint.h"
#include "decode/hf_checkpoint.h"
#include "io/checkpoint.h"
#include "models/config.h"
#include "models/lora.h"
#include "models/stack_config.h"

namespace tfm::cli {

namespace {

// The configuration, parsed and validated as the family's own commands do.
std::string config_of(const io::Checkpoint& info, const std::string& path) {
  io::check_model_kind(info.model_kind, {"encoder_decoder", "gpt", "bert", "vit"}, path, "a translation, gpt, bert or vit one");
  if (info.model_kind == "encoder_decoder") return models::TransformerConfig::from_json(info.config_json, path).to_json();
  return models::StackConfig::from_json(info.config_json, path, info.model_kind).to_json();
}

// "characters (65)" or the SentencePiece model's path and checksum; the record as it is
// if it is malformed, since info describes a file and loads no tokenizer.
std::string tokenizer_summary(const std::string& record) {
  const nlohmann::json j = nlohmann::json::parse(record, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.value("type", "") == "characters" && j.contains("characters") && j["characters"].is_array())
    return "characters (" + std::to_string(j["characters"].size()) + ")";
  return record;
}

// What a model is, by its kind (and a BERT's head).
std::string family_of(const std::string& kind, const std::string& config_json, const std::string& path) {
  if (kind == "gpt") return "decoder-only language model (gpt)";
  if (kind == "bert") {
    const models::StackConfig c = models::StackConfig::from_json(config_json, path, "bert");
    if (c.head == "sequence") return std::string("sentence classifier (bert") + (c.multi_label ? ", multi-label" : "") + ")";
    if (c.head == "token") return "token classifier (bert)";
    if (c.head == "none") return "encoder without a head (bert)";
    return "masked-language-model encoder (bert)";
  }
  if (kind == "vit") return "Vision Transformer (vit)";
  return "encoder-decoder (translation or copy task)";
}

// A safetensors file tfm did not write (no tfm metadata): its tensors, as they are.
void describe_foreign(const io::SafeTensors& file) {
  constexpr size_t kListed = 40;
  int64_t params = 0;
  for (const auto& [name, t] : file.tensors) params += t.numel();
  std::cout << "model: none (no tfm metadata: a safetensors file tfm did not write)\ntensors: " << file.tensors.size()
            << ", parameters: " << params << "\n";
  for (size_t i = 0; i < file.tensors.size() && i < kListed; ++i)
    std::cout << "  " << file.tensors[i].first << " " << shape_str(file.tensors[i].second.shape()) << "\n";
  if (file.tensors.size() > kListed) std::cout << "  ... and " << file.tensors.size() - kListed << " more\n";
}

}  // namespace

void add_info_command(CLI::App& app, int&) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("info", "Show a checkpoint's family, configuration, size, vocabulary and training state");
  add_model_flag(cmd, *path, "Checkpoint file (safetensors) of any family");
  cmd->callback([path] {
    io::SafeTensors file = decode::read_model(*path);
    if (decode::is_hf_directory(*path)) std::cout << "from: a Hugging Face model directory, read as tfm converts it (tfm convert)\n";
    if (!file.metadata.count(io::kConfigKey) && !file.metadata.count(io::kModelKindKey)) return describe_foreign(file);
    io::Checkpoint info = io::checkpoint_info(file, *path);
    const std::string config = config_of(info, *path);
    int64_t params = 0;
    for (const auto& [name, t] : file.tensors)
      if (name.rfind(io::kOptimizerPrefix, 0) != 0) params += t.numel();
    std::cout << "model: " << info.model_kind << ", " << family_of(info.model_kind, info.config_json, *path) << "\nconfig: " << config << "\nparameters: " << params
              << "\n";
    if (info.metadata.count("tfm.vocab")) std::cout << "vocabularies: " << info.metadata.at("tfm.vocab") << "\n";
    if (info.metadata.count("tfm.tokenizer")) std::cout << "tokenizer: " << tokenizer_summary(info.metadata.at("tfm.tokenizer")) << "\n";
    else if (info.model_kind == "gpt") std::cout << "tokenizer: none that tfm reads (generate from token ids: tfm generate --prompt-ids)\n";
    if (info.metadata.count(decode::kImageFolderKey)) std::cout << "image folder: " << info.metadata.at(decode::kImageFolderKey) << "\n";
    for (const char* key : {decode::kTextLabelsKey, decode::kSentenceEmbeddingKey})  // a classifier's labels, a sentence embedder's pooling
      if (info.metadata.count(key)) std::cout << (key == decode::kTextLabelsKey ? "labels: " : "sentence embedding: ") << info.metadata.at(key) << "\n";
    if (info.metadata.count("tfm.averaged")) std::cout << "averaged from: " << info.metadata.at("tfm.averaged") << "\n";
    if (info.metadata.count(models::kLoraCheckpointKey)) {  // (its parameters are the adapters'; the model is its base's)
      const models::LoraSettings s = models::LoraSettings::from_json(info.metadata.at(models::kLoraCheckpointKey), *path);
      std::string targets;
      for (const std::string& t : s.targets) targets += (targets.empty() ? "" : ", ") + t;
      std::cout << "LoRA: adapters of rank " << s.rank << " (alpha " << s.alpha << ") on " << targets << " of the base " << s.base
                << "; the parameters above are the adapters'\n";
    }
    std::cout << "training state: " << (info.train_state.empty() ? "none" : info.train_state) << "\n";
  });
}

}  // namespace tfm::cli
