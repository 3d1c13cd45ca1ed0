#pragma once
// A Hugging Face model directory read as a tfm checkpoint: hf::convert's weights and
// configuration, and the records of its tokenizer that tfm's own checkpoints keep
// (tfm.vocab for a translation model: Marian's SentencePiece models mapped through
// vocab.json; tfm.tokenizer for GPT-2's byte-level BPE and BERT's WordPiece; tfm.classes
// for a ViT's labels). Every loader that takes a checkpoint takes a directory through it,
// and `tfm convert` writes it as a file.
#include <string>

#include "io/safetensors.h"

namespace tfm::decode {

// Where a directory tfm exported keeps a tokenizer Hugging Face's GPT-2 and BERT cannot
// express (tfm's characters or SentencePiece): its record, and the SentencePiece model.
inline constexpr const char* kTfmTokenizer = "tfm_tokenizer.json";
inline constexpr const char* kTfmTokenizerModel = "tfm_tokenizer.model";

// `path` is a directory (a Hugging Face model), not a checkpoint file.
bool is_hf_directory(const std::string& path);

io::SafeTensors read_hf_checkpoint(const std::string& dir);

// What every command and library class reads where a checkpoint is accepted: a tfm
// checkpoint file (its weights: io::read_weights), or a Hugging Face model directory.
io::SafeTensors read_model(const std::string& path);

}  // namespace tfm::decode
