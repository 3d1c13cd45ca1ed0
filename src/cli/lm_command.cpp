// `tfm lm train`: a decoder-only language model on a text file.
// `tfm generate`: text from a trained language model.
// `tfm chat`: a conversation with a chat model, as its chat template writes it.
#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>
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

namespace {

// How the next tokens are chosen, for `tfm generate` and `tfm chat` (each with its defaults).
void add_sampling_flags(CLI::App* cmd, tfm::GenerationOptions& o) {
  cmd->add_option("--max-new-tokens", o.max_new_tokens, "Tokens to generate")->capture_default_str()->check(at_least<int64_t>(0));
  cmd->add_option("--temperature", o.temperature, "Sampling temperature (0: greedy)")->capture_default_str()->check(in_range(0.0f, 100.0f));
  cmd->add_option("--top-k", o.top_k, "Sample from the k most likely tokens (0: all)")->capture_default_str()->check(at_least<int64_t>(0));
  cmd->add_option("--top-p", o.top_p, "Nucleus sampling: the smallest set with this probability")->capture_default_str()->check(in_range(0.0f, 1.0f));
  cmd->add_option("--min-p", o.min_p, "Only tokens at least this many times as likely as the most likely (0: all)")
      ->capture_default_str()
      ->check(in_range(0.0f, 1.0f));
  cmd->add_option("--repetition-penalty", o.repetition_penalty,
                  "Each token of the prompt or text so far: its score divided by this if positive, multiplied if not (1: none; 1.1-1.3 are usual)")
      ->capture_default_str()
      ->check(in_range(0.01f, 100.0f));
  cmd->add_option("--frequency-penalty", o.frequency_penalty, "Each generated token's score minus this times its count so far")
      ->capture_default_str()
      ->check(in_range(-2.0f, 2.0f));
  cmd->add_option("--presence-penalty", o.presence_penalty, "Each generated token's score minus this, once")
      ->capture_default_str()
      ->check(in_range(-2.0f, 2.0f));
  cmd->add_option("--stop", o.stop, "End the text before this string (repeat for several; not printed)");
  cmd->add_option("--seed", o.seed, "Random seed")->capture_default_str()->check(at_least<int64_t>(0));
}

// A conversation that fits the model's context (with its `tools` described) with room for a
// reply of `reply_tokens`: the oldest turns after the system message dropped until it does
// (the last one stays). One whose last turn alone leaves no room for a reply is a clear
// error (cut to its last tokens, it would lose the system message and the template's start).
void fit_context(const tfm::Generator& generator, tfm::Chat& chat, const std::string& tools, int64_t reply_tokens) {
  const size_t first = !chat.empty() && chat[0].role == "system" ? 1 : 0;
  bool dropped = false;
  int64_t tokens = generator.count_tokens(tfm::Prompt(chat, tools));
  while (chat.size() > first + 1 && tokens + reply_tokens > generator.max_tokens()) {
    chat.erase(chat.begin() + static_cast<std::ptrdiff_t>(first)), dropped = true;
    tokens = generator.count_tokens(tfm::Prompt(chat, tools));
  }
  if (dropped)
    std::cerr << "(the conversation outgrew the model's " << generator.max_tokens() << " tokens: its oldest turns are forgotten)\n";
  TFM_CHECK(tokens < generator.max_tokens(), "this turn makes the conversation " << tokens << " tokens (with the template"
                                                 << (first ? " and the system message" : "") << "); the model's context is "
                                                 << generator.max_tokens() << ", with room for the reply");
}

// --lora, of `tfm generate` and `tfm chat`.
void add_lora_flag(CLI::App* cmd, std::string& lora) {
  cmd->add_option("--lora", lora, "A LoRA adapter of the model (PEFT's directory, e.g. runs/lora/best_adapter), merged into its weights")
      ->check(CLI::ExistingDirectory);
}

// The text of --tools's file, a JSON list (the library checks each tool as the template reads it).
std::string tools_of(const std::string& path) {
  const std::string text = data::read_text(path);
  const auto list = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  TFM_CHECK(list.is_array(), "--tools " << path << ": not a JSON list of tools (OpenAI's [{\"type\": \"function\", \"function\": {...}}, ...])");
  return text;
}

// The model's first call that no tool has answered yet (its calls are answered in order, by
// the tool turns after its reply), or null.
const tfm::ToolCall* unanswered_call(const tfm::Chat& chat) {
  size_t answered = 0;
  auto turn = chat.rbegin();
  for (; turn != chat.rend() && turn->role == "tool"; ++turn) ++answered;
  if (turn == chat.rend() || answered >= turn->tool_calls.size()) return nullptr;
  return &turn->tool_calls[answered];
}

// A line of `tfm chat` as a turn: the user's, or with `/tool TEXT` a tool's answer to the
// model's next unanswered call (named, with its id).
tfm::ChatMessage turn_of(const std::string& line, const tfm::Chat& chat) {
  if (!line.starts_with("/tool ")) return {"user", line};
  const tfm::ToolCall* call = unanswered_call(chat);
  TFM_CHECK(call, "/tool answers the model's tool calls, and none is waiting for an answer");
  return {"tool", line.substr(6), {}, call->id, call->name};
}

// A chat's sampling unless flags say otherwise: room for a long reply, and the
// temperature and nucleus that chat models' generation_config.json files commonly give.
tfm::GenerationOptions chat_sampling() {
  tfm::GenerationOptions o;
  o.max_new_tokens = 512, o.temperature = 0.7f, o.top_p = 0.9f;
  return o;
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  struct Options {
    std::string checkpoint, prompt, spm, lora, output = "-";
    std::vector<int> prompt_ids;
    tfm::GenerationOptions sampling;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text with a language model (from `tfm lm train`, or a Hugging Face GPT-2, Llama, Mistral or Qwen2 directory)");
  add_model_flag(cmd, o->checkpoint, "Checkpoint from `tfm lm train` (e.g. runs/lm/best.safetensors)");
  CLI::Option* prompt = cmd->add_option("--prompt", o->prompt, "Text to continue (default: a line break)");
  cmd->add_option("--prompt-ids", o->prompt_ids,
                  "Token ids to continue instead of text (a model whose tokenizer tfm does not read yet); the new ids are written, "
                  "space-separated")
      ->excludes(prompt);
  add_sampling_flags(cmd, o->sampling);
  cmd->add_option("--vocab", o->spm, "SentencePiece model, if not at the path the checkpoint records")->check(CLI::ExistingFile);
  add_lora_flag(cmd, o->lora);
  cmd->add_option("--output,-o", o->output,
                  "Output text ('-': standard output, token by token); a file is replaced only once generation completes")
      ->capture_default_str();
  cmd->callback([o, cmd, &exit_code] {
    io::TextOutput out(o->output);  // first: a bad path is refused before the model loads
    const char* problem = data::text_problem(o->prompt);
    TFM_CHECK(!problem, "--prompt: " << problem);  // before the model loads, as translate and attention refuse such text
    tfm::ModelOptions options{o->spm, to_string(precision_flag(*cmd)), device_flag(*cmd)};
    options.lora = o->lora;
    tfm::Generator generator(o->checkpoint, options);
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

void add_chat_command(CLI::App& app, int& exit_code) {
  struct Options {
    std::string checkpoint, system, lora, tools;
    tfm::GenerationOptions sampling = chat_sampling();
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("chat",
                                     "Chat with a chat model (a Hugging Face directory whose tokenizer_config.json has a chat_template): each line "
                                     "of standard input is your turn, the reply streams as it is generated");
  add_model_flag(cmd, o->checkpoint, "A chat model: a checkpoint fine-tuned from one (e.g. from Qwen2-0.5B-Instruct)");
  cmd->add_option("--system", o->system, "A system message that opens the conversation (default: the template's own, if any)");
  cmd->add_option("--tools", o->tools,
                  "A JSON file of the tools the model may call (OpenAI's list of {\"type\": \"function\", \"function\": {...}}): "
                  "its calls are shown as it writes them, and `/tool TEXT` answers them, one by one")
      ->check(CLI::ExistingFile);
  add_sampling_flags(cmd, o->sampling);
  add_lora_flag(cmd, o->lora);
  cmd->callback([o, cmd, &exit_code] {
    const char* problem = data::text_problem(o->system);
    TFM_CHECK(!problem, "--system: " << problem);
    const std::string tools = o->tools.empty() ? "" : tools_of(o->tools);
    tfm::ModelOptions options{"", to_string(precision_flag(*cmd)), device_flag(*cmd)};
    options.lora = o->lora;
    tfm::Generator generator(o->checkpoint, options);
    TFM_CHECK(generator.has_chat_template(), o->checkpoint << ": has no chat template (tokenizer_config.json's chat_template); "
                                                           "use tfm generate to continue a text");
    if (!tools.empty()) {  // the library's checks of each tool, once, before the first turn
      try {
        (void)generator.count_tokens(tfm::Prompt(tfm::Chat{{"user", "?"}}, tools));
      } catch (const std::exception& e) {
        throw Error("--tools " + o->tools + ": " + e.what());
      }
    }
    const bool interactive = isatty(STDIN_FILENO) != 0;
    if (interactive)
      std::cerr << "Chatting with " << o->checkpoint << ". /reset forgets the conversation; " << (tools.empty() ? "" : "/tool TEXT answers a tool call; ")
                << "Ctrl-D ends.\n";
    const tfm::Chat opening = o->system.empty() ? tfm::Chat{} : tfm::Chat{{"system", o->system}};
    tfm::Chat chat = opening;
    io::TextOutput out("-");
    for (std::string line; (interactive && std::cerr << "> " << std::flush), std::getline(std::cin, line);) {
      if (line == "/reset") chat = opening;
      if (line == "/reset" || line.empty()) continue;
      const size_t turns = chat.size();
      try {
        chat.push_back(turn_of(line, chat));
        if (unanswered_call(chat)) continue;  // the model goes on once each of its calls has its answer
        fit_context(generator, chat, tools, o->sampling.max_new_tokens);
        const std::string text = generator.generate(tfm::Prompt(chat, tools), o->sampling, [&](const std::string& piece) { out.write(piece); });
        out.write("\n");
        const tfm::ChatReply reply = tools.empty() ? tfm::ChatReply{text, {}} : generator.parse_tool_calls(text);
        chat.push_back({"assistant", reply.content, reply.tool_calls});
      } catch (const Error& e) {  // a turn it cannot take (text that is not UTF-8): at a terminal, the next one may do
        if (!interactive) throw;
        std::cerr << "tfm: error: " << e.what() << "\n";
        chat.resize(turns);
      }
    }
    out.finish();
    exit_code = 0;
  });
}

}  // namespace tfm::cli
