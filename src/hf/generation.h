#pragma once
// The generation settings of a Hugging Face translation model (Marian, M2M100): what
// transformers' generate() starts from, as tfm reads them into the model's configuration.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>

#include "hf/directory.h"

namespace tfm::hf {

// The settings generate() starts from, and the file that holds them:
// generation_config.json where the directory has one (a key it lacks takes
// GenerationConfig's default), else config.json (GenerationConfig.from_model_config).
struct Generation {
  nlohmann::json settings;
  std::string file;
};

// The directory's settings. `class_defaults`: generation parameters the model's config
// class sets by default (MarianConfig's forced_eos_token_id 0, not PretrainedConfig's
// None), which count as set where config.json does not set them.
Generation generation_of(const Directory& d, const nlohmann::json& class_defaults = nlohmann::json::object());

// A generation setting; nothing where absent or null.
template <class T>
std::optional<T> generation_setting(const Generation& g, const char* key) {
  const auto it = g.settings.find(key);
  if (it == g.settings.end() || it->is_null()) return std::nullopt;
  const bool integral = std::is_integral_v<T> && !std::is_same_v<T, bool>;
  TFM_CHECK(!integral || it->is_number_integer(), g.file << ": '" << key << "' is " << it->dump() << ", not an integer");
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(g.file + ": '" + key + "' has the wrong type (" + it->dump() + ")");
  }
}

// A token id of the generation settings, else config.json's, else `fallback`.
int generation_id(const Directory& d, const Generation& g, const char* key, int fallback);

// generate()'s length limit, the start symbol included: max_new_tokens + 1 where set (it
// takes precedence), else max_length (GenerationConfig's default 20).
int64_t generation_max_length(const Generation& g);

}  // namespace tfm::hf
