// `tfm train`: the copy task with no data, a translation model with --train-src.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/validators.h"
#include "models/config.h"
#include "tensor/error.h"
#include "train/copy_task.h"
#include "train/translation.h"

namespace tfm::cli {

namespace {

// The copy task's exit status when a decoded sample is not an exact copy (1 and 2 are errors, 130 Ctrl-C).
constexpr int kNotAllCopied = 3;

}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
  struct Options {
    train::CopyTaskOptions copy;
    train::TranslationOptions mt;
    std::string config_path, out_dir, resume;
    int64_t steps = 0, log_every = 50, save_every = 0;
    uint64_t seed = 1;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model. With --train-src/--train-tgt: a translation model on a parallel corpus. Without data: the built-in copy task, "
      "which exits with status 3 if a decoded sample is not an exact copy.");
  cmd->add_option("--config", o->config_path, "Model configuration as a JSON file (see README)")->check(CLI::ExistingFile);
  cmd->add_option("--steps", o->steps, "Optimisation steps (copy task default 800; translation: no limit)")->check(at_least<int64_t>(0));
  cmd->add_option("--out", o->out_dir, "Directory for checkpoints (last, best), metrics.jsonl and curves.png (default runs/copy or runs/translation)");
  cmd->add_option("--save-every", o->save_every, "Also keep a step-N checkpoint every N steps (0: never)")->capture_default_str()->check(at_least<int64_t>(0));
  cmd->add_option("--seed", o->seed, "Random seed (initialisation, data order, dropout)")->capture_default_str();
  cmd->add_option("--resume", o->resume, "Continue the run saved in this checkpoint")->check(CLI::ExistingFile);
  cmd->add_option("--log-every", o->log_every, "Log interval in steps when output is not a terminal")->capture_default_str()->check(at_least<int64_t>(1));

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
  data->add_option("--preset", mt.preset, "Model size: small or base")->capture_default_str()->check(CLI::IsMember({"small", "base"}));
  data->add_option("--dropout", mt.dropout, "Dropout probability")->capture_default_str()->check(below(0.0f, 1.0f));
  data->add_option("--post-norm", [&mt](const CLI::results_t&) { mt.norm_first = false; return true; },
                   "Residual placement of the paper (default: pre-norm)")->expected(0);
  data->add_option("--max-tokens", mt.max_tokens, "Padded tokens per batch")->capture_default_str()->check(at_least<int64_t>(1));
  data->add_option("--accumulate", mt.accumulate, "Batches per optimiser step")->capture_default_str()->check(at_least<int64_t>(1));
  data->add_option("--epochs", mt.epochs, "Passes over the training data")->capture_default_str()->check(at_least<int64_t>(1));
  data->add_option("--max-minutes", mt.max_minutes, "Stop after this much training time (0: no limit)")->capture_default_str()->check(finite_nonneg<double>());
  data->add_option("--lr-factor", mt.lr_factor, "Factor of the warm-up learning-rate schedule")->capture_default_str()->check(positive_number<float>());
  data->add_option("--warmup", mt.warmup, "Warm-up steps")->capture_default_str()->check(at_least<int64_t>(1));
  data->add_option("--label-smoothing", mt.label_smoothing, "Label smoothing")->capture_default_str()->check(below(0.0f, 1.0f));
  data->add_option("--clip-norm", mt.clip_norm, "Gradient clipping by global norm (0: off)")->capture_default_str()->check(finite_nonneg<double>());
  data->add_option("--max-sentence-tokens", mt.max_sentence_tokens, "Skip training pairs with more subwords")->capture_default_str()->check(at_least<int64_t>(1));
  data->add_option("--validate-every", mt.validate_every, "Validation interval in steps")->capture_default_str()->check(at_least<int64_t>(1));
  data->add_option("--valid-sentences", mt.valid_sentences, "Sentences translated for validation BLEU (0: all)")->capture_default_str()->check(at_least<int64_t>(0));
  data->add_flag("--skip-nonfinite", mt.skip_nonfinite, "Skip steps with a non-finite loss or gradient instead of stopping");
  data->add_option("--patience", mt.patience, "Early stop after N validations without a better BLEU (0: never)")->capture_default_str()->check(at_least<int64_t>(0));

  cmd->callback([o, &exit_code] {
    if (!o->mt.train_src.empty() || !o->mt.train_tgt.empty()) {
      train::TranslationOptions mt = o->mt;
      TFM_CHECK(!mt.train_tgt.empty() && !mt.valid_src.empty() && !mt.valid_tgt.empty() && !mt.src_vocab.empty() && !mt.tgt_vocab.empty(),
                "translation training needs --train-src, --train-tgt, --valid-src, --valid-tgt, --src-vocab and --tgt-vocab");
      mt.config_path = o->config_path, mt.max_steps = o->steps, mt.seed = o->seed, mt.resume = o->resume, mt.log_every = o->log_every;
      mt.save_every = o->save_every;
      if (!o->out_dir.empty()) mt.out_dir = o->out_dir;
      exit_code = train::run_translation_training(mt, std::cout);
      return;
    }
    train::CopyTaskOptions copy = o->copy;
    if (!o->config_path.empty()) copy.model = models::TransformerConfig::from_file(o->config_path);
    if (o->steps > 0) copy.steps = o->steps;
    copy.seed = o->seed, copy.resume = o->resume, copy.log_every = o->log_every, copy.save_every = o->save_every;
    if (!o->out_dir.empty()) copy.out_dir = o->out_dir;
    train::CopyTaskResult r = train::run_copy_task(copy, std::cout);
    exit_code = r.exit_code != 0 ? r.exit_code : r.copied == r.decoded ? 0 : kNotAllCopied;
  });
}

}  // namespace tfm::cli
