// `tfm train`: the copy task with no data, a translation model with --train-src.
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/stop_on_signal.h"
#include "cli/trainer_flags.h"
#include "cli/validators.h"
#include "tfm/training.h"

namespace tfm::cli {

namespace {

// The copy task's exit status when a decoded sample is not an exact copy (1 and 2 are errors, 130 Ctrl-C).
constexpr int kNotAllCopied = 3;

// Usage error for any of `flags` given: they belong to the other task.
void refuse_flags(const CLI::App& cmd, std::initializer_list<const char*> flags, const std::string& why) {
  for (const char* flag : flags) require_usage(cmd.count(flag) == 0, std::string(flag) + " " + why);
}

}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
  struct Options {
    tfm::CopyTask copy;
    tfm::TranslationTask mt;
    tfm::TrainingOptions training = tfm::TranslationTask::training_defaults();  // --help shows translation's
    std::string preset = "small";
    float dropout = 0.1f;
    bool post_norm = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model. With --train-src/--train-tgt: a translation model on a parallel corpus. Without data: the built-in copy task, "
      "which exits with status 3 if a decoded sample is not an exact copy. The defaults shown are translation's; the copy task's "
      "differ: --steps 800, --warmup 200, --clip-norm 0, --validate-every 0, --out runs/copy. --lr is the factor of the "
      "paper's schedule (lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)).");
  cmd->add_option("--config", o->mt.config, "Model configuration as a JSON file (see README)")->check(CLI::ExistingFile);
  auto trainer = std::make_shared<TrainerFlags>(cmd, o->training);
  trainer->add(cmd->add_option_group("Deprecated"), "--lr-factor", [](tfm::TrainingOptions& t) -> auto& { return t.schedule.lr; },
               "Former name of --lr")
      ->check(positive_up_to(tfm::Schedule::kMaxLr));

  auto* copy = cmd->add_option_group("copy task");
  copy->add_option("--batch", o->copy.batch, "Copy task: sequences per batch")->capture_default_str()->check(at_least<int64_t>(1));
  copy->add_option("--seq-len", o->copy.seq_len, "Copy task: sequence length, start symbol included (2 to the model's max_len: 64 unless --config says otherwise)")
      ->capture_default_str()->check(at_least<int64_t>(2));
  copy->add_option("--samples", o->copy.samples, "Copy task: sequences to decode and print after training")->capture_default_str()->check(at_least<int64_t>(0));

  tfm::TranslationTask& mt = o->mt;
  auto* data = cmd->add_option_group("translation");
  data->add_option("--train-src", mt.train_src, "Training source text, one sentence a line (plain or .gz)")->check(CLI::ExistingFile);
  data->add_option("--train-tgt", mt.train_tgt, "Training target text, line-aligned with --train-src")->check(CLI::ExistingFile);
  data->add_option("--valid-src", mt.valid_src, "Validation source text")->check(CLI::ExistingFile);
  data->add_option("--valid-tgt", mt.valid_tgt, "Validation target text")->check(CLI::ExistingFile);
  data->add_option("--src-vocab", mt.src_vocab, "Source SentencePiece model (from `tfm vocab`)")->check(CLI::ExistingFile);
  data->add_option("--tgt-vocab", mt.tgt_vocab, "Target SentencePiece model (same file for a joint vocabulary)")->check(CLI::ExistingFile);
  // Model flags given override --config, which overrides the preset.
  data->add_option("--preset", o->preset, "Model size: small or base")->capture_default_str()->check(CLI::IsMember({"small", "base"}));
  data->add_option("--dropout", o->dropout, "Dropout probability (default: the preset's or --config's; the copy task's too)")->check(below(0.0f, 1.0f));
  data->add_flag("--post-norm", o->post_norm, "Residual placement of the paper (default: pre-norm; the copy task's too)");
  data->add_option("--max-tokens", mt.max_tokens, "Padded tokens (source and target) per batch")->capture_default_str()->check(at_least<int64_t>(1));
  data->add_option("--label-smoothing", mt.label_smoothing, "Label smoothing")->capture_default_str()->check(below(0.0f, 1.0f));
  data->add_option("--max-sentence-tokens", mt.max_sentence_tokens, "Skip training pairs with more subwords")->capture_default_str()->check(at_least<int64_t>(1));
  data->add_option("--valid-sentences", mt.valid_sentences, "Sentences translated for validation BLEU (0: all)")->capture_default_str()->check(at_least<int64_t>(0));
  data->add_option("--src-lang", mt.source_language, "A many-to-many model's source language (fine-tuning M2M100's en, NLLB's eng_Latn, mBART-50's en_XX)");
  data->add_option("--tgt-lang", mt.target_language, "A many-to-many model's target language (M2M100's de, NLLB's deu_Latn, mBART-50's de_DE)");

  cmd->callback([o, cmd, trainer, &exit_code] {
    // The model flags of both tasks, as settings over --config.
    nlohmann::json model = nlohmann::json::object();
    if (cmd->count("--dropout")) model["dropout"] = o->dropout;
    if (o->post_norm) model["norm_first"] = false;
    const std::string settings = model.empty() ? "" : model.dump();
    tfm::TrainingOptions training = o->training;
    training.precision = to_string(precision_flag(*cmd));
    training.device = device_flag(*cmd);
    const StopOnSignal stop;  // Ctrl-C, SIGTERM, SIGHUP, a closed output pipe: stop after this step and save
    if (!o->mt.train_src.empty() || !o->mt.train_tgt.empty()) {
      refuse_flags(*cmd, {"--batch", "--seq-len", "--samples"}, "applies only to the copy task (tfm train without --train-src)");
      tfm::TranslationTask& mt = o->mt;  // the library refuses missing files, naming fields and flags
      if (cmd->count("--preset")) mt.preset = o->preset;
      mt.model = settings;
      exit_code = tfm::train(training, mt, stop.token()).stopped ? 130 : 0;
      return;
    }
    refuse_flags(*cmd,
                 {"--preset", "--valid-src", "--valid-tgt", "--src-vocab", "--tgt-vocab", "--max-tokens", "--label-smoothing",
                  "--max-sentence-tokens", "--valid-sentences"},
                 "applies only to translation training (with --train-src and --train-tgt); the copy task's model comes from --config");
    tfm::CopyTask& copy = o->copy;
    copy.config = o->mt.config;
    copy.model = settings;
    // The copy task's defaults, under the flags given; as many epochs as the steps need (--steps 0: one), unless given.
    tfm::TrainingOptions copy_training = tfm::CopyTask::training_defaults();
    trainer->given_onto(copy_training);
    constexpr int64_t kBatches = tfm::CopyTask::kEpochBatches;
    if (!cmd->count("--epochs")) copy_training.epochs = std::max<int64_t>(1, (copy_training.max_steps + kBatches - 1) / kBatches);
    copy_training.precision = training.precision;
    copy_training.device = training.device;
    const tfm::TrainingResult r = tfm::train(copy_training, copy, stop.token());
    const auto copied = std::find_if(r.metrics.begin(), r.metrics.end(), [](const auto& m) { return m.first == "copied"; });
    const bool all_copied = copy.samples == 0 || copied == r.metrics.end() || copied->second == 1.0;
    exit_code = r.stopped ? 130 : all_copied ? 0 : kNotAllCopied;
  });
}

}  // namespace tfm::cli
