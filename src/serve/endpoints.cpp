#include "serve/endpoints.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <ctime>
#include <limits>
#include <mutex>
#include <optional>

#include "serve/images.h"
#include "serve/request.h"

namespace tfm::serve {

namespace {

constexpr int64_t kMaxSeed = int64_t{1} << 53;  // exact in a JSON number

// Runs `f`, whose std::runtime_error is the client's input refused by the library
// (invalid UTF-8, a NUL byte): a 400 with the library's message.
template <class F>
auto client_input(F&& f) {
  try {
    return f();
  } catch (const HttpError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw HttpError(400, e.what());
  }
}

// 400 where a text is longer than --max-sentence-tokens tokens could be: a token is at
// most 64 bytes (SentencePiece's longest piece, 16 characters), so a longer text is
// refused before it is tokenized (a 3 MB sentence took 100 MB to count).
void check_sizes(const std::vector<std::string>& texts, const char* what, int64_t limit) {
  for (size_t i = 0; i < texts.size(); ++i)
    if (static_cast<int64_t>(texts[i].size()) > limit * 64)
      throw HttpError(400, std::string(what) + " " + std::to_string(i + 1) + " is " + std::to_string(texts[i].size()) +
                               " bytes: more than " + std::to_string(limit) + " tokens (--max-sentence-tokens)");
}

// 400 where a text is more tokens than --max-sentence-tokens.
template <class Count>
void check_lengths(const std::vector<std::string>& texts, const char* what, int64_t limit, Count count) {
  check_sizes(texts, what, limit);
  const bool several = texts.size() > 1;
  for (size_t i = 0; i < texts.size(); ++i) {
    const int64_t n = client_input([&] { return count(texts[i]); });
    if (n > limit)
      throw HttpError(400, std::string(what) + (several ? " " + std::to_string(i + 1) : "") + " is " + std::to_string(n) + " tokens; at most " +
                               std::to_string(limit) + (several ? " each" : "") + " (--max-sentence-tokens)");
  }
}

// An image in the body itself: its type says so, or its first bytes do.
bool image_body(const Request& req) {
  std::string type = req.header("Content-Type");
  for (char& ch : type) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return type.rfind("image/", 0) == 0 || req.body.rfind("\x89PNG", 0) == 0 || req.body.rfind("\xff\xd8\xff", 0) == 0;
}

// --- generation, shared by /v1/generate and /v1/completions ---

GenerationOptions generation_options(const RequestBody& b, const Context& c, const char* length_field, int64_t default_length,
                                     double default_temperature) {
  GenerationOptions o;
  o.max_new_tokens = b.integer(length_field, std::min(default_length, c.options.max_new_tokens), 0, c.options.max_new_tokens);
  o.temperature = static_cast<float>(b.number("temperature", default_temperature, 0, 100));
  o.top_k = b.integer("top_k", 0, 0, std::numeric_limits<int32_t>::max());
  o.top_p = static_cast<float>(b.number("top_p", 1, 0, 1));
  o.min_p = static_cast<float>(b.number("min_p", 0, 0, 1));
  o.repetition_penalty = static_cast<float>(b.number("repetition_penalty", 1, 0.01, 100));
  o.frequency_penalty = static_cast<float>(b.number("frequency_penalty", 0, -2, 2));  // (OpenAI's range)
  o.presence_penalty = static_cast<float>(b.number("presence_penalty", 0, -2, 2));
  o.seed = static_cast<uint64_t>(b.integer("seed", 1, 0, kMaxSeed));
  o.stop = b.stop_strings("stop", 4);  // (OpenAI's limit)
  return o;
}

// A request's text, piece by piece, until it is complete, the request's deadline or the
// drain's passes (HttpError 504 / 503), or the stream is dropped (its request cancelled).
class Pieces {
 public:
  Pieces(const Context& c, const Call& call, ServedModel& m, const Prompt& prompt, const GenerationOptions& o)
      : life_(c.life), deadline_(call.deadline), stream_(client_input([&] { return m.generator->stream(prompt, o); })) {}

  std::optional<std::string> next() {
    life_.check(deadline_);  // past it, the caller drops this, which cancels the request
    return stream_.next();
  }
  TextStream::Finish finish() const { return stream_.finish(); }

