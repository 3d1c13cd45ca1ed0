#pragma once
// The Annotated Transformer's first example: learn to copy random symbol
// sequences. It is tfm's built-in job (`tfm train` with no data): small, fast,
// and a complete check that the encoder, decoder, loss, optimiser and the shared
// training loop work.
#include <cstdint>
#include <ostream>
#include <vector>

#include "models/config.h"
#include "tensor/rng.h"
#include "tfm/training.h"
#include "train/seq2seq.h"
#include "train/trainer.h"

namespace tfm::training {

// 2 + 2 layers, d_model 128, 4 heads, d_ff 256, vocabulary 11, pre-norm, dropout 0.1.
models::TransformerConfig default_copy_model();

struct CopyTaskResult {
  tfm::TrainingResult run;
  std::vector<double> losses;       // one per step run in this call
  int64_t copied = 0, decoded = 0;  // exact copies among the decoded samples
};

// A batch of `batch` sequences of random symbols 2..vocab-1 after start symbol 1.
Seq2SeqBatch make_copy_batch(Rng& rng, int64_t batch, int64_t seq_len, int64_t vocab);

CopyTaskResult run_copy_task(const TrainerOptions& options, const tfm::CopyTask& task, std::ostream& out);

// The family's settings of the training loop (tfm::CopyTask::training_defaults()).
tfm::TrainingOptions copy_training_defaults();

}  // namespace tfm::training
