#pragma once
// Training a translation model on a parallel corpus (tfm::TranslationTask): subword
// encoding, token-bounded batches, label-smoothed cross-entropy, Adam with warm-up,
// gradient accumulation and clipping, periodic validation (loss, perplexity, BLEU,
// chrF of greedy translations), checkpoints (last, best by BLEU, every N steps), exact
// resume, early stopping, and a clean stop when asked.
#include <ostream>

#include "tfm/training.h"
#include "train/trainer.h"

namespace tfm::training {

tfm::TrainingResult run_translation_training(const TrainerOptions& options, const tfm::TranslationTask& task, std::ostream& out);

// The family's settings of the training loop (tfm::TranslationTask::training_defaults()).
tfm::TrainingOptions translation_training_defaults();

}  // namespace tfm::training
