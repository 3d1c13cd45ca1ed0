#pragma once
// Training a BERT-style encoder with the masked-language-model objective on a text
// file (tfm::MaskedLmTask): windows of max_len - 1 tokens after [CLS]; 15% of the positions chosen, of
// those 80% replaced by [MASK], 10% by a random token, 10% kept; cross-entropy on
// the chosen positions. Validation reports masked-token accuracy on held-out text
// (with a fixed masking, so runs compare). The loop is the shared Trainer's.
#include <cstdint>
#include <ostream>
#include <vector>

#include "data/tokenizer.h"
#include "models/bert.h"
#include "models/stack_config.h"
#include "tfm/training.h"
#include "train/trainer.h"

namespace tfm::training {

// 4 layers, 4 heads, 128 dims, inputs of 64 tokens, no dropout.
models::StackConfig default_masked_lm();

tfm::TrainingResult run_masked_lm_training(const TrainerOptions& options, const tfm::MaskedLmTask& task, std::ostream& out);

// BERT's corruption of a batch of [CLS]-led windows, in place. Returns the targets:
// the original token at chosen positions, -1 elsewhere. At least one position of
// each row is chosen. The batch is rows [first_row, ...) of a larger one (a process's
// share): row r's choices come from the stream (key, first_row + r), whoever draws them.
std::vector<int> mask_tokens(models::Tokens& batch, const data::Tokenizer& tokenizer, double fraction, uint64_t key, int64_t first_row = 0);

// The family's settings of the training loop (tfm::MaskedLmTask::training_defaults()).
tfm::TrainingOptions masked_lm_training_defaults();

}  // namespace tfm::training
