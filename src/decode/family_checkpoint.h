#pragma once
// Opening a checkpoint of one of the single-stack families (gpt, bert, vit) for a
// program: refuses other kinds with one line, and rebuilds the configuration and,
// for the text families, the tokenizer the model was trained with.
#include <optional>
#include <string>

#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "models/stack_config.h"

namespace tfm::decode {

struct FamilyCheckpoint {
  std::string path;
  io::SafeTensors file;
  models::StackConfig config;
  std::optional<data::Tokenizer> tokenizer;  // gpt and bert
};

// `made_by` completes "is a <kind> checkpoint, not <made_by>"; `spm` overrides a
// recorded SentencePiece path.
FamilyCheckpoint open_family_checkpoint(const std::string& path, const std::string& kind, const std::string& made_by,
                                        const std::string& spm = "");

}  // namespace tfm::decode
