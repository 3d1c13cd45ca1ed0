#pragma once
// Training a decoder-only language model on a text file (tfm::LanguageModelTask):
// characters or SentencePiece tokens, the first 90% for training and the last 10% for
// validation (unless a validation file is given), random windows of `max_len` tokens
// as nanoGPT samples them, next-token cross-entropy, validation loss over the whole
// held-out text. The loop, checkpoints and resume are the shared Trainer's.
#include <ostream>

#include "models/stack_config.h"
#include "tfm/training.h"
#include "train/trainer.h"

namespace tfm::training {

// nanoGPT's CPU recipe for shakespeare_char: 4 layers, 4 heads, 128 dims, context 64
// (d_ff: 4 x d_model unless given).
models::StackConfig default_language_model();

tfm::TrainingResult run_language_model_training(const TrainerOptions& options, const tfm::LanguageModelTask& task, std::ostream& out);

// The family's settings of the training loop (tfm::LanguageModelTask::training_defaults()).
tfm::TrainingOptions language_model_training_defaults();

}  // namespace tfm::training
