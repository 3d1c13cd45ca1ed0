#pragma once
// The generation settings of a Hugging Face translation model (Marian, M2M100): what
// transformers' generate() starts from, as tfm reads them into the model's configuration.
#include <nlohmann/json.hpp>

#include "hf/directory.h"
#include "models/config.h"

namespace tfm::hf {

// What tfm's search takes of the settings transformers' generate() starts from
// (generation_config.json, else config.json; `class_defaults`: generation parameters the
// model's config class sets by default, MarianConfig's forced_eos_token_id 0, which count as
// set where config.json lacks them): the start symbol (decoder_start_token_id, else
// `start`), the end (eos_token_id, else `end`), transformers' rules, forced_eos_token_id,
// renormalize_logits and the length limit.
void read_generation(const Directory& d, const nlohmann::json& class_defaults, int start, int end, models::TransformerConfig& c);

}  // namespace tfm::hf