 private:
  const Lifecycle& life_;
  Clock::time_point deadline_;
  TextStream stream_;
};

std::string whole_text(Pieces& pieces) {
  std::string text;
  while (std::optional<std::string> piece = pieces.next()) text += *piece;
  return text;
}

// The events that end a stream, made once the text is complete (its finish known).
using LastEvents = std::function<std::vector<std::string>(const TextStream::Finish&)>;

// Server-sent events: each piece as one `data:` event made by `event_of`, then `last`'s
// events; an error after the headers went out as an `event: error`.
void stream_events(Context& c, Call& call, std::shared_ptr<void> ticket, std::shared_ptr<Pieces> pieces,
                   std::function<nlohmann::json(const std::string&)> event_of, LastEvents last) {
  call.streaming = true;
  call.res.set_header("Cache-Control", "no-cache");
  // The queue's place is given back before the stream's end is sent: a client that reads
  // the end and asks again must find it free (`finished` runs only after the write).
  auto place = std::make_shared<std::shared_ptr<void>>(std::move(ticket));
  call.res.content_type = "text/event-stream";
  call.res.stream = std::make_shared<Stream>();
  call.res.stream->produce = [pieces, event_of, last, place](const Stream::Send& send) {
    try {
      while (std::optional<std::string> piece = pieces->next())
        if (!send("data: " + json_text(event_of(*piece)) + "\n\n")) return;  // the client left: the stream is dropped
      for (const std::string& event : last(pieces->finish()))
        if (!send(event)) return;
    } catch (const HttpError& e) {
      send("event: error\ndata: " + json_text(error_json(e.status, e.what())) + "\n\n");
    } catch (const std::exception& e) {
      send("event: error\ndata: " + json_text(error_json(500, e.what())) + "\n\n");
    }
    place->reset();
  };
  call.res.stream->finished = [&metrics = c.metrics, endpoint = call.endpoint, started = call.started, place, pieces]() mutable {
    metrics.request(endpoint, 200, std::chrono::duration<double>(Clock::now() - started).count());
    place->reset(), pieces.reset();  // the queue's place, and the generation if the client left early
  };
}

std::atomic<int64_t> g_completion_ids{0};

// OpenAI's usage record.
nlohmann::json usage(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens}, {"total_tokens", prompt_tokens + completion_tokens}};
}

// What starts each of OpenAI's completion objects (`object`: its kind).
nlohmann::json completion_head(const char* id_prefix, const char* object, const ServedModel& m) {
  return {{"id", id_prefix + std::to_string(++g_completion_ids)},
          {"object", object},
          {"created", static_cast<int64_t>(std::time(nullptr))},
          {"model", m.name}};
}

// [layers][heads][queries][keys]
nlohmann::json weights_json(const AttentionWeights& w) {
  nlohmann::json layers = nlohmann::json::array();
  for (int64_t l = 0; l < w.layers; ++l) {
    nlohmann::json heads = nlohmann::json::array();
    for (int64_t h = 0; h < w.heads; ++h) {
      nlohmann::json rows = nlohmann::json::array();
      for (int64_t q = 0; q < w.queries; ++q) rows.push_back(std::vector<float>(w.row(l, h, q), w.row(l, h, q) + w.keys));
      heads.push_back(std::move(rows));
    }
    layers.push_back(std::move(heads));
  }
  return layers;
}

// The images of a classify or attention request, decoded for model `m`: `raw`, the
// request's body itself (Content-Type image/...), else base64 strings from its JSON; at
// most max_pixels pixels in all.
std::vector<uint8_t> image_pixels(const std::vector<std::string>& images, bool raw, const ServedModel& m, int64_t max_pixels) {
  std::vector<uint8_t> pixels;
  int64_t budget = max_pixels;  // the request's, for all of its images
  for (size_t i = 0; i < images.size(); ++i) {
    try {
      const std::vector<uint8_t> one = model_pixels(raw ? images[i] : decode_base64(images[i]), *m.classifier, budget);
      pixels.insert(pixels.end(), one.begin(), one.end());
    } catch (const HttpError& e) {
      throw HttpError(400, images.size() > 1 ? "image " + std::to_string(i + 1) + ": " + e.what() : std::string(e.what()));
    }
  }
  return pixels;
}

// A chat reply as it is generated, for a request with tools: its text goes out up to where
// a tool call may begin (Generator::tool_call_start), the rest once the reply is complete,
// as the calls it holds (or as text, where it holds none). Without tools, all goes out as it comes.
struct HeldReply {
  HeldReply(const Generator& g, bool with_tools) : generator(g), tools(with_tools) {}
  const Generator& generator;
  bool tools;
  std::string text;
  size_t sent = 0;  // bytes of `text` handed out

