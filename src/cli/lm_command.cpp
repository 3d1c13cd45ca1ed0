// `tfm lm train`: a decoder-only language model on a text file.
// `tfm generate`: text from a trained language model.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "decode/family_checkpoint.h"
#include "cli/stop_on_signal.h"
#include "cli/trainer_flags.h"
#include "cli/validators.h"
#include "data/text.h"
#include "data/tokenizer.h"
#include "decode/sampling.h"
#include "io/checkpoint.h"
#include "io/output_file.h"
#include "ops/reduced_precision.h"
#include "tensor/error.h"
#include "train/language_model.h"

namespace tfm::cli {

void add_lm_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<train::LanguageModelOptions>();
  CLI::App* lm = app.add_subcommand("lm", "Decoder-only (GPT) language models");
  help_without_subcommand(*lm, exit_code);
  CLI::App* cmd = lm->add_subcommand(
      "train", "Train a language model on a text file (defaults: nanoGPT's CPU shakespeare_char recipe)");
  add_text_flags(cmd, o->data);
  auto m = std::make_shared<ModelFlags>(cmd, o->model, "gpt");
  m->bind(m->group()->add_option("--context", o->model.max_len, "Context window in tokens")->capture_default_str()->check(at_least<int64_t>(1)),
          "max_len");
  m->bind(m->group()->add_flag("!--sinusoidal", o->model.learned_positions, "The paper's sinusoidal positions instead of a learned table"),
          "learned_positions");
  cmd->add_option("--batch", o->batch, "Windows of --context tokens per batch")->capture_default_str()->check(at_least<int64_t>(1));
  cmd->add_option("--sample-tokens", o->sample_tokens, "Tokens of sample text printed at the end (0: none)")->capture_default_str()->check(at_least<int64_t>(0));
  add_trainer_flags(cmd, o->trainer);
  cmd->callback([o, m, cmd, &exit_code] {
    m->check_resume(o->trainer.resume);
    train::LanguageModelOptions run = *o;
    run.trainer.precision = precision_flag(*cmd);
    models::StackConfig base = m->defaults();
    base.d_ff = 0;  // 4 x d_model unless --config or --d-ff gives it
    run.model = m->resolve(base, run.config_origin);
    if (run.model.d_ff == 0) run.model.d_ff = 4 * run.model.d_model;
    const StopOnSignal stop(run.trainer);  // Ctrl-C, SIGTERM: stop after this step and save
    exit_code = train::run_language_model_training(run, std::cout);
  });
}

void add_generate_command(CLI::App& app, int& exit_code) {
  struct Options {
    std::string checkpoint, prompt, spm, output = "-";
    decode::SamplingOptions sampling;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text with a language model from `tfm lm train`");
  add_model_flag(cmd, o->checkpoint, "Checkpoint from `tfm lm train` (e.g. runs/lm/best.safetensors)");
  cmd->add_option("--prompt", o->prompt, "Text to continue (default: a line break)");
  cmd->add_option("--max-new-tokens", o->sampling.max_new_tokens, "Tokens to generate")->capture_default_str()->check(at_least<int64_t>(0));
  cmd->add_option("--temperature", o->sampling.temperature, "Sampling temperature (0: greedy)")->capture_default_str()->check(in_range(0.0f, 100.0f));
  cmd->add_option("--top-k", o->sampling.top_k, "Sample from the k most likely tokens (0: all)")->capture_default_str()->check(at_least<int64_t>(0));
  cmd->add_option("--top-p", o->sampling.top_p, "Nucleus sampling: the smallest set with this probability")->capture_default_str()->check(in_range(0.0f, 1.0f));
  cmd->add_option("--seed", o->sampling.seed, "Random seed")->capture_default_str();
  cmd->add_option("--vocab", o->spm, "SentencePiece model, if not at the path the checkpoint records")->check(CLI::ExistingFile);
  cmd->add_option("--output,-o", o->output,
                  "Output text ('-': standard output, token by token); a file is replaced only once generation completes")
      ->capture_default_str();
  cmd->callback([o, cmd, &exit_code] {
    io::TextOutput out(o->output);  // first: a bad path is refused before the model loads
    const char* problem = data::text_problem(o->prompt);
    TFM_CHECK(!problem, "--prompt: " << problem);  // as translate and attention refuse such text
    decode::FamilyCheckpoint c = decode::open_family_checkpoint(o->checkpoint, "gpt", "a language model from `tfm lm train`", o->spm);
    const data::Tokenizer& tokenizer = *c.tokenizer;
    models::GPT model(c.config);
    io::load_parameters(model.named_parameters(), c.file, o->checkpoint);
    use_for_inference(model, *cmd);
    std::vector<int> prompt = o->prompt.empty() ? std::vector<int>{tokenizer.line_break_id()} : tokenizer.encode(o->prompt);
    TFM_CHECK(!prompt.empty(), "the prompt encodes to no tokens");
    out.write(o->prompt);
    // SentencePiece drops the leading space of a piece decoded alone: decode the whole text
    // each time and print what it adds (once it extends what was printed: a character may
    // take several byte pieces).
    std::vector<int> ids = prompt;
    std::string shown = tokenizer.decode(ids);
    decode::generate(model, prompt, o->sampling, [&](int id) {
      ids.push_back(id);
      std::string text = tokenizer.decode(ids);
      if (text.compare(0, shown.size(), shown) != 0) return;
      out.write(std::string_view(text).substr(shown.size()));  // stdout: each token shows as it comes; a failed write stops generation
      shown = std::move(text);
    });
    out.write("\n");
    out.finish();
    exit_code = 0;
  });
}

}  // namespace tfm::cli
