#pragma once
// `tfm export --hf`: a checkpoint (tfm's, or a Hugging Face directory read as one)
// written as a Hugging Face model directory that transformers' from_pretrained and
// tfm's own loader read: config.json (and generation_config.json or
// preprocessor_config.json), model.safetensors, and the tokenizer's files (a Hugging
// Face tokenizer's own files; Marian's SentencePiece models and vocab.json; for a GPT or
// BERT trained with tfm's characters or SentencePiece, which Hugging Face's GPT-2 and
// BERT tokenizers cannot express, tfm_tokenizer.json, which tfm reads).
#include <string>

namespace tfm::decode {

// Writes into `dir`, which must not exist or be empty; a language model with the LoRA
// adapter directory `lora` (if given) merged into its weights.
void export_hf(const std::string& checkpoint, const std::string& dir, const std::string& lora = "");

}  // namespace tfm::decode
