#include "tfm/generator.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/inference.h"
#include "autograd/autograd.h"
#include "data/text.h"
#include "data/tool_calls.h"
#include "decode/sampling.h"
#include "tensor/error.h"

namespace tfm {

namespace {

// Why a text ended, and its tokens (TextStream::finish).
using Finish = TextStream::Finish;

// One request on the worker: its tokens become text, handed on piece by piece (or,
// without a tokenizer, its ids, one by one).
// SentencePiece drops the leading space of a piece decoded alone: the whole text is
// decoded each time, and what it adds is handed on once it extends what was. A character
// may take several byte pieces (GPT-2's), and decodes as U+FFFD until its last byte comes:
// a U+FFFD that ends the text is held back until a later token or the end, or the
// character it becomes could never be shown, nor anything after it. So is an end of the
// text that a stop string begins with; a stop string that appears ends the text before it.
struct Request {
  const data::Tokenizer* tokenizer;  // null: ids only
  std::vector<int> ids;
  std::string start, shown;
  std::function<void(const std::string&)> on_text;
  std::function<void(const Finish&)> on_finish;  // after the promise is kept
  std::promise<std::string> promise;
  std::vector<std::string> stop;
  std::vector<int> ends;  // the tokens that end the text
  size_t prompt_tokens = 0;
  bool stopped = false;  // a stop string came: the text is complete
  std::function<void(int)> on_id = {};

  // The next token; whether the text goes on.
  bool token(int id) {
    ids.push_back(id);
    if (on_id) on_id(id);
    if (tokenizer) show(tokenizer->decode(ids), false);
    return !stopped;
  }
  void show(std::string text, bool last) {
    if (stopped) return;
    last = cut_at_stop(text) || last;
    if (!last) text.resize(text.size() - held_back(text));
    if (text.compare(0, shown.size(), shown) != 0) return;
    if (on_text && (text.size() > shown.size() || !last)) on_text(text.substr(shown.size()));
    shown = std::move(text);
  }
  // Cuts `text` before the first stop string in its generated part; whether one was there.
  bool cut_at_stop(std::string& text) {
    size_t first = std::string::npos;
    for (const std::string& s : stop) first = std::min(first, text.find(s, start.size()));
    if (first == std::string::npos) return false;
    text.resize(first);
    return stopped = true;
  }
  // The bytes at the end of `text` to hold back: U+FFFDs, then the longest end of the
  // generated text that a stop string begins with.
  size_t held_back(const std::string& text) const {
    static const std::string kReplacement = "\uFFFD";
    std::string_view t(text);
    while (t.ends_with(kReplacement)) t.remove_suffix(kReplacement.size());
    size_t tail = 0;
    for (const std::string& s : stop)
      for (size_t n = std::min(s.size() - 1, t.size() - std::min(t.size(), start.size())); n > tail; --n)
        if (t.ends_with(std::string_view(s).substr(0, n))) {
          tail = n;
          break;
        }
    return text.size() - t.size() + tail;
  }
  void done(std::exception_ptr error) {
    if (!error) {
      try {
        if (tokenizer) show(tokenizer->decode(ids), true);  // what was held back
      } catch (...) {  // the stream was dropped
        error = std::current_exception();
      }
    }
    error ? promise.set_exception(error) : promise.set_value(shown.substr(start.size()));
    if (on_finish) on_finish(finish());
  }
  Finish finish() const {
    const bool ended = stopped || (ids.size() > prompt_tokens && std::find(ends.begin(), ends.end(), ids.back()) != ends.end());
    return {ended ? "stop" : "length", static_cast<int64_t>(ids.size() - prompt_tokens)};
  }
};

}  // namespace

struct TextStream::State {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::string> pieces;
  std::future<std::string> result;  // ready once every piece is in `pieces`; taken by the first next() after them
  bool done = false;
  Finish finish;           // (once done)
  std::thread::id worker;  // the generator's, which must not wait for its own requests
};

std::optional<std::string> TextStream::next() {
  TFM_CHECK(std::this_thread::get_id() != state_->worker,
            "TextStream::next() from a callback of the same generator would wait for itself");
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->ready.wait(lock, [&] { return !state_->pieces.empty() || state_->done; });
  if (state_->pieces.empty()) {
    if (state_->result.valid()) state_->result.get();  // the error, if generation failed
    return std::nullopt;
  }
  std::string piece = std::move(state_->pieces.front());
  state_->pieces.pop_front();
  return piece;
}

TextStream::Finish TextStream::finish() const {
  const std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->finish;
}

struct Generator::Impl : api::FamilyModel<models::GPT> {
  std::mutex mutex;
  std::condition_variable wake;
  std::vector<std::shared_ptr<Request>> joining;  // submitted, not yet in the batch
  std::vector<decode::SamplingOptions> joining_options;
  bool stopping = false;
  decode::GenerationBatch batch;  // the worker's only
  std::atomic<int64_t> running{0}, tokens{0}, cache_bytes{0}, waiting{0};  // for stats()
  data::ToolCallFormat tool_format = data::ToolCallFormat::kNone;  // of the chat template (read once: a streamed reply asks at each token)
  std::thread worker;

