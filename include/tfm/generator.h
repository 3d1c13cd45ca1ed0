#pragma once
// tfm::Generator: a language model from `tfm lm train`, continuing text.
//
//   tfm::Generator generator("runs/lm/best.safetensors");
//   std::string text = generator.generate("ROMEO:", {.max_new_tokens = 100, .temperature = 0.8f},
//                                         [](const std::string& piece) { std::cout << piece << std::flush; });
//
//   tfm::TextStream stream = generator.stream("JULIET:");
//   while (std::optional<std::string> piece = stream.next()) std::cout << *piece << std::flush;
//
//   // A chat model (a Hugging Face directory whose tokenizer has a chat template):
//   std::string reply = generator.generate(tfm::Chat{{"system", "Be brief."}, {"user", "Hello!"}});
//
//   // With tools (OpenAI's list, as JSON text), and the reply read for the calls the model makes:
//   std::string text = generator.generate(tfm::Prompt(chat, R"([{"type": "function", "function": {...}}])"));
//   tfm::ChatReply reply = generator.parse_tool_calls(text);  // reply.tool_calls: what to run
//
// Safe to call from many threads at once. One worker generates every request: a request
// joins the running batch at its next decoding step and leaves it when done (continuous
// batching), so that many callers share each step's products.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tfm/attention.h"
#include "tfm/decoding.h"
#include "tfm/model_options.h"

#include "tfm/export.h"

namespace tfm {

// A call of a tool, as OpenAI's tool_calls hold one: {"id": ..., "type": "function",
// "function": {"name": ..., "arguments": "{...}"}}.
struct ToolCall {
  std::string id;         // what the tool's answer names (ChatMessage::tool_call_id)
  std::string name;       // the function's
  std::string arguments;  // a JSON object's text, as OpenAI gives it: "{\"location\": \"Paris\"}"
};

// One turn of a conversation: who speaks ("system", "user", "assistant", "tool", or another
// role the model's template knows) and what they say. An assistant's turn may call tools
// (tool_calls); a "tool" turn is a tool's answer, naming the call it answers. The template
// sees them as transformers passes OpenAI's messages, except that each call's arguments
// are the JSON object their text holds (as vLLM passes them: the templates of Qwen2.5,
// Llama 3.1 and Mistral write `arguments | tojson`, which would quote a text again).
struct ChatMessage {
  std::string role, content;
  std::vector<ToolCall> tool_calls = {};  // (an assistant's)
  std::string tool_call_id = {}, name = {};  // (a tool's: the call it answers, and the tool's name)
};
using Chat = std::vector<ChatMessage>;

// What a generator continues: a text, or a conversation, which the model's chat template
// (its tokenizer_config.json's chat_template) writes as a text that ends where the
// assistant's reply begins, as transformers' apply_chat_template(add_generation_prompt=True).
class TFM_API Prompt {
 public:
  Prompt(std::string text) : text_(std::move(text)) {}  // NOLINT: a text is a prompt
  Prompt(const char* text) : text_(text) {}             // NOLINT
  Prompt(Chat conversation) : chat_(std::move(conversation)), is_chat_(true) {}  // NOLINT
  // A conversation with the tools the model may call: OpenAI's list of {"type": "function",
  // "function": {"name": ..., "description": ..., "parameters": {...}}} as JSON text, which the
  // template sees as its `tools`, as given (transformers' apply_chat_template(tools=...)).
  Prompt(Chat conversation, std::string tools) : chat_(std::move(conversation)), tools_(std::move(tools)), is_chat_(true) {}
  bool is_chat() const { return is_chat_; }
  const std::string& text() const { return text_; }
  const Chat& chat() const { return chat_; }
  const std::string& tools() const { return tools_; }  // "" where none were given

 private:
  std::string text_;
  Chat chat_;
  std::string tools_;
  bool is_chat_ = false;
};

// A chat model's reply read for tool calls (Generator::parse_tool_calls): the calls it
// makes, and its text before them (the whole reply where it makes none).
struct ChatReply {
  std::string content;
  std::vector<ToolCall> tool_calls;
};

// The text of one request as it is generated (Generator::stream), piece by piece.
// Dropping the stream cancels its request (at its next token).
class TFM_API TextStream {
 public:
  // The next piece of text, waiting for it; nothing once the text is complete (and at
  // every later call). Where generation failed, throws its error (std::runtime_error)
  // instead. Not from a callback of the same generator (refused: it would wait for itself).
  std::optional<std::string> next();

