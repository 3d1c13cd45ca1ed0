#pragma once
// Hugging Face models in tfm's terms: the configuration config.json describes, as tfm's
// (models::TransformerConfig for marian, models::StackConfig for gpt2, llama, mistral, qwen2, bert, vit and deit),
// and the weights under tfm's parameter names, in a file just like a tfm checkpoint
// (metadata tfm.model and tfm.config), so that every loader reads either.
#include <string>

#include "hf/directory.h"
#include "io/safetensors.h"

namespace tfm::hf {

// The directory's model as a tfm checkpoint's contents: kind "encoder_decoder" (marian),
// "gpt", "bert" or "vit" (deit too). A setting tfm cannot compute as Hugging Face does is refused
// with its name.
io::SafeTensors convert(const Directory& d);

}  // namespace tfm::hf
