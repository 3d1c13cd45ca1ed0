#pragma once
// The one training loop every model family uses (translation, language model,
// ViT, masked LM). A family supplies a TrainingTask: its model, its batches and
// its validation. The Trainer does the rest: learning-rate schedule, Adam/AdamW,
// gradient accumulation and clipping, non-finite checks, progress, metrics.jsonl
// and curves.png, checkpoints (last, best, every N steps), exact resume (step,
// epoch, batch position, dropout RNG, optimizer moments), early stopping, time
// limits and a clean stop when asked (TrainerOptions::stop: the command line sets it on
// Ctrl-C/SIGTERM). With TrainerOptions::comm, several processes train the model
// together (data parallelism): each computes its share of every batch, the gradients
// are summed across them, and rank 0 alone writes (progress, metrics, checkpoints).
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "dist/communicator.h"
#include "io/checkpoint.h"
#include "io/output_file.h"
#include "nn/module.h"
#include "ops/linear_products.h"
#include "tensor/rng.h"
#include "tfm/training.h"
#include "train/optimizer.h"
#include "train/schedule.h"
#include "train/step.h"

namespace tfm::training {


// The public options (tfm::TrainingOptions: the command line's flags) and what only the
// library sets.
struct TrainerOptions : tfm::TrainingOptions {
  // Requested (by a library caller, or the command line on Ctrl-C/SIGTERM): stop after
  // the current step and save last.safetensors, as a time limit does.
  std::stop_token stop;
  // The processes training this model together (null: this one alone). Each bucket of
  // the model's flat gradient buffer (consecutive whole parameters, at most bucket_mb
  // unless one parameter is larger) is summed across them as soon as its gradients for
  // the step are complete, while the step's last backward pass goes on, in buffer order;
  // the Trainer then divides by the step's token count across them all.
  dist::Communicator* comm = nullptr;
  // Progress lines into the run's log stream (a library caller's) instead of standard error.
  bool progress_to_log = false;

  TrainerOptions() = default;
  TrainerOptions(const tfm::TrainingOptions& options, std::stop_token stop = {}) : tfm::TrainingOptions(options), stop(std::move(stop)) {}
};

// Validation results: named metrics, and the one score that picks the best checkpoint.
struct Validation {
  std::vector<std::pair<std::string, double>> metrics;  // e.g. {"valid_loss", 1.2}, {"bleu", 35.1}
  std::string score_name;                                // one of the metric names
  bool higher_is_better = true;
  double score() const;
};

// What a model family plugs into the Trainer.
class TrainingTask {
 public:
  virtual ~TrainingTask() = default;
  virtual nn::Module& model() = 0;
  // Fresh weights for a new run.
  virtual void init_parameters(Rng& rng) = 0;
  // Kind, configuration and extra metadata (vocabularies...) for checkpoints.
  virtual io::Checkpoint describe() const = 0;
  // Refuses a checkpoint the task cannot continue (e.g. other vocabularies).
  virtual void check_resumable(const io::Checkpoint& saved, const std::string& origin) const { (void)saved, (void)origin; }
  // A fine-tuning run's first weights, from `file` (--init-from): every parameter of the
  // model from the file; a task whose model differs from the file's in a part (a new
  // classifier) initialises that part from `rng` instead. Returns what it did, for the log.
  virtual std::string init_from(const io::SafeTensors& file, const std::string& origin, Rng& rng);
  // A model the task computes with but does not train (the base under LoRA adapters, whose
  // adapter is model()): moved to the device with model(), given the run's precision, frozen.
  virtual nn::Module* frozen_model() { return nullptr; }
  // After rank 0 wrote the checkpoint `path` (a LoRA run writes its adapter beside it).
  virtual void saved(const std::string& path) { (void)path; }
  // Prepares epoch `epoch` (from 1) and returns its number of batches. The batch
  // order must depend only on (seed, epoch) so that a resumed run sees the same data.
  virtual int64_t begin_epoch(int64_t epoch, uint64_t seed) = 0;
  using BatchLoss = training::BatchLoss;  // train/step.h
  virtual BatchLoss batch_loss(int64_t index) = 0;
  // Runs without gradients; the Trainer switches the model to eval() and back.
  virtual Validation validate() = 0;
  // The processes training together (null: this one alone), set by the Trainer before
  // the first begin_epoch. Then batch_loss computes this process's share of the batch's
  // samples (share()), padded as the whole batch is, after model().set_batch_rows(), and
  // returns the share's loss (undefined where the share is empty) and counts; validate
  // splits its work among the processes and combines their results, so that every
  // process returns the same validation.
  void join(dist::Communicator* comm) { comm_ = comm; }
  // What the task trains on, in a few words that change with it ("29000 pairs, fnv
  // 1a2b..."), which every process of a job must agree on ("": nothing to compare).
  virtual std::string data_fingerprint() const { return ""; }
  // What `items` counts, for the progress line ("tok", "img").
  virtual std::string unit() const { return "tok"; }
  // A line printed after the summary at the end of the run (samples, accuracy...); may be empty.
  virtual std::string report() { return ""; }