  // Why the text ended: "stop" (an end token, or one of the stop strings) or "length"
  // (max_new_tokens), and the tokens generated (a stop string's included): known once
  // next() has returned nothing (before the text is complete: {"", 0}).
  struct Finish {
    std::string reason;
    int64_t tokens = 0;
  };
  Finish finish() const;

 private:
  friend class Generator;
  struct State;
  explicit TextStream(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

// What a generator is doing: requests in its batch (running, or waiting for room in the
// cache: ModelOptions::max_cache_bytes), tokens generated since loading.
struct GeneratorStats {
  int64_t running = 0;  // (waiting ones included)
  int64_t tokens = 0;
  int64_t cache_bytes = 0;  // held by the running batch's keys and values (0 once it is idle)
  int64_t waiting = 0;      // of `running`, those waiting for room in the cache
};

class TFM_API Generator {
 public:
  // Loads the checkpoint; throws std::runtime_error with one line saying what is wrong.
  explicit Generator(const std::string& checkpoint, const ModelOptions& options = {});
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // The text that continues `prompt` (an empty text: a line break; a conversation: the
  // assistant's reply, refused where the model has no chat template). `on_text`, when
  // given, hears each piece of text as soon as the token that completes it is chosen
  // (a character may take several tokens); the pieces make the returned text. It runs on
  // the worker, between steps of every request: keep it short (or use stream()); it may
  // submit() to this generator, but not wait for it (generate() there is refused).
  std::string generate(const Prompt& prompt, const GenerationOptions& options = {},
                       const std::function<void(const std::string&)>& on_text = {}) const;
  // The same without waiting: the future holds the text, or the error.
  std::future<std::string> submit(const Prompt& prompt, const GenerationOptions& options = {},
                                  std::function<void(const std::string&)> on_text = {}) const;
  // The text piece by piece, for the caller to take at its own pace.
  TextStream stream(const Prompt& prompt, const GenerationOptions& options = {}) const;
  // The token ids that continue the ids `prompt` (at least one), for a model whose
  // tokenizer tfm does not read (the text calls above refuse it), or a caller that
  // tokenizes itself; without an end token, max_new_tokens of them. `on_token` hears
  // each as it is chosen, as generate()'s on_text.
  std::vector<int> generate_ids(const std::vector<int>& prompt, const GenerationOptions& options = {},
                                const std::function<void(int)>& on_token = {}) const;

  // How many tokens a prompt is (an empty text: 1, the line break it stands for).
  int64_t count_tokens(const Prompt& prompt) const;
  // Whether the model takes conversations (its tokenizer has a chat template).
  bool has_chat_template() const;
  // The tool calls in a reply to a conversation with tools, in the format the model's chat
  // template teaches it (Hermes' <tool_call> blocks of Qwen2.5 and Qwen3, Llama 3.1's JSON
  // reply, Mistral's [TOOL_CALLS] list: src/data/tool_calls.h), each with a fresh id of 9
  // letters and digits (Mistral's templates refuse others); a reply that does not parse as a
  // whole, or a model of another format, gives its text back with no calls.
  ChatReply parse_tool_calls(const std::string& reply) const;
  // Where, in a reply generated so far, a tool call may begin: the text before it is the
  // reply's content whatever follows, the rest may be a call (held back while streaming,
  // until parse_tool_calls reads the whole reply). The reply's length where none may begin.
  size_t tool_call_start(const std::string& reply) const;
  // The model's positions: a prompt and its new tokens beyond this slide the window.
  int64_t max_tokens() const;
  GeneratorStats stats() const;
  // Every layer's and head's (causal) attention over `text`'s tokens, its last
  // max_tokens() of them (a continuation's window), on the calling thread.
  TextAttention attention(const std::string& text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tfm
