// `tfm lm train`: a decoder-only language model on a text file.
// `tfm generate`: text from a trained language model.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "tfm/generator.h"
#include "cli/trainer_flags.h"
#include "cli/validators.h"
#include "data/text.h"
#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "io/output_file.h"
#include "models/json_fields.h"
#include "ops/linear_products.h"
#include "tensor/error.h"
#include "train/language_model.h"

namespace tfm::cli {

void add_lm_command(CLI::App& app, int& exit_code) {
  CLI::App* lm = app.add_subcommand("lm", "Decoder-only (GPT) language models");
  help_without_subcommand(*lm, exit_code);
  CLI::App* cmd = lm->add_subcommand(
      "train", "Train a language model on a text file (defaults: nanoGPT's CPU shakespeare_char recipe; --d-ff: 4 x --d-model unless given)");
  auto c = std::make_shared<StackTrainCommand<tfm::LanguageModelTask>>(cmd, training::default_language_model());
  add_text_flags(cmd, c->task.data);
  ModelFlags& m = c->model_flags;
  m.bind(m.group()->add_option("--context", c->model.max_len, "Context window in tokens")->capture_default_str()->check(in_range<int64_t>(1, models::kMaxPositions)),
         "max_len");
  m.bind(m.group()->add_flag("!--sinusoidal", c->model.learned_positions, "The paper's sinusoidal positions instead of a learned table"),
         "learned_positions");
  cmd->add_option("--batch", c->task.batch, "Windows of --context tokens per batch")->capture_default_str()->check(at_least<int64_t>(1));
  cmd->add_option("--sample-tokens", c->task.sample_tokens, "Tokens of sample text printed at the end (0: none)")
      ->capture_default_str()->check(at_least<int64_t>(0));
  tfm::LanguageModelTask& t = c->task;
  cmd->add_option("--lora-rank", t.lora_rank,
                  "LoRA fine-tuning of --init-from's model: its weights frozen, adapters of this rank trained (PEFT's r; 0: every weight trains)")
      ->capture_default_str()->check(at_least<int64_t>(0));
  cmd->add_option("--lora-alpha", t.lora_alpha, "LoRA's lora_alpha: the adapters' change is scaled by alpha / rank")->capture_default_str();
  cmd->add_option("--lora-targets", t.lora_targets, "The projections that get adapters, of q,k,v,o,gate,up,down")->capture_default_str();
  add_training_flags_and_run(cmd, c, exit_code);
}

void add_generate_command(CLI::App& app, int& exit_code) {
  struct Options {
    std::string checkpoint, prompt, spm, lora, output = "-";
    std::vector<int> prompt_ids;
    tfm::GenerationOptions sampling;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text with a language model from `tfm lm train`");
  add_model_flag(cmd, o->checkpoint, "Checkpoint from `tfm lm train` (e.g. runs/lm/best.safetensors)");
  CLI::Option* prompt = cmd->add_option("--prompt", o->prompt, "Text to continue (default: a line break)");
  cmd->add_option("--prompt-ids", o->prompt_ids,
                  "Token ids to continue instead of text (a model whose tokenizer tfm does not read yet); the new ids are written, "
                  "space-separated")
      ->excludes(prompt);
  cmd->add_option("--max-new-tokens", o->sampling.max_new_tokens, "Tokens to generate")->capture_default_str()->check(at_least<int64_t>(0));
  cmd->add_option("--temperature", o->sampling.temperature, "Sampling temperature (0: greedy)")->capture_default_str()->check(in_range(0.0f, 100.0f));
  cmd->add_option("--top-k", o->sampling.top_k, "Sample from the k most likely tokens (0: all)")->capture_default_str()->check(at_least<int64_t>(0));
  cmd->add_option("--top-p", o->sampling.top_p, "Nucleus sampling: the smallest set with this probability")->capture_default_str()->check(in_range(0.0f, 1.0f));
  cmd->add_option("--min-p", o->sampling.min_p, "Only tokens at least this many times as likely as the most likely (0: all)")
      ->capture_default_str()
      ->check(in_range(0.0f, 1.0f));
  cmd->add_option("--repetition-penalty", o->sampling.repetition_penalty,
                  "Each token of the prompt or text so far: its score divided by this if positive, multiplied if not (1: none; 1.1-1.3 are usual)")
      ->capture_default_str()
      ->check(in_range(0.01f, 100.0f));
  cmd->add_option("--frequency-penalty", o->sampling.frequency_penalty, "Each generated token's score minus this times its count so far")
      ->capture_default_str()
      ->check(in_range(-2.0f, 2.0f));
  cmd->add_option("--presence-penalty", o->sampling.presence_penalty, "Each generated token's score minus this, once")
      ->capture_default_str()
      ->check(in_range(-2.0f, 2.0f));
  cmd->add_option("--stop", o->sampling.stop, "End the text before this string (repeat for several; not printed)");
  cmd->add_option("--seed", o->sampling.seed, "Random seed")->capture_default_str()->check(at_least<int64_t>(0));
  cmd->add_option("--vocab", o->spm, "SentencePiece model, if not at the path the checkpoint records")->check(CLI::ExistingFile);
  cmd->add_option("--lora", o->lora, "A LoRA adapter of the model (PEFT's directory, e.g. runs/lora/best_adapter), merged into its weights")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--output,-o", o->output,
                  "Output text ('-': standard output, token by token); a file is replaced only once generation completes")
      ->capture_default_str();
  cmd->callback([o, cmd, &exit_code] {
    io::TextOutput out(o->output);  // first: a bad path is refused before the model loads
    const char* problem = data::text_problem(o->prompt);
    TFM_CHECK(!problem, "--prompt: " << problem);  // before the model loads, as translate and attention refuse such text
    tfm::Generator generator(o->checkpoint, {o->spm, to_string(precision_flag(*cmd)), device_flag(*cmd), o->lora});
    if (!o->prompt_ids.empty()) {
      const char* separator = "";
      generator.generate_ids(o->prompt_ids, o->sampling, [&](int id) {
        out.write(separator + std::to_string(id));  // each id as it comes
        separator = " ";
      });
    } else {
      generator.count_tokens(o->prompt);  // (a model without a tokenizer is refused before the prompt is written)
      out.write(o->prompt);
      generator.generate(o->prompt, o->sampling, [&](const std::string& piece) {
        out.write(piece);  // stdout: each token shows as it comes; a failed write stops generation
      });
    }
    out.write("\n");
    out.finish();
    exit_code = 0;
  });
}

}  // namespace tfm::cli
