#pragma once
// The token streams of the text families (language model, masked LM): a tokenizer
// (characters or SentencePiece, or the one a resumed checkpoint recorded) and the
// training and validation tokens (a validation file, or the last fraction of the text).
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "io/checkpoint.h"

namespace tfm::train {

struct TextSource {
  std::string text;        // training text (plain or .gz)
  std::string valid_text;  // optional
  double valid_fraction = 0.1;
  std::string spm;         // SentencePiece model; empty: characters
};

struct TextData {
  data::Tokenizer tokenizer;
  std::vector<int> train, valid;
};

// `kind` is the model kind a resumed checkpoint must have ("gpt", "bert").
TextData load_text_data(const TextSource& source, const std::optional<io::Checkpoint>& resumed, const std::string& resume_path,
                        const std::string& kind);

}  // namespace tfm::train