  // The text that can go out now, `piece` added.
  std::string take(const std::string& piece) {
    text += piece;
    const size_t start = tools ? generator.tool_call_start(text) : text.size();
    if (start <= sent) return "";
    std::string out = text.substr(sent, start - sent);
    sent = start;
    return out;
  }
  // The whole reply read: its calls, and its text (of which `sent` bytes went out already).
  ChatReply whole() const { return tools ? generator.parse_tool_calls(text) : ChatReply{text, {}}; }
};

// OpenAI's tool_calls; `indexed`: a streamed delta's, where each call says its place.
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls, bool indexed) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    nlohmann::json one = {{"id", calls[i].id}, {"type", "function"}, {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (indexed) one["index"] = i;
    out.push_back(std::move(one));
  }
  return out;
}

// One request at a time on an encoder or classifier (ServedModel::one_at_a_time).
std::unique_lock<std::timed_mutex> take_turn(ServedModel& m, Clock::time_point deadline) {
  std::unique_lock<std::timed_mutex> turn(m.one_at_a_time, std::defer_lock);
  if (!turn.try_lock_until(deadline)) throw HttpError(504, "the request took longer than the server's --timeout");
  return turn;
}

}  // namespace

void translate(Context& c, Call& call) {
  const RequestBody b(call.req.body,
                      {"model", "sentences", "beam", "nbest", "length_penalty", "max_len_a", "max_len_b", "scores", "attention", "src_lang", "tgt_lang"});
  ServedModel& m = c.models.pick(b.text("model", ""), "translation", call.endpoint);
  const std::vector<std::string> sentences = b.texts("sentences", c.options.max_items);
  TranslationOptions o;
  o.beam = b.integer("beam", 4, 1, 64);
  o.nbest = b.integer("nbest", 1, 1, o.beam);
  o.length_penalty = static_cast<float>(b.number("length_penalty", 1, 0, 10));
  if (b.has("max_len_a")) o.max_len_a = static_cast<float>(b.number("max_len_a", 1.5, 0, 10));  // unset: the model's rule
  if (b.has("max_len_b")) o.max_len_b = b.integer("max_len_b", 10, 0, 1000);
  o.return_attention = b.flag("attention", false);
  o.source_language = b.text("src_lang", ""), o.target_language = b.text("tgt_lang", "");  // (a many-to-many model's)
  const bool scores = b.flag("scores", true);
  check_lengths(sentences, "sentence", c.options.max_sentence_tokens, [&](const std::string& s) { return m.translator->source_tokens(s); });

  const std::shared_ptr<void> ticket = c.life.admit();
  std::stop_source cancel;
  std::future<std::vector<Translation>> pending = client_input([&] { return m.translator->submit(sentences, o, {}, cancel.get_token()); });
  const std::vector<Translation> translations = c.life.wait(pending, call.deadline, cancel);

  nlohmann::json out = nlohmann::json::array();
  int64_t tokens = 0;
  for (const Translation& t : translations) {
    nlohmann::json hypotheses = nlohmann::json::array();
    for (size_t h = 0; h < t.hypotheses.size(); ++h) {
      nlohmann::json one = {{"text", t.hypotheses[h]}};
      if (scores) one["score"] = t.scores[h];
      if (o.return_attention && h < t.attention.size()) {  // [target subwords + 1, source subwords + 1]
        const size_t rows = t.token_ids[h].size() + 1, cols = t.attention[h].size() / rows;
        nlohmann::json matrix = nlohmann::json::array();
        for (size_t r = 0; r < rows; ++r)
          matrix.push_back(std::vector<float>(t.attention[h].begin() + static_cast<std::ptrdiff_t>(r * cols),
                                              t.attention[h].begin() + static_cast<std::ptrdiff_t>((r + 1) * cols)));
        one["attention"] = matrix;
      }
      hypotheses.push_back(one);
      tokens += static_cast<int64_t>(t.token_ids[h].size());
    }
    out.push_back({{"text", t.hypotheses[0]}, {"hypotheses", hypotheses}, {"truncated", t.truncated}});
  }
  m.translated_tokens += tokens;
  reply(call.res, {{"model", m.name}, {"translations", out}});
}

