#pragma once
// Training a decoder-only language model on a text file: characters or
// SentencePiece tokens, the first 90% for training and the last 10% for validation
// (unless a validation file is given), random windows of `context` tokens as
// nanoGPT samples them, next-token cross-entropy, validation loss over the whole
// held-out text. The loop, checkpoints and resume are the shared Trainer's.
#include <ostream>
#include <string>

#include "models/stack_config.h"
#include "train/text_data.h"
#include "train/trainer.h"

namespace tfm::train {

struct LanguageModelOptions {
  TextSource data;
  models::StackConfig model = default_model();
  std::string config_origin = "model configuration";  // what errors in `model` name (e.g. its --config file)
  int64_t batch = 12;
  int64_t sample_tokens = 300;  // sample printed at the end (0: none)
  TrainerOptions trainer = default_trainer();

  // nanoGPT's CPU recipe for shakespeare_char: 4 layers, 4 heads, 128 dims, context 64.
  static models::StackConfig default_model();
  // ... and its optimiser: AdamW 1e-3, beta2 0.99, weight decay 0.1, 100 warm-up steps,
  // cosine decay to 1e-4 at 2,000 steps, clipping 1.0.
  static TrainerOptions default_trainer();
};

int run_language_model_training(const LanguageModelOptions& options, std::ostream& out);

}  // namespace tfm::train
