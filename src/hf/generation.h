#pragma once
// The generation settings of a Hugging Face model: what transformers' generate() starts
// from, as tfm reads them into a translation model's configuration (Marian, M2M100) or a
// language model's end tokens (the Llama family).
#include <nlohmann/json.hpp>
#include <vector>

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

// The tokens that end a language model's text, as generate() reads eos_token_id (one id or
// a list: Llama 3's and Qwen2's chat models end a turn with a token of its own); empty
// where the settings name none.
std::vector<int> end_tokens(const Directory& d);

}  // namespace tfm::hf