  // The worker computes with the creating thread's thread count (--threads, a library
  // caller's omp_set_num_threads): a new thread would start from OMP_NUM_THREADS or every core.
  Impl(const std::string& path, const ModelOptions& o)
      : FamilyModel(path, "gpt", "a language model from `tfm lm train`", o),
        batch(model, rows_within(o.max_cache_bytes, model.config())),
        worker([this, threads = omp_get_max_threads()] {
          omp_set_num_threads(threads);
          run();
        }) {
    if (checkpoint.tokenizer) tool_format = checkpoint.tokenizer->tool_call_format();
  }

  // Finishes what was submitted, then stops the worker.
  ~Impl() {
    {
      const std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    worker.join();
  }

  void run() {
    for (;;) {
      std::vector<std::shared_ptr<Request>> fresh;
      std::vector<decode::SamplingOptions> options;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return stopping || !joining.empty() || batch.size() > 0; });
        if (joining.empty() && batch.size() == 0) return;  // stopping, and nothing left
        fresh.swap(joining), options.swap(joining_options);
      }
      for (size_t i = 0; i < fresh.size(); ++i) {
        std::shared_ptr<Request> r = fresh[i];
        batch.join(r->ids, options[i], [this, r](int id) { return ++tokens, r->token(id); }, [r](std::exception_ptr e) { r->done(e); });
      }
      batch.step();
      running = batch.size(), cache_bytes = batch.cache_bytes(), waiting = batch.waiting();
    }
  }

  std::future<std::string> submit(const Prompt& prompt, const GenerationOptions& o, std::function<void(const std::string&)> on_text,
                                  std::function<void(const Finish&)> on_finish = {}) {
    expect_valid(o);
    const data::Tokenizer& tokenizer = this->tokenizer();
    decode::SamplingOptions sampling{o};
    sampling.ends = tokenizer.ends();
    std::vector<int> ids = prompt_ids(prompt);
    const std::string start = tokenizer.decode(ids);
    return enqueue(std::make_shared<Request>(Request{&tokenizer, ids, start, start, std::move(on_text), std::move(on_finish), {}, o.stop,
                                                     sampling.ends, ids.size()}),
                   sampling);
  }

  // A request of ids (Generator::generate_ids): no end token, and no stop strings (text).
  std::future<std::string> submit_ids(const std::vector<int>& prompt, const GenerationOptions& o, std::function<void(int)> on_id) {
    expect_valid(o);
    TFM_CHECK(!prompt.empty(), "the prompt holds no token ids");
    const int64_t vocab = model.config().vocab;
    for (int id : prompt) TFM_CHECK(id >= 0 && id < vocab, "the prompt's token id " << id << " is outside the vocabulary of " << vocab);
    return enqueue(std::make_shared<Request>(Request{nullptr, prompt, "", "", {}, {}, {}, {}, {}, prompt.size(), false, std::move(on_id)}),
                   decode::SamplingOptions{o});
  }

  std::future<std::string> enqueue(std::shared_ptr<Request> r, const decode::SamplingOptions& sampling) {
    std::future<std::string> result = r->promise.get_future();
    {
      const std::lock_guard<std::mutex> lock(mutex);
      joining.push_back(std::move(r)), joining_options.push_back(sampling);
    }
    wake.notify_one();
    return result;
  }

  // How many sequences run at once within `bytes` of keys and values (0: no bound).
  static int64_t rows_within(int64_t bytes, const models::StackConfig& c) {
    TFM_CHECK(bytes >= 0, "max_cache_bytes is negative");
    if (bytes == 0) return 0;
    const int64_t row = decode::GenerationBatch::row_bytes(c);
    TFM_CHECK(bytes >= row, "a key/value cache of " << bytes / (1 << 20) << " MiB holds no sequence of this model: one may take "
                                                     << (row + (1 << 20) - 1) / (1 << 20) << " MiB (its window of " << c.max_len
                                                     << " tokens in " << c.layers << " layers)");
    return bytes / row;
  }

  static void expect_valid(const GenerationOptions& o) {
    auto finite_at_least = [](float v, float low) { return std::isfinite(v) && v >= low; };
    TFM_CHECK(o.max_new_tokens >= 0 && o.top_k >= 0 && finite_at_least(o.temperature, 0) && o.top_p >= 0 && o.top_p <= 1 && o.min_p >= 0 &&
                  o.min_p <= 1,
              "generation options out of range (max_new_tokens, top_k and temperature at least 0, temperature finite; top_p and min_p in [0, 1])");
    TFM_CHECK(finite_at_least(o.repetition_penalty, 0) && o.repetition_penalty > 0 && std::isfinite(o.frequency_penalty) &&
                  std::isfinite(o.presence_penalty),
              "generation options out of range (repetition_penalty above 0, frequency_penalty and presence_penalty finite)");
    for (const std::string& s : o.stop) TFM_CHECK(!s.empty(), "a stop string is empty (it would end the text before it began)");
  }

  // The checkpoint's tokenizer; a model without one (a Hugging Face directory whose
  // tokenizer tfm does not read yet) takes its prompts as ids.
  const data::Tokenizer& tokenizer() const {
    TFM_CHECK(checkpoint.tokenizer, checkpoint.path << ": has no tokenizer that tfm reads; give the prompt as token ids (tfm generate --prompt-ids)");
    return *checkpoint.tokenizer;
  }

  // A text's tokens, or a conversation's as its chat template writes it.
  std::vector<int> prompt_ids(const Prompt& prompt) const {
    const data::Tokenizer& tokenizer = this->tokenizer();
    std::vector<int> ids = prompt.is_chat() ? tokenizer.encode_chat(conversation(prompt.chat()), tools(prompt.tools())) : text_ids(prompt.text());
    TFM_CHECK(!ids.empty(), "the prompt encodes to no tokens");
    return ids;
  }

  std::vector<int> text_ids(const std::string& text) const {
    const char* problem = data::text_problem(text);
    TFM_CHECK(!problem, "the prompt: " << problem);
    return text.empty() ? std::vector<int>{tokenizer().line_break_id()} : tokenizer().encode(text);
  }

  // The messages as the template reads them, each a valid text: OpenAI's, a call's
  // arguments the JSON object their text holds (a text that holds none: as it is).
  static nlohmann::ordered_json conversation(const Chat& chat) {
    TFM_CHECK(!chat.empty(), "the conversation has no messages");
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    for (const ChatMessage& m : chat) {
      nlohmann::ordered_json message = {{"role", valid(m.role, "a message's role")}, {"content", valid(m.content, "a message's content")}};
      if (!m.tool_calls.empty()) message["tool_calls"] = tool_calls(m.tool_calls);
      if (!m.tool_call_id.empty()) message["tool_call_id"] = valid(m.tool_call_id, "a message's tool_call_id");
      if (!m.name.empty()) message["name"] = valid(m.name, "a message's name");
      messages.push_back(std::move(message));
    }
    return messages;
  }

  static nlohmann::ordered_json tool_calls(const std::vector<ToolCall>& calls) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const ToolCall& call : calls) {
      const std::string& text = valid(call.arguments, "a tool call's arguments");
      nlohmann::ordered_json arguments = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (!arguments.is_object()) arguments = text;
      nlohmann::ordered_json one = {{"type", "function"}, {"function", {{"name", valid(call.name, "a tool call's name")}, {"arguments", arguments}}}};
      if (!call.id.empty()) one["id"] = valid(call.id, "a tool call's id");
      out.push_back(std::move(one));
    }
    return out;
  }

  // The tools as the template reads them: the list given ("": none).
  static nlohmann::ordered_json tools(const std::string& text) {
    if (text.empty()) return nullptr;
    nlohmann::ordered_json list = nlohmann::ordered_json::parse(valid(text, "the tools"), nullptr, /*allow_exceptions=*/false);
    TFM_CHECK(list.is_array(), "the tools must be a JSON list (OpenAI's [{\"type\": \"function\", \"function\": {...}}, ...])");
    for (size_t i = 0; i < list.size(); ++i) {  // what OpenAI requires of each: a template would write a missing name as nothing
      const nlohmann::ordered_json& tool = list[i];
      const bool function = tool.is_object() && tool.value("type", nlohmann::ordered_json()) == "function" && tool.contains("function") &&
                            tool["function"].is_object() && tool["function"].value("name", nlohmann::ordered_json()).is_string();
      TFM_CHECK(function, "tool " << i + 1 << " of the list is not {\"type\": \"function\", \"function\": {\"name\": ..., ...}}");
    }
    return list;
  }

  static const std::string& valid(const std::string& text, const char* what) {
    const char* problem = data::text_problem(text);
    TFM_CHECK(!problem, what << ": " << problem);
    return text;
  }

};

