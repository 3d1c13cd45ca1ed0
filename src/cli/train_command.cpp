// `tfm train`: the copy task with no data, a translation model with --train-src.
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/stop_on_signal.h"
#include "cli/trainer_flags.h"
#include "cli/validators.h"
#include "data/text.h"
#include "models/config.h"
#include "tensor/error.h"
#include "train/copy_task.h"
#include "train/translation.h"

namespace tfm::cli {

namespace {

// The copy task's exit status when a decoded sample is not an exact copy (1 and 2 are errors, 130 Ctrl-C).
constexpr int kNotAllCopied = 3;

// The copy task's defaults for the shared flags whose translation defaults (the ones
// --help shows) do not suit it, where they were not given.
train::TrainerOptions copy_trainer(const CLI::App& cmd, train::TrainerOptions t) {
  const train::TrainerOptions d = train::CopyTaskOptions::default_trainer();
  auto given = [&cmd](const char* flag) { return cmd.count(flag) > 0; };
  if (!given("--out")) t.out_dir = d.out_dir;
  if (!given("--steps")) t.max_steps = d.max_steps;
  // As many epochs as the steps need (--steps 0: one), unless given.
  constexpr int64_t kBatches = train::CopyTaskOptions::kEpochBatches;
  if (!given("--epochs")) t.epochs = std::max<int64_t>(1, (t.max_steps + kBatches - 1) / kBatches);
  if (!given("--warmup")) t.schedule.warmup = d.schedule.warmup;
  if (!given("--clip-norm")) t.clip_norm = d.clip_norm;
  if (!given("--validate-every")) t.validate_every = d.validate_every;
  return t;
}

// Usage error for any of `flags` given: they belong to the other task.
void refuse_flags(const CLI::App& cmd, std::initializer_list<const char*> flags, const std::string& why) {
  for (const char* flag : flags) require_usage(cmd.count(flag) == 0, std::string(flag) + " " + why);
}

}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
  struct Options {
    train::CopyTaskOptions copy;
    train::TranslationOptions mt;
    std::string config_path, preset = "small";
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
  cmd->add_option("--config", o->config_path, "Model configuration as a JSON file (see README)")->check(CLI::ExistingFile);
  add_trainer_flags(cmd, o->mt.trainer);
  cmd->add_option("--lr-factor", o->mt.trainer.schedule.lr, "Former name of --lr")->group("Deprecated")->check(positive_number<float>());

  auto* copy = cmd->add_option_group("copy task");
  copy->add_option("--batch", o->copy.batch, "Copy task: sequences per batch")->capture_default_str()->check(at_least<int64_t>(1));
  copy->add_option("--seq-len", o->copy.seq_len, "Copy task: sequence length, start symbol included (2 to the model's max_len: 64 unless --config says otherwise)")
      ->capture_default_str()->check(at_least<int64_t>(2));
  copy->add_option("--samples", o->copy.samples, "Copy task: sequences to decode and print after training")->capture_default_str()->check(at_least<int64_t>(0));

  train::TranslationOptions& mt = o->mt;
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

  cmd->callback([o, cmd, &exit_code] {
    if (!o->mt.train_src.empty() || !o->mt.train_tgt.empty()) {
      refuse_flags(*cmd, {"--batch", "--seq-len", "--samples"}, "applies only to the copy task (tfm train without --train-src)");
      train::TranslationOptions mt = o->mt;
      if (cmd->count("--preset")) mt.preset = o->preset;
      if (cmd->count("--dropout")) mt.dropout = o->dropout;
      if (o->post_norm) mt.norm_first = false;
      TFM_CHECK(!mt.train_tgt.empty() && !mt.valid_src.empty() && !mt.valid_tgt.empty() && !mt.src_vocab.empty() && !mt.tgt_vocab.empty(),
                "translation training needs --train-src, --train-tgt, --valid-src, --valid-tgt, --src-vocab and --tgt-vocab");
      mt.config_path = o->config_path;
      mt.trainer.precision = precision_flag(*cmd);
      const StopOnSignal stop(mt.trainer);  // Ctrl-C, SIGTERM: stop after this step and save
      exit_code = train::run_translation_training(mt, std::cout);
      return;
    }
    refuse_flags(*cmd,
                 {"--preset", "--valid-src", "--valid-tgt", "--src-vocab", "--tgt-vocab", "--max-tokens", "--label-smoothing",
                  "--max-sentence-tokens", "--valid-sentences"},
                 "applies only to translation training (with --train-src and --train-tgt); the copy task's model comes from --config");
    train::CopyTaskOptions copy = o->copy;
    if (!o->config_path.empty()) copy.model = models::TransformerConfig::from_file(o->config_path, copy.model);
    if (!o->config_path.empty()) {
      const nlohmann::json given = nlohmann::json::parse(data::read_file(o->config_path));  // kept: items() refers to it
      for (const auto& field : given.items()) copy.model_fields_given.push_back(field.key());
    }
    if (cmd->count("--dropout")) copy.model.dropout = o->dropout, copy.model_fields_given.push_back("dropout");
    if (o->post_norm) copy.model.norm_first = false, copy.model_fields_given.push_back("norm_first");
    copy.trainer = copy_trainer(*cmd, o->mt.trainer);
    copy.trainer.precision = precision_flag(*cmd);
    const StopOnSignal stop(copy.trainer);  // Ctrl-C, SIGTERM: stop after this step and save
    train::CopyTaskResult r = train::run_copy_task(copy, std::cout);
    exit_code = r.exit_code != 0 ? r.exit_code : r.copied == r.decoded ? 0 : kNotAllCopied;
  });
}

}  // namespace tfm::cli
