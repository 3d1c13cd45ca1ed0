#pragma once
// The Annotated Transformer's first example: learn to copy random symbol
// sequences. It is tfm's built-in job (`tfm train` with no data): small, fast,
// and a complete check that the encoder, decoder, loss, optimiser and the shared
// training loop work.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "models/config.h"
#include "tensor/rng.h"
#include "train/step.h"
#include "train/trainer.h"

namespace tfm::train {

struct CopyTaskOptions {
  models::TransformerConfig model = default_model();
  int64_t batch = 48;
  int64_t seq_len = 10;  // including the leading start symbol
  int64_t samples = 5;   // sequences decoded at the end (the validation)
  TrainerOptions trainer = default_trainer();

  // The fields of `model` the user chose (model flags, --config): a resumed run checks
  // them against its checkpoint's.
  std::vector<std::string> model_fields_given;

  // Batches in an epoch. They are fresh random ones, so an epoch is only a unit of count.
  static constexpr int64_t kEpochBatches = 800;
  static models::TransformerConfig default_model();
  // 800 steps (one epoch), the paper's schedule with factor 1 and 200 warm-up steps, no
  // clipping, validation only at the end, runs/copy.
  static TrainerOptions default_trainer();
};

struct CopyTaskResult {
  int exit_code = 0;                // 0 done, 130 interrupted
  std::vector<double> losses;       // one per step run in this call
  int64_t copied = 0, decoded = 0;  // exact copies among the decoded samples
};

// A batch of `batch` sequences of random symbols 2..vocab-1 after start symbol 1.
Seq2SeqBatch make_copy_batch(Rng& rng, int64_t batch, int64_t seq_len, int64_t vocab);

CopyTaskResult run_copy_task(const CopyTaskOptions& options, std::ostream& out);

}  // namespace tfm::train