void generate(Context& c, Call& call) {
  const RequestBody b(call.req.body, {"model", "prompt", "max_new_tokens", "temperature", "top_k", "top_p", "min_p", "repetition_penalty",
                                      "frequency_penalty", "presence_penalty", "stop", "seed", "stream"});
  ServedModel& m = c.models.pick(b.text("model", ""), "gpt", call.endpoint);
  const std::string prompt = b.text("prompt", "");
  const GenerationOptions o = generation_options(b, c, "max_new_tokens", 100, 0.8);
  check_lengths({prompt}, "prompt", c.options.max_sentence_tokens, [&](const std::string& s) { return m.generator->count_tokens(s); });
  std::shared_ptr<void> ticket = c.life.admit();
  auto pieces = std::make_shared<Pieces>(c, call, m, prompt, o);
  if (b.flag("stream", false))
    return stream_events(c, call, std::move(ticket), pieces, [](const std::string& piece) { return nlohmann::json{{"text", piece}}; },
                         [](const TextStream::Finish&) { return std::vector<std::string>{"data: [DONE]\n\n"}; });
  const std::string text = whole_text(*pieces);
  const TextStream::Finish finish = pieces->finish();
  reply(call.res, {{"model", m.name}, {"text", text}, {"new_tokens", finish.tokens}, {"finish_reason", finish.reason}});
}

void completions(Context& c, Call& call) {
  const RequestBody b(call.req.body, {}, /*lenient=*/true);
  b.only("n", {1}, "one completion per prompt");
  b.only("best_of", {1}, "one completion per prompt");
  b.only("echo", {false}, "the prompt is not repeated");
  b.only("suffix", {""}, "no insertion");
  b.only("logprobs", {0}, "no log-probabilities");
  ServedModel& m = c.models.pick(b.text("model", ""), "gpt", call.endpoint);
  const std::vector<std::string> prompts = b.texts("prompt", c.options.max_items, /*single_ok=*/true);
  const GenerationOptions o = generation_options(b, c, "max_tokens", 16, 1.0);  // OpenAI's defaults
  int64_t prompt_tokens = 0;
  check_lengths(prompts, "prompt", c.options.max_sentence_tokens, [&](const std::string& s) {
    const int64_t n = m.generator->count_tokens(s);
    prompt_tokens += n;
    return n;
  });
  const bool stream = b.flag("stream", false);
  if (stream && prompts.size() > 1) throw HttpError(400, "'stream' takes one prompt");
  std::shared_ptr<void> ticket = c.life.admit();
  const nlohmann::json head = completion_head("cmpl-", "text_completion", m);
  auto choice = [](const std::string& text, size_t index, const nlohmann::json& finish) {
    return nlohmann::json{{"text", text}, {"index", index}, {"logprobs", nullptr}, {"finish_reason", finish}};
  };
  if (stream) {
    return stream_events(
        c, call, std::move(ticket), std::make_shared<Pieces>(c, call, m, prompts[0], o),
        [head, choice](const std::string& piece) {
          nlohmann::json event = head;
          event["choices"] = nlohmann::json::array({choice(piece, 0, nullptr)});
          return event;
        },
        [head, choice](const TextStream::Finish& finish) {
          nlohmann::json end = head;
          end["choices"] = nlohmann::json::array({choice("", 0, finish.reason)});
          return std::vector<std::string>{"data: " + json_text(end) + "\n\n", "data: [DONE]\n\n"};
        });
  }
  std::vector<std::unique_ptr<Pieces>> all;  // every prompt joins the running batch before any is waited for
  for (const std::string& p : prompts) all.push_back(std::make_unique<Pieces>(c, call, m, p, o));
  nlohmann::json out = head;
  out["choices"] = nlohmann::json::array();
  int64_t completion_tokens = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string text = whole_text(*all[i]);
    const TextStream::Finish finish = all[i]->finish();
    out["choices"].push_back(choice(text, i, finish.reason));
    completion_tokens += finish.tokens;
  }
  out["usage"] = usage(prompt_tokens, completion_tokens);
  reply(call.res, out);
}

