// tfm::train (include/tfm/training.h): the public options handed to the Trainer, and
// each task's defaults for them. In a process that has joined a launcher's job (`mpirun
// -np N tfm ...`), the job's processes train the model together and rank 0 alone writes.
#include "tfm/training.h"

#include <iostream>

#include "dist/launched_job.h"

#include "train/copy_task.h"
#include "train/language_model.h"
#include "train/masked_lm.h"
#include "train/translation.h"
#include "train/vit.h"

namespace tfm {

namespace {

// An encoder-decoder's trainer (`tfm train`): the paper's schedule (factor 1, `warmup`
// steps) and AdamW, whose weight decay is 0 unless given, as in every trainer.
TrainingOptions paper(const char* out_dir, int64_t warmup, double clip_norm, int64_t validate_every) {
  TrainingOptions t;
  t.out_dir = out_dir;
  t.schedule = {Schedule::Kind::Noam, 1.0f, 0.0f, warmup, 0, /*d_model: the model's*/ 0};
  t.adam.decoupled = true;
  t.clip_norm = clip_norm;
  t.validate_every = validate_every;
  return t;
}

// A cosine schedule from `lr` to `min_lr` after `warmup` steps, and AdamW.
TrainingOptions cosine(const char* out_dir, float lr, float min_lr, int64_t warmup, float beta2, float weight_decay) {
  TrainingOptions t;
  t.out_dir = out_dir;
  t.schedule = {Schedule::Kind::Cosine, lr, min_lr, warmup, /*decay_steps: the run's last step*/ 0, 0};
  t.adam = {lr, 0.9f, beta2, 1e-8f, weight_decay, /*decoupled=*/true};
  t.clip_norm = 1.0;
  return t;
}

// Training on random windows of a text: the step count decides, not the epochs.
TrainingOptions steps_of_windows(TrainingOptions t, int64_t max_steps, int64_t validate_every) {
  t.epochs = 1000000;
  t.max_steps = max_steps;
  t.validate_every = validate_every;
  return t;
}

// Where the run's lines go: the log if given, else standard output; nowhere on the
// processes of a job other than rank 0.
std::ostream& log_or_stdout(std::ostream* log) {
  static std::ostream nowhere(nullptr);  // a stream without a buffer drops what it is given
  const dist::Communicator* job = dist::launched_job();
  if (job && job->rank() != 0) return nowhere;
  return log ? *log : std::cout;
}

// The Trainer's options for a public call: progress lines go where the log goes, if given.
training::TrainerOptions trainer_options(const TrainingOptions& options, std::stop_token stop, std::ostream* log) {
  training::TrainerOptions t(options, std::move(stop));
  t.progress_to_log = log != nullptr;
  t.comm = dist::launched_job();
  return t;
}

}  // namespace

TrainingOptions TranslationTask::training_defaults() {
  TrainingOptions t = paper("runs/translation", /*warmup=*/1000, /*clip_norm=*/1.0, /*validate_every=*/500);
  t.epochs = 30;
  return t;
}

TrainingOptions CopyTask::training_defaults() {
  TrainingOptions t = paper("runs/copy", /*warmup=*/200, /*clip_norm=*/0, /*validate_every=*/0);
  t.max_steps = kEpochBatches;
  return t;
}

TrainingOptions LanguageModelTask::training_defaults() {
  return steps_of_windows(cosine("runs/lm", 1e-3f, 1e-4f, /*warmup=*/100, /*beta2=*/0.99f, /*weight_decay=*/0.1f), 2000, 250);
}

TrainingOptions VitTask::training_defaults() {
  TrainingOptions t = cosine("runs/vit", 1e-3f, 1e-5f, /*warmup=*/300, /*beta2=*/0.999f, /*weight_decay=*/0.05f);
  t.epochs = 16;
  t.validate_every = 430;  // about once an epoch at batch 128
  return t;
}

TrainingOptions MaskedLmTask::training_defaults() {
  // A high peak rate: with [MASK] in place of a token, the model must learn to read its
  // neighbours through the learned positions, and at 5e-4 it stays on the unigram plateau.
  return steps_of_windows(cosine("runs/bert", 2e-3f, 1e-5f, /*warmup=*/200, /*beta2=*/0.999f, /*weight_decay=*/0.01f), 3000, 500);
}

TrainingResult train(const TrainingOptions& options, const TranslationTask& task, std::stop_token stop, std::ostream* log) {
  return training::run_translation_training(trainer_options(options, std::move(stop), log), task, log_or_stdout(log));
}

TrainingResult train(const TrainingOptions& options, const CopyTask& task, std::stop_token stop, std::ostream* log) {
  return training::run_copy_task(trainer_options(options, std::move(stop), log), task, log_or_stdout(log)).run;
}

TrainingResult train(const TrainingOptions& options, const LanguageModelTask& task, std::stop_token stop, std::ostream* log) {
  return training::run_language_model_training(trainer_options(options, std::move(stop), log), task, log_or_stdout(log));
}

TrainingResult train(const TrainingOptions& options, const VitTask& task, std::stop_token stop, std::ostream* log) {
  return training::run_vit_training(trainer_options(options, std::move(stop), log), task, log_or_stdout(log));
}

TrainingResult train(const TrainingOptions& options, const MaskedLmTask& task, std::stop_token stop, std::ostream* log) {
  return training::run_masked_lm_training(trainer_options(options, std::move(stop), log), task, log_or_stdout(log));
}

}  // namespace tfm
