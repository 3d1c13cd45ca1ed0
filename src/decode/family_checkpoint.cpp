#include "decode/family_checkpoint.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "decode/hf_checkpoint.h"
#include "tensor/error.h"

namespace tfm::decode {

std::string classes_record(const std::vector<std::string>& classes) { return nlohmann::json{{"classes", classes}}.dump(); }

std::vector<std::string> recorded_classes(const std::map<std::string, std::string>& metadata, int64_t classes, const std::string& origin,
                                          const char* key) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) return {};
  const nlohmann::json record = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  const bool names = record.is_object() && record.contains("classes") && record["classes"].is_array() &&
                     std::all_of(record["classes"].begin(), record["classes"].end(), [](const nlohmann::json& n) { return n.is_string(); });
  TFM_CHECK(names && static_cast<int64_t>(record["classes"].size()) == classes,
            origin << ": the record " << key << " in the metadata is malformed (expected " << classes << " class names)");
  return record["classes"].get<std::vector<std::string>>();
}

VitClasses recorded_vit_classes(const std::map<std::string, std::string>& metadata, int64_t classes, const std::string& origin) {
  std::vector<std::string> folder = recorded_classes(metadata, classes, origin);
  if (!folder.empty()) return {std::move(folder), true};
  return {recorded_classes(metadata, classes, origin, kIdxClassesKey), false};
}

std::vector<std::string> recorded_text_labels(const std::map<std::string, std::string>& metadata, int64_t classes, const std::string& origin) {
  std::vector<std::string> names = recorded_classes(metadata, classes, origin, kTextLabelsKey);
  for (int64_t i = static_cast<int64_t>(names.size()); i < classes; ++i) names.push_back("LABEL_" + std::to_string(i));
  return names;
}

FamilyCheckpoint open_family_checkpoint(const std::string& path, const std::string& kind, const std::string& made_by,
                                        const std::string& spm) {
  FamilyCheckpoint c{path, read_model(path), {}, std::nullopt};
  io::Checkpoint info = io::checkpoint_info(c.file, path);
  io::check_model_kind(info.model_kind, {kind}, path, made_by);
  c.config = models::StackConfig::from_json(info.config_json, path, kind);
  io::check_holds_model(c.file, c.config.weight_floats(), path);
  if (kind != "vit") {
    auto tok = info.metadata.find("tfm.tokenizer");
    // A Hugging Face language model whose tokenizer tfm does not read yet generates from ids.
    TFM_CHECK(tok != info.metadata.end() || kind == "gpt", path << ": records no tokenizer");
    if (tok != info.metadata.end()) c.tokenizer = data::Tokenizer::from_record(tok->second, path, spm);
  }
  return c;
}

std::optional<data::ImageProcessor> recorded_image_processor(const std::map<std::string, std::string>& metadata, const std::string& origin) {
  const auto it = metadata.find(kImageProcessorKey);
  if (it == metadata.end()) return std::nullopt;
  return data::ImageProcessor::from_json(it->second, origin);
}

}  // namespace tfm::decode
