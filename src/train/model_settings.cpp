#include "train/model_settings.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "models/json_fields.h"
#include "tensor/error.h"

namespace tfm::training {

namespace {

// A JSON value as a user writes it: floats with 6 significant digits (0.1, not 0.10000000149011612).
std::string shown(const nlohmann::json& v) {
  if (!v.is_number_float()) return v.dump();
  std::ostringstream os;
  os << v.get<double>();
  return os.str();
}

}  // namespace

ModelSettings::ModelSettings(const std::string& config_path, const std::string& model_json) {
  if (!config_path.empty()) layers_.emplace_back(config_path, models::read_config_file(config_path)), origin_ = config_path;
  if (!model_json.empty()) layers_.emplace_back("the model settings", model_json);
}

models::StackConfig ModelSettings::over(models::StackConfig c) const {
  for (const auto& [origin, text] : layers_) c = models::StackConfig::from_json(text, origin, c.family, c, /*validate=*/false);
  return c;
}

models::TransformerConfig ModelSettings::over(models::TransformerConfig c) const {
  for (const auto& [origin, text] : layers_) c = models::TransformerConfig::from_json(text, origin, c, /*validate=*/false);
  return c;
}

void ModelSettings::put_first(const std::string& origin, const std::string& json) { layers_.insert(layers_.begin(), {origin, json}); }

bool ModelSettings::gives(const std::string& key) const {
  for (const auto& layer : layers_) {
    const nlohmann::json j = nlohmann::json::parse(layer.second, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains(key)) return true;
  }
  return false;
}

void ModelSettings::check_kept(const std::string& chosen, const std::string& saved, const std::string& resume) const {
  const nlohmann::json c = nlohmann::json::parse(chosen), s = nlohmann::json::parse(saved);
  std::string differ;
  for (const auto& [key, value] : c.items())
    if (key != kTrainingSetting && gives(key) && s.contains(key) && s[key] != value)
      differ += (differ.empty() ? "" : ", ") + key + " " + shown(value) + " (" + resume + ": " + shown(s[key]) + ")";
  TFM_CHECK(differ.empty(),
            "the model settings disagree with " << resume << ": " << differ << " (a run resumed or started from a checkpoint keeps its architecture; dropout may change)");
}

}  // namespace tfm::training