void chat_completions(Context& c, Call& call) {
  const RequestBody b(call.req.body, {}, /*lenient=*/true);
  b.only("n", {1}, "one reply per request");
  b.only("logprobs", {false}, "no log-probabilities");
  b.only("tool_choice", {"auto", "none"}, "\"auto\" or \"none\" only (tfm does not force a call)");
  ServedModel& m = c.models.pick(b.text("model", ""), "gpt", call.endpoint);
  if (!m.generator->has_chat_template())
    throw HttpError(400, "model '" + m.name + "' has no chat template (tokenizer_config.json's chat_template): use /v1/completions");
  const Chat chat = b.messages("messages", c.options.max_items);
  // "none": the model is not told of the tools, so that it answers in words (vLLM's --exclude-tools-when-tool-choice-none).
  const std::string tools = b.text("tool_choice", "auto") == "none" ? "" : b.tools("tools", c.options.max_items);
  const char* length_field = b.has("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";  // (OpenAI's newer name first)
  const GenerationOptions o = generation_options(b, c, length_field, c.options.max_new_tokens, 1.0);  // OpenAI's: as long as it takes
  const Prompt prompt(chat, tools);
  int64_t prompt_tokens = 0;
  std::string all = tools;
  for (const ChatMessage& message : chat) {
    all += message.content;
    for (const ToolCall& call : message.tool_calls) all += call.arguments;
  }
  check_lengths({all}, "the conversation", c.options.max_sentence_tokens, [&](const std::string&) {
    return prompt_tokens = m.generator->count_tokens(prompt);
  });
  // Cut to its last tokens, a conversation would lose its system message and the
  // template's start: refused, as OpenAI's context_length_exceeded.
  if (prompt_tokens >= m.generator->max_tokens())
    throw HttpError(400, "the conversation is " + std::to_string(prompt_tokens) + " tokens; the model's context is " +
                             std::to_string(m.generator->max_tokens()) + ", with room for the reply");
  std::shared_ptr<void> ticket = c.life.admit();
  auto pieces = std::make_shared<Pieces>(c, call, m, prompt, o);
  auto held = std::make_shared<HeldReply>(*m.generator, !tools.empty());
  if (b.flag("stream", false)) {
    const bool with_usage = b.object("stream_options").value("include_usage", false) == true;
    auto chunk = [head = completion_head("chatcmpl-", "chat.completion.chunk", m), first = std::make_shared<bool>(true)](
                     nlohmann::json delta, const nlohmann::json& finish) {
      if (!delta.empty() && std::exchange(*first, false)) delta["role"] = "assistant";  // the first chunk says who speaks, as OpenAI's
      nlohmann::json event = head;
      event["choices"] = nlohmann::json::array({{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish}}});
      return event;
    };
    return stream_events(
        c, call, std::move(ticket), pieces, [chunk, held](const std::string& piece) { return chunk({{"content", held->take(piece)}}, nullptr); },
        [chunk, held, with_usage, prompt_tokens](const TextStream::Finish& finish) {
          std::vector<std::string> events;
          auto send = [&](const nlohmann::json& event) { events.push_back("data: " + json_text(event) + "\n\n"); };
          const ChatReply whole = held->whole();
          if (whole.content.size() > held->sent) send(chunk({{"content", whole.content.substr(held->sent)}}, nullptr));
          if (!whole.tool_calls.empty()) send(chunk({{"tool_calls", tool_calls_json(whole.tool_calls, /*indexed=*/true)}}, nullptr));
          send(chunk(nlohmann::json::object(), whole.tool_calls.empty() ? finish.reason : "tool_calls"));
          if (with_usage) {
            nlohmann::json last = chunk(nlohmann::json::object(), nullptr);
            last["choices"] = nlohmann::json::array(), last["usage"] = usage(prompt_tokens, finish.tokens);
            send(last);
          }
          events.push_back("data: [DONE]\n\n");
          return events;
        });
  }
  held->text = whole_text(*pieces);
  const ChatReply whole = held->whole();
  const TextStream::Finish finish = pieces->finish();
  nlohmann::json message = {{"role", "assistant"}, {"content", whole.content}};
  if (!whole.tool_calls.empty()) {
    if (whole.content.empty()) message["content"] = nullptr;  // (as OpenAI's, where the reply is calls alone)
    message["tool_calls"] = tool_calls_json(whole.tool_calls, /*indexed=*/false);
  }
  nlohmann::json out = completion_head("chatcmpl-", "chat.completion", m);
  out["choices"] = nlohmann::json::array({{{"index", 0}, {"message", message}, {"logprobs", nullptr},
                                           {"finish_reason", whole.tool_calls.empty() ? finish.reason : "tool_calls"}}});
  out["usage"] = usage(prompt_tokens, finish.tokens);
  reply(call.res, out);
}

