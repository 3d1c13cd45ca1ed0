#include "hf/generation.h"

#include <optional>
#include <string>
#include <type_traits>

#include "hf/families.h"

namespace tfm::hf {

namespace {

// The settings generate() starts from, and the file that holds them:
// generation_config.json where the directory has one (a key it lacks takes
// GenerationConfig's default), else config.json (GenerationConfig.from_model_config).
struct Generation {
  nlohmann::json settings;
  std::string file;
};

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

// Whether the configuration sets a generation parameter to other than PretrainedConfig's
// default (its _has_non_default_generation_parameters), the config class's own defaults
// counting where config.json lacks the key.
bool sets_generation_parameters(nlohmann::json config, const nlohmann::json& class_defaults) {
  for (const auto& [key, value] : class_defaults.items())
    if (!config.contains(key)) config[key] = value;
  static const nlohmann::json defaults = {
      {"max_length", 20},        {"min_length", 0},          {"do_sample", false},
      {"early_stopping", false}, {"num_beams", 1},           {"num_beam_groups", 1},
      {"diversity_penalty", 0.0}, {"temperature", 1.0},      {"top_k", 50},
      {"top_p", 1.0},            {"typical_p", 1.0},         {"repetition_penalty", 1.0},
      {"length_penalty", 1.0},   {"no_repeat_ngram_size", 0}, {"encoder_no_repeat_ngram_size", 0},
      {"bad_words_ids", nullptr}, {"num_return_sequences", 1}, {"output_scores", false},
      {"return_dict_in_generate", false}, {"forced_bos_token_id", nullptr}, {"forced_eos_token_id", nullptr},
      {"remove_invalid_values", false}, {"exponential_decay_length_penalty", nullptr}, {"suppress_tokens", nullptr},
      {"begin_suppress_tokens", nullptr}};
  for (const auto& [key, value] : defaults.items())
    if (config.contains(key) && config[key] != value) return true;
  return false;
}

// The settings, and generate()'s legacy rule: it prefers config.json to a generation_config.json that was
// made from the model configuration ("_from_model_config") where config.json sets a
// generation parameter of its own.
Generation generation_of(const Directory& d, const nlohmann::json& class_defaults) {
  if (!d.has("generation_config.json")) return {d.config, d.file("config.json")};
  nlohmann::json file = d.json_file("generation_config.json");
  TFM_CHECK(file.is_object(), d.file("generation_config.json") << ": is not a JSON object");
  const bool from_model_config = file.contains("_from_model_config") && file["_from_model_config"] == true;
  if (from_model_config && sets_generation_parameters(d.config, class_defaults)) return {d.config, d.file("config.json")};
  return {std::move(file), d.file("generation_config.json")};
}

// A token id of the generation settings, else config.json's, else `fallback`.
int generation_id(const Directory& d, const Generation& g, const char* key, int fallback) {
  return generation_setting<int>(g, key).value_or(setting<int>(d, key, fallback));
}

// generate()'s length limit, the start symbol included: max_new_tokens + 1 where set (it
// takes precedence), else max_length (GenerationConfig's default 20).
int64_t generation_max_length(const Generation& g) {
  const std::optional<int64_t> new_tokens = generation_setting<int64_t>(g, "max_new_tokens");
  if (!new_tokens) return generation_setting<int64_t>(g, "max_length").value_or(20);
  TFM_CHECK(*new_tokens >= 0 && *new_tokens < (int64_t{1} << 40), g.file << ": max_new_tokens " << *new_tokens << " is not a number of tokens");
  return *new_tokens + 1;
}
}  // namespace

void read_generation(const Directory& d, const nlohmann::json& class_defaults, int start, int end, models::TransformerConfig& c) {
  const Generation generation = generation_of(d, class_defaults);
  c.bos_id = generation_id(d, generation, "decoder_start_token_id", start);
  c.eos_id = generation_id(d, generation, "eos_token_id", end);
  c.hf_search = true;
  // Where generate() starts from config.json, a key it lacks takes the config class's default
  // (MBartConfig's forced_eos_token_id 2), as the configuration object transformers loads has it.
  const bool from_config = generation.file == d.file("config.json");
  const int forced_eos = generation_id(d, generation, "forced_eos_token_id", from_config ? class_defaults.value("forced_eos_token_id", -1) : -1);
  c.forced_eos = forced_eos == c.eos_id;
  c.renormalize = generation_setting<bool>(generation, "renormalize_logits").value_or(false);
  c.max_length = generation_max_length(generation);
}

std::vector<int> end_tokens(const Directory& d) {
  const Generation generation = generation_of(d, nlohmann::json::object());
  const auto it = generation.settings.find("eos_token_id");
  if (it == generation.settings.end() || it->is_null()) return {};
  const nlohmann::json ids = it->is_array() ? *it : nlohmann::json::array({*it});
  for (const nlohmann::json& id : ids)
    TFM_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < (int64_t{1} << 31),
              generation.file << ": eos_token_id " << it->dump() << " is not a token id or a list of them");
  return ids.get<std::vector<int>>();
}

}  // namespace tfm::hf