Generator::Generator(const std::string& checkpoint, const ModelOptions& options)
    : impl_(std::make_unique<Impl>(checkpoint, options)) {}

Generator::~Generator() = default;

std::string Generator::generate(const Prompt& prompt, const GenerationOptions& o,
                                const std::function<void(const std::string&)>& on_text) const {
  // On the worker (from a callback), waiting for the text would wait for itself.
  TFM_CHECK(std::this_thread::get_id() != impl_->worker.get_id(),
            "generate() from a callback of the same generator would wait for itself; use submit() there");
  return impl_->submit(prompt, o, on_text).get();
}

std::future<std::string> Generator::submit(const Prompt& prompt, const GenerationOptions& o,
                                           std::function<void(const std::string&)> on_text) const {
  return impl_->submit(prompt, o, std::move(on_text));
}

TextStream Generator::stream(const Prompt& prompt, const GenerationOptions& o) const {
  auto state = std::make_shared<TextStream::State>();
  state->worker = impl_->worker.get_id();
  std::weak_ptr<TextStream::State> weak = state;
  std::future<std::string> result = impl_->submit(
      prompt, o,
      [weak](const std::string& piece) {
        auto s = weak.lock();
        // Nobody can read a dropped stream: its request ends here (the batch drops it).
        if (!s) throw Error("the stream was dropped");
        const std::lock_guard<std::mutex> lock(s->mutex);
        s->pieces.push_back(piece);
        s->ready.notify_all();
      },
      [weak](const Finish& finish) {
        if (auto s = weak.lock()) {
          const std::lock_guard<std::mutex> lock(s->mutex);
          s->done = true;
          s->finish = finish;
          s->ready.notify_all();
        }
      });
  const std::lock_guard<std::mutex> lock(state->mutex);
  state->result = std::move(result);
  return TextStream(state);
}