void embed(Context& c, Call& call) {
  const RequestBody b(call.req.body, {"model", "sentences", "pool", "normalize"});
  ServedModel& m = c.models.pick(b.text("model", ""), "bert", call.endpoint);
  const std::vector<std::string> sentences = b.texts("sentences", c.options.max_items);
  check_sizes(sentences, "sentence", c.options.max_sentence_tokens);  // longer ones are cut to the model's length anyway
  const std::string pool = b.text("pool", "");  // (the model's own: a sentence-transformers directory's, else mean)
  if (pool != "" && pool != "mean" && pool != "cls" && pool != "max")
    throw HttpError(400, "'pool' must be \"mean\", \"max\" or \"cls\", got \"" + pool + "\"");
  const bool normalize = b.flag("normalize", false);
  const std::shared_ptr<void> ticket = c.life.admit();
  const std::unique_lock<std::timed_mutex> turn = take_turn(m, call.deadline);
  const Embeddings e = client_input([&] { return m.encoder->embed(sentences, pool, normalize); });
  nlohmann::json vectors = nlohmann::json::array();
  for (int64_t i = 0; i < e.count; ++i)
    vectors.push_back(std::vector<float>(e.values.begin() + i * e.dim, e.values.begin() + (i + 1) * e.dim));
  reply(call.res, {{"model", m.name}, {"dim", e.dim}, {"embeddings", vectors}, {"truncated", e.truncated}});
}

// A BERT classifier's labels of `sentences`: each sentence's label and probabilities
// (a sentence classifier), or its words' labels and entities (a token classifier).
void classify_text(Context& c, Call& call, const RequestBody& b) {
  ServedModel& m = c.models.pick(b.text("model", ""), "bert", call.endpoint);
  const std::vector<std::string> sentences = b.texts("sentences", c.options.max_items);
  check_sizes(sentences, "sentence", c.options.max_sentence_tokens);
  const std::string head = m.encoder->head();
  if (head != "sequence" && head != "token")
    throw HttpError(400, "model '" + m.name + "' is not a classifier (its head is " + head + "): /v1/classify takes a sentence or token classifier");
  const std::vector<std::string>& names = m.encoder->labels();
  const std::shared_ptr<void> ticket = c.life.admit();
  const std::unique_lock<std::timed_mutex> turn = take_turn(m, call.deadline);
  nlohmann::json results = nlohmann::json::array();
  int64_t truncated = 0;  // sentences cut to the model's length
  if (head == "sequence") {
    const SentenceLabels k = client_input([&] { return m.encoder->classify(sentences); });
    truncated = k.truncated;
    for (int64_t i = 0; i < k.count; ++i)
      results.push_back({{"label", k.labels[i]}, {"name", names[static_cast<size_t>(k.labels[i])]},
                         {"probabilities", std::vector<float>(k.probabilities.begin() + i * k.classes, k.probabilities.begin() + (i + 1) * k.classes)}});
  } else {
    for (const TaggedSentence& t : client_input([&] { return m.encoder->tag(sentences); })) {
      truncated += t.truncated;
      nlohmann::json words = nlohmann::json::array(), entities = nlohmann::json::array();
      for (const TaggedWord& w : t.words) words.push_back({{"word", w.text}, {"label", names[static_cast<size_t>(w.label)]}, {"probability", w.probability}});
      for (const Entity& e : t.entities)
        entities.push_back({{"type", e.type}, {"text", e.text}, {"first_word", e.first_word}, {"end_word", e.end_word}, {"score", e.score}});
      results.push_back({{"entities", entities}, {"words", words}});
    }
  }
  reply(call.res, {{"model", m.name}, {"head", head}, {"class_names", names}, {"multi_label", m.encoder->multi_label()}, {"results", results},
                   {"truncated", truncated}});
}

