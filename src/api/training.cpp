// tfm::train (include/tfm/training.h): the public options handed to the Trainer (each
// task's defaults for them are beside its model's, in train/). In a process that has joined a launcher's job (`mpirun
// -np N tfm ...`), the job's processes train the model together and rank 0 alone writes.
#include "tfm/training.h"

#include <iostream>

#include "dist/launched_job.h"

#include "train/copy_task.h"
#include "train/language_model.h"
#include "train/masked_lm.h"
#include "train/bert_classifiers.h"
#include "train/translation.h"
#include "train/vit.h"

namespace tfm {

namespace {

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

TrainingOptions TranslationTask::training_defaults() { return training::translation_training_defaults(); }
TrainingOptions CopyTask::training_defaults() { return training::copy_training_defaults(); }
TrainingOptions LanguageModelTask::training_defaults() { return training::language_model_training_defaults(); }
TrainingOptions VitTask::training_defaults() { return training::vit_training_defaults(); }
TrainingOptions MaskedLmTask::training_defaults() { return training::masked_lm_training_defaults(); }
TrainingOptions SentenceClassifierTask::training_defaults() { return training::sentence_classifier_training_defaults(); }
TrainingOptions TokenClassifierTask::training_defaults() { return training::token_classifier_training_defaults(); }

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

TrainingResult train(const TrainingOptions& options, const SentenceClassifierTask& task, std::stop_token stop, std::ostream* log) {
  return training::run_sentence_classifier_training(trainer_options(options, std::move(stop), log), task, log_or_stdout(log));
}

TrainingResult train(const TrainingOptions& options, const TokenClassifierTask& task, std::stop_token stop, std::ostream* log) {
  return training::run_token_classifier_training(trainer_options(options, std::move(stop), log), task, log_or_stdout(log));
}

}  // namespace tfm