 protected:
  // This process's share of n samples (all of them when alone).
  dist::Range share(int64_t n) const { return comm_ ? comm_->share(n) : dist::Range{0, n}; }
  // This process's share of a training batch of n samples, which the model is told of
  // (its dropout masks are then the whole batch's).
  dist::Range take_share(int64_t n) {
    const dist::Range mine = share(n);
    model().set_batch_rows(mine.begin, mine.size());
    return mine;
  }
  dist::Communicator* comm_ = nullptr;
};

class Trainer {
 public:
  // Takes the output directory for the Trainer's lifetime (one run per directory; a
  // fresh run refuses a directory that holds another run's files unless options.force)
  // and reads options.resume or options.init_from (if set) so that the caller can rebuild
  // the model from its configuration.
  Trainer(TrainerOptions options, std::ostream& out);
  // The checkpoint the run starts from, if any: the one being resumed, or the weights a
  // fine-tuning run starts from (a Hugging Face directory read as a checkpoint); the
  // task takes its architecture and vocabulary. started_from_path() names it.
  const std::optional<io::Checkpoint>& started_from() const { return resumed_info_; }
  const std::string& started_from_path() const { return o_.resume.empty() ? o_.init_from : o_.resume; }
  // For schedules that depend on the model (Noam's d_model), known once it is built.
  void set_schedule(const Schedule& s) { o_.schedule = s; }
  // Trains; result.stopped: interrupted by the stop token (the command's exit code 130).
  tfm::TrainingResult run(TrainingTask& task);
  // Best validation score of the run so far (the first validation's if none yet).
  double best_score() const { return state_.best_score; }

 private:
  struct State {
    int64_t step = 0, epoch = 1, batch = 0;  // next batch of `epoch` to train on
    uint64_t dropout_rng = 0;  // the root of every batch's dropout streams
    double best_score = 0, elapsed_s = 0;
    bool has_best = false;
    int64_t bad_validations = 0;
  };
  // Rank 0 (or the only process) writes the run's files and progress.
  bool root() const { return !o_.comm || o_.comm->rank() == 0; }
  // Every process's weights are the same (their sums agree); checked before each save.
  void check_replicas(const nn::Module& model) const;
  // Every process of the job was given the same model settings, training flags, data and
  // starting weights; checked at the start, each difference named.
  void check_same_job(TrainingTask& task) const;
  std::string score_name_ = "score";
  std::string data_;  // task.data_fingerprint(), hashed once a run: recorded with each save, compared on resume
  void save(TrainingTask& task, const std::string& name);
  void write_checkpoint(TrainingTask& task, const std::string& name, std::vector<std::pair<std::string, Tensor>> optimizer) const;
  bool validate(TrainingTask& task, double elapsed_s);  // true: patience exhausted
  void log_metrics(const std::string& json_line) const;
  void draw_curves();          // curves.png from metrics.jsonl; a failure warns once
  bool curves_failed_ = false;
  void claim_out_dir();       // refuses another run's directory (without --force)
  void claim_out_dir_to_resume();  // the same, where the run's own directory is allowed
  void refuse_rewind() const;      // a resume from an earlier save must not overwrite the later ones
  void clear_previous_run();  // removes that run's files, once this run is under way
  bool previous_run_saved_model() const;
  std::string previous_run_names() const;
  void trim_metrics() const;

  TrainerOptions o_;
  ops::Precision precision_ = ops::Precision::f32;
  Device device_ = Device::CPU;
  std::vector<std::pair<std::string, double>> last_metrics_;  // the last validation's
  std::ostream& out_;
  std::optional<io::DirectoryLock> lock_;
  std::vector<std::string> previous_run_;  // another run's files in out_dir, removed by clear_previous_run
  io::SafeTensors resumed_file_;
  std::optional<io::Checkpoint> resumed_info_;
  std::unique_ptr<dist::Communicator> gpu_sums_;  // NCCL's, between GPUs (null: o_.comm's)
  std::unique_ptr<OptimizationStep> step_;         // made by run()
  State state_;
};

}  // namespace tfm::training