void classify(Context& c, Call& call) {
  const bool raw = image_body(call.req);
  std::optional<RequestBody> b;
  if (!raw) b.emplace(call.req.body, std::initializer_list<std::string_view>{"model", "images", "sentences"});
  if (b && b->has("sentences") == b->has("images"))
    throw HttpError(400, "/v1/classify takes 'sentences' (a BERT classifier's text) or 'images' (a ViT's), one of them");
  if (b && b->has("sentences")) return classify_text(c, call, *b);
  ServedModel& m = c.models.pick(raw ? call.req.param("model") : b->text("model", ""), "vit", call.endpoint);
  const std::vector<std::string> images = raw ? std::vector<std::string>{call.req.body} : b->texts("images", c.options.max_items);
  const std::vector<uint8_t> pixels = image_pixels(images, raw, m, c.options.max_image_pixels);
  const std::shared_ptr<void> ticket = c.life.admit();
  const std::unique_lock<std::timed_mutex> turn = take_turn(m, call.deadline);
  const Classification k = m.classifier->classify(pixels, static_cast<int64_t>(images.size()));
  const std::vector<std::string>& names = m.classifier->class_names();  // an image folder's, or a Hugging Face model's labels
  nlohmann::json results = nlohmann::json::array();
  for (int64_t i = 0; i < k.count; ++i) {
    results.push_back({{"label", k.labels[i]},
                       {"probabilities", std::vector<float>(k.probabilities.begin() + i * k.classes, k.probabilities.begin() + (i + 1) * k.classes)}});
    if (!names.empty()) results.back()["name"] = names[static_cast<size_t>(k.labels[i])];
  }
  nlohmann::json reply_json = {{"model", m.name}, {"classes", k.classes}, {"results", results}};
  if (!names.empty()) reply_json["class_names"] = names;
  reply(call.res, reply_json);
}

void attention(Context& c, Call& call) {
  const bool raw = image_body(call.req);
  std::optional<RequestBody> b;
  if (!raw) b.emplace(call.req.body, std::initializer_list<std::string_view>{"model", "text", "target", "max_new_tokens", "image"});
  ServedModel& m = c.models.pick_any(raw ? call.req.param("model") : b->text("model", ""));
  nlohmann::json out = {{"model", m.name}, {"family", m.family}};
  if (m.family == "vit") {
    const std::vector<std::string> image = raw ? std::vector<std::string>{call.req.body} : b->texts("image", 1, /*single_ok=*/true);
    const std::vector<uint8_t> pixels = image_pixels(image, raw, m, c.options.max_image_pixels);
    const std::shared_ptr<void> ticket = c.life.admit();
    const std::unique_lock<std::timed_mutex> turn = take_turn(m, call.deadline);
    const Classification k = m.classifier->classify(pixels, 1);
    out["label"] = k.labels[0], out["probabilities"] = k.probabilities;
    out["grid"] = m.classifier->image_size() / m.classifier->patch_size();
    out["encoder"] = weights_json(m.classifier->attention(pixels));
    return reply(call.res, out);
  }
  const std::string text = b->text("text", "");
  check_lengths({text}, "text", c.options.max_sentence_tokens, [&](const std::string& s) {
    return m.translator ? m.translator->source_tokens(s) : m.generator ? m.generator->count_tokens(s) : int64_t{0};
  });
  const std::shared_ptr<void> ticket = c.life.admit();
  if (m.family == "translation") {
    const TranslationAttention a = client_input([&] { return m.translator->attention(text, b->text("target", "")); });
    out["translation"] = a.translation, out["source_tokens"] = a.source_tokens, out["target_tokens"] = a.target_tokens;
    out["encoder"] = weights_json(a.encoder), out["decoder"] = weights_json(a.decoder), out["cross"] = weights_json(a.cross);
  } else if (m.family == "gpt") {  // the prompt and its greedy continuation
    GenerationOptions o;
    o.max_new_tokens = b->integer("max_new_tokens", 20, 0, std::min<int64_t>(c.options.max_new_tokens, 1000));
    o.temperature = 0;
    Pieces pieces(c, call, m, text, o);
    out["text"] = whole_text(pieces);
    const std::string whole = text + out["text"].get<std::string>();
    const TextAttention a = m.generator->attention(whole);  // its last positions: the continuation, then the prompt's end
    const int64_t dropped = m.generator->count_tokens(whole) - static_cast<int64_t>(a.tokens.size());
    out["prompt_tokens"] = std::max<int64_t>(0, (text.empty() ? 0 : m.generator->count_tokens(text)) - dropped);
    out["tokens"] = a.tokens, out["decoder"] = weights_json(a.self);
  } else {
    const std::unique_lock<std::timed_mutex> turn = take_turn(m, call.deadline);
    const TextAttention a = client_input([&] { return m.encoder->attention(text); });
    out["tokens"] = a.tokens, out["encoder"] = weights_json(a.self);
  }
  reply(call.res, out);
}

}  // namespace tfm::serve