int64_t Generator::count_tokens(const Prompt& prompt) const { return static_cast<int64_t>(impl_->prompt_ids(prompt).size()); }

namespace {

// Nine letters and digits: what Mistral's templates take back (OpenAI's ids are any text).
std::string fresh_call_id() {
  static const char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof kAlphabet - 2);
  std::string id(9, ' ');
  for (char& c : id) c = kAlphabet[pick(random)];
  return id;
}

}  // namespace

ChatReply Generator::parse_tool_calls(const std::string& reply) const {
  const data::ParsedReply parsed = data::parse_tool_calls(impl_->tool_format, reply);
  ChatReply out{parsed.content, {}};
  for (const data::ToolCallText& call : parsed.calls) out.tool_calls.push_back({fresh_call_id(), call.name, call.arguments});
  return out;
}

size_t Generator::tool_call_start(const std::string& reply) const { return data::tool_call_start(impl_->tool_format, reply); }

bool Generator::has_chat_template() const { return impl_->checkpoint.tokenizer && impl_->checkpoint.tokenizer->has_chat_template(); }

int64_t Generator::max_tokens() const { return impl_->model.config().max_len; }

TextAttention Generator::attention(const std::string& text) const {
  std::vector<int> ids = impl_->text_ids(text);
  if (static_cast<int64_t>(ids.size()) > max_tokens()) ids.erase(ids.begin(), ids.end() - max_tokens());
  nn::AttentionMaps maps;
  {
    autograd::NoGradGuard no_grad;
    impl_->model.forward({ids, 1, static_cast<int64_t>(ids.size())}, nullptr, &maps);
  }
  return api::text_attention(ids, maps, impl_->tokenizer());
}

std::vector<int> Generator::generate_ids(const std::vector<int>& prompt, const GenerationOptions& o, const std::function<void(int)>& on_token) const {
  TFM_CHECK(std::this_thread::get_id() != impl_->worker.get_id(),
            "generate_ids() from a callback of the same generator would wait for itself; use submit() there");
  std::vector<int> ids;  // (written on the worker; read once the future is ready)
  impl_->submit_ids(prompt, o, [&](int id) {
    ids.push_back(id);
    if (on_token) on_token(id);
  }).get();
  return ids;
}

GeneratorStats Generator::stats() const {
  return {impl_->running.load(), impl_->tokens.load(), impl_->cache_bytes.load(), impl_->waiting.load()};
}

}  // namespace tfm
