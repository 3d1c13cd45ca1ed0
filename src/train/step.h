#pragma once
// One optimisation step, as every training run takes it (the Trainer's loop; bench/
// times the same): each batch's loss goes backward (with several processes, the
// gradient buckets are summed across them as the pass completes them), the summed
// gradients are divided by the step's count and clipped over the flat gradient buffer,
// then Adam updates every parameter in one pass. Nothing in it waits for the device
// but one read: the step's losses and gradient norm, together.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "dist/communicator.h"
#include "nn/module.h"
#include "tfm/training.h"
#include "train/optimizer.h"

namespace tfm::training {

// A batch's loss (a scalar, the mean over what it averages) and its counts.
struct BatchLoss {
  Tensor loss;         // undefined where this process's share of the batch is empty
  int64_t items = 0;   // tokens or images, for throughput
  // What the loss is a mean over (target tokens, images, masked tokens): a step's loss
  // is the mean over all of them in its batches. 0: `items`.
  int64_t averaged_over = 0;
};

struct StepOptions {
  AdamOptions adam;
  double clip_norm = 0.0;  // the gradients' largest global L2 norm; 0: no clipping
  // The processes training the model together (null: this one alone), summing each
  // bucket of at most bucket_mb MiB of the flat gradient buffer as soon as its
  // gradients are complete; with shard_optimizer, each updates its share of the
  // weights (ZeRO stage 1) and the shares are gathered.
  dist::Communicator* comm = nullptr;
  double bucket_mb = 16;
  bool shard_optimizer = false;
};

// What a step's gradients came to, the same on every process.
struct StepGradients {
  double loss = 0;       // the mean over every counted token (image...) of the step's batches
  double grad_norm = 0;  // before clipping
  double count = 0;      // what the loss is a mean over
  int64_t items = 0;
  std::vector<double> flags;  // the caller's flags, summed over the processes
  bool finite() const;        // loss and gradient norm both
};

class OptimizationStep {
 public:
  // Lays the model's parameters out in flat buffers on its device (the model is there
  // already) and makes the optimiser; `notes` hears what the options change.
  OptimizationStep(nn::Module& model, StepOptions options, std::ostream& notes);

  // Zeroes the gradients, runs batches [first, end) of `batch_loss` backward and
  // finishes the gradients (summed across the processes, divided by the step's count,
  // clipped). `flags`, asked once the batches are done (the caller's host values: stop
  // requests...), are summed across the processes along with the counts, so that every
  // process decides alike.
  using Flags = std::function<std::vector<double>()>;
  StepGradients gradients(const std::function<BatchLoss(int64_t)>& batch_loss, int64_t first, int64_t end, const Flags& flags = {});
  // Adam's update with those gradients at learning rate `lr` (each process's share
  // gathered, where sharded).
  void update(float lr);

  Adam& optimizer() { return *optimizer_; }
  // The optimiser's moments of every parameter (gathered from the processes' shares).
  std::vector<std::pair<std::string, Tensor>> optimizer_state() const;

 private:
  // The parameters this process's optimiser updates: all of them, or with a sharded
  // optimiser its share, which it sets shard_ to.
  std::vector<std::pair<std::string, Tensor>> optimized_parameters(std::ostream& notes);
  // Divides the summed gradients by `count` (where `divide`) and clips them; returns
  // their sum of squares (f32 [] on the device; the whole model's where sharded).
  Tensor finish_gradients(double count, bool divide);

  nn::Module& model_;
  const nn::FlatParameters& flat_;
  StepOptions o_;
  std::unique_ptr<Adam> optimizer_;
  // ZeRO stage 1 (shard_optimizer with several processes): process r's optimiser updates
  // the parameters in [cuts[r], cuts[r + 1]) of the flat buffers alone.
  struct Shard {
    std::vector<int64_t> counts;  // floats of each process's share
    int64_t begin = 0, end = 0;   // this process's
  };
  std::optional<Shard> shard_;
};

}  // namespace tfm::training
