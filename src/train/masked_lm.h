#pragma once
// Training a BERT-style encoder with the masked-language-model objective on a text
// file: windows of max_len - 1 tokens after [CLS]; 15% of the positions chosen, of
// those 80% replaced by [MASK], 10% by a random token, 10% kept; cross-entropy on
// the chosen positions. Validation reports masked-token accuracy on held-out text
// (with a fixed masking, so runs compare). The loop is the shared Trainer's.
#include <cstdint>
#include <ostream>
#include <vector>

#include "data/tokenizer.h"
#include "models/bert.h"
#include "models/stack_config.h"
#include "train/text_data.h"
#include "train/trainer.h"

namespace tfm::train {

struct MaskedLmOptions {
  TextSource data;
  models::StackConfig model = default_model();
  std::string config_origin = "model configuration";  // what errors in `model` name (e.g. its --config file)
  int64_t batch = 64;
  double mask_fraction = 0.15;
  TrainerOptions trainer = default_trainer();

  // 4 layers, 4 heads, 128 dims, inputs of 64 tokens, no dropout.
  static models::StackConfig default_model();
  // AdamW 2e-3, weight decay 0.01, 200 warm-up steps, cosine decay over 3,000 steps.
  static TrainerOptions default_trainer();
};

int run_masked_lm_training(const MaskedLmOptions& options, std::ostream& out);

// BERT's corruption of a batch of [CLS]-led windows, in place. Returns the targets:
// the original token at chosen positions, -1 elsewhere. At least one position of
// the batch is chosen.
std::vector<int> mask_tokens(models::Tokens& batch, const data::Tokenizer& tokenizer, double fraction, Rng& rng);

}  // namespace tfm::train
