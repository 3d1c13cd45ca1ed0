// The Python module `tfm`: a thin layer over the public C++ API (include/tfm), as the
// command line is. Every call that computes releases the GIL, so that Python threads
// run tfm's work at once; tfm's errors arrive as RuntimeError with tfm's message.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <ostream>
#include <regex>
#include <stop_token>
#include <streambuf>
#include <string>
#include <utility>
#include <vector>

#include "tfm/checkpoint.h"
#include "tfm/classifier.h"
#include "tfm/encoder.h"
#include "tfm/generator.h"
#include "tfm/images.h"
#include "tfm/training.h"
#include "tfm/translator.h"

namespace py = pybind11;
using namespace py::literals;

namespace {

// A path argument: str, bytes or os.PathLike (pathlib.Path), without NUL bytes (which
// would cut the path short where the system reads it).
std::string path_of(const py::object& path) {
  py::object fs = py::module_::import("os").attr("fsdecode")(py::module_::import("os").attr("fspath")(path));
  const std::string p = fs.cast<std::string>();
  if (p.find('\0') != std::string::npos) throw py::value_error("a path holds a NUL byte: " + py::repr(path).cast<std::string>());
  return p;
}

// Waits for `future` without the GIL, looking every 50 ms for Ctrl-C (Python runs its
// signal handlers in the main thread, with the GIL): a KeyboardInterrupt is raised at
// once, after `on_interrupt` has run.
template <class T>
T wait_interruptibly(std::future<T>& future, const std::function<void()>& on_interrupt = {}) {
  for (;;) {
    {
      py::gil_scoped_release release;
      if (future.wait_for(std::chrono::milliseconds(50)) == std::future_status::ready) break;
    }
    if (PyErr_CheckSignals() != 0) {
      if (on_interrupt) on_interrupt();
      throw py::error_already_set();
    }
  }
  return future.get();
}

// The constructor of a text model class (checkpoint, ModelOptions): it loads without the GIL.
template <class Model>
auto model_init() {
  return py::init([](const py::object& path, const std::string& device, const std::string& precision, const py::object& vocab) {
    const std::string checkpoint = path_of(path), vocabulary = vocab.is_none() ? "" : path_of(vocab);
    py::gil_scoped_release release;
    return std::make_unique<Model>(checkpoint, tfm::ModelOptions{vocabulary, precision, device});
  });
}

// A row-major float buffer as a NumPy array of `shape` (copied: the array owns its data).
py::array_t<float> to_numpy(const std::vector<float>& values, std::vector<py::ssize_t> shape) {
  py::array_t<float> a(shape);
  std::copy(values.begin(), values.end(), a.mutable_data());
  return a;
}

// A struct made from keyword arguments, each setting the attribute of its name (a
// misspelt name is a TypeError, not a setting silently ignored).
template <class T>
T from_kwargs(const py::kwargs& settings) {
  py::object o = py::cast(T{});
  for (const auto& [name, value] : settings) {
    if (!py::hasattr(o, name)) throw py::type_error("unknown setting '" + py::str(name).cast<std::string>() + "'");
    py::setattr(o, name, value);
  }
  return o.cast<T>();
}

template <class T>
py::class_<T> settings_class(py::module_& m, const char* name, const char* doc) {
  return py::class_<T>(m, name, doc).def(py::init(&from_kwargs<T>));
}

// Settings that name files: read as str, set from str, bytes or os.PathLike (path_of), as
// every path the module takes.
template <class T>
py::class_<T>& def_paths(py::class_<T>& cls, std::initializer_list<std::pair<const char*, std::string T::*>> fields) {
  for (const auto& [name, field] : fields)
    cls.def_property(name, [field = field](const T& o) { return o.*field; }, [field = field](T& o, const py::object& p) { o.*field = path_of(p); });
  return cls;
}

// A BERT fine-tuning task's settings (its fields are the same for both kinds).
template <class Task>
void fine_tuning_class(py::module_& m, const char* name, const char* doc) {
  auto task = settings_class<Task>(m, name, doc);
  task.def_readwrite("batch", &Task::batch).def_static("training_defaults", &Task::training_defaults);
  def_paths(task, {{"train", &Task::train}, {"valid", &Task::valid}, {"vocab", &Task::vocab}});
}

void bind_translator(py::module_& m) {
  py::class_<tfm::Translation>(m, "Translation", "One sentence's translation: hypotheses best first, with their scores")
      .def_readonly("hypotheses", &tfm::Translation::hypotheses)
      .def_readonly("scores", &tfm::Translation::scores)
      .def_readonly("token_ids", &tfm::Translation::token_ids)
      .def_readonly("truncated", &tfm::Translation::truncated)
      .def_property_readonly("attention", [](const tfm::Translation& t) {
        // Each hypothesis's [target subwords + 1, source subwords + 1] encoder-decoder attention.
        py::list out;
        for (size_t h = 0; h < t.attention.size(); ++h) {
          const auto rows = static_cast<py::ssize_t>(t.token_ids[h].size() + 1);
          out.append(to_numpy(t.attention[h], {rows, static_cast<py::ssize_t>(t.attention[h].size()) / rows}));
        }
        return out;
      });
  py::class_<tfm::Translator>(m, "Translator", "A translation model from `tfm train`, with a pool of workers")
      .def(py::init([](const py::object& path, const std::string& device, const std::string& precision, int threads, int workers,
                       const py::object& src_vocab, const py::object& tgt_vocab) {
             const std::string checkpoint = path_of(path);
             tfm::TranslatorOptions o;
             o.src_vocab = src_vocab.is_none() ? "" : path_of(src_vocab), o.tgt_vocab = tgt_vocab.is_none() ? "" : path_of(tgt_vocab);
             o.precision = precision, o.device = device, o.threads = threads, o.workers = workers;
             py::gil_scoped_release release;
             return std::make_unique<tfm::Translator>(checkpoint, o);
           }),
           "path"_a, "device"_a = "cpu", "precision"_a = "f32", "threads"_a = 0, "workers"_a = 0, "src_vocab"_a = py::none(),
           "tgt_vocab"_a = py::none())
      .def(
          "translate",
          [](tfm::Translator& t, const std::vector<std::string>& sources, int64_t beam, int64_t nbest, float length_penalty,
             std::optional<float> max_len_a, std::optional<int64_t> max_len_b, bool return_scores, bool return_attention,
             const std::string& src_lang, const std::string& tgt_lang) {
            if (beam < 1 || beam > 64) throw py::value_error("beam must be from 1 to 64 (as tfm translate --beam), got " + std::to_string(beam));
            std::stop_source cancel;  // Ctrl-C drops the sentences no worker has begun (a batch being searched ends first)
            const tfm::TranslationOptions o{beam, nbest, length_penalty, max_len_a, max_len_b, return_attention, src_lang, tgt_lang};
            auto pending = t.submit(sources, o, {}, cancel.get_token());
            std::vector<tfm::Translation> out = wait_interruptibly(pending, [&] { cancel.request_stop(); });
            if (!return_scores)
              for (tfm::Translation& one : out) one.scores.clear();
            return out;
          },
          "sources"_a, "beam"_a = 4, "nbest"_a = 1, "length_penalty"_a = 1.0f, "max_len_a"_a = py::none(), "max_len_b"_a = py::none(),
          "return_scores"_a = true, "return_attention"_a = false, "src_lang"_a = "", "tgt_lang"_a = "")
      .def_property_readonly("max_source_tokens", &tfm::Translator::max_source_tokens);
}

// Generator.stream's iterator: each next() waits (without the GIL) for the next piece of
// text (tokens that add none, such as an unknown token, give no piece).
struct PieceIterator {
  tfm::TextStream stream;
  std::optional<std::string> next_piece() {
    std::optional<std::string> piece;
    do {
      py::gil_scoped_release release;
      piece = stream.next();
    } while (piece && piece->empty());
    return piece;
  }
  std::string next() {
    std::optional<std::string> piece = next_piece();
    if (!piece) throw py::stop_iteration();
    return *piece;
  }
};

// Python's json.dumps of `o` (the keys in their order).
std::string json_text(const py::handle& o) { return py::module_::import("json").attr("dumps")(o).cast<std::string>(); }

// An OpenAI message dict (transformers' too: a call's arguments may be a dict, and content None where it calls tools).
tfm::ChatMessage message_of(const py::dict& m) {
  if (!m.contains("role") || !m.contains("content")) throw py::value_error("a message is a dict of a 'role' and a 'content'");
  auto text = [&](const char* key) { return m.contains(key) && !m[key].is_none() ? m[key].cast<std::string>() : std::string(); };
  tfm::ChatMessage message{m["role"].cast<std::string>(), text("content"), {}, text("tool_call_id"), text("name")};
  if (m.contains("tool_calls") && !m["tool_calls"].is_none())
    for (const py::handle call : m["tool_calls"].cast<py::list>()) {
      const py::dict f = call.cast<py::dict>()["function"].cast<py::dict>();
      const py::object arguments = f.contains("arguments") ? py::object(f["arguments"]) : py::dict();
      const py::dict c = call.cast<py::dict>();
      message.tool_calls.push_back({c.contains("id") && !c["id"].is_none() ? c["id"].cast<std::string>() : "", f["name"].cast<std::string>(),
                                    py::isinstance<py::str>(arguments) ? arguments.cast<std::string>() : json_text(arguments)});
    }
  return message;
}

void bind_generator(py::module_& m) {
  py::class_<PieceIterator>(m, "TextStream", "The pieces of one request's text as they are generated")
      .def("__iter__", [](PieceIterator& it) -> PieceIterator& { return it; })
      .def("__next__", &PieceIterator::next)
      .def_property_readonly(
          "finish_reason", [](const PieceIterator& it) { return it.stream.finish().reason; },
          "Once the text is complete: \"stop\" (an end token or a stop string) or \"length\" (max_tokens); before: \"\"")
      .def_property_readonly(
          "tokens", [](const PieceIterator& it) { return it.stream.finish().tokens; }, "Once the text is complete: the tokens generated");
  // OpenAI's `stop`: None, a string or a list of strings.
  auto stop_strings = [](const py::object& stop) {
    if (stop.is_none()) return std::vector<std::string>{};
    if (py::isinstance<py::str>(stop)) return std::vector<std::string>{stop.cast<std::string>()};
    return stop.cast<std::vector<std::string>>();
  };
  // A text, or a conversation: a list of OpenAI's message dicts, as transformers' apply_chat_template takes them, with
  // the tools (OpenAI's list of dicts, or None).
  auto prompt_of = [](const py::object& prompt, const py::object& tools) -> tfm::Prompt {
    if (py::isinstance<py::str>(prompt)) {
      if (!tools.is_none()) throw py::value_error("tools go with a conversation (a list of messages), not a text");
      return prompt.cast<std::string>();
    }
    tfm::Chat chat;
    for (const py::handle message : prompt.cast<py::list>()) chat.push_back(message_of(message.cast<py::dict>()));
    return tools.is_none() ? tfm::Prompt(chat) : tfm::Prompt(chat, json_text(tools));
  };
  py::class_<tfm::Generator>(m, "Generator",
                             "A language model (`tfm lm train`, or a Hugging Face GPT-2, Llama, Mistral or Qwen2 directory); requests share "
                             "its batch (continuous batching)")
      .def(py::init([](const py::object& path, const std::string& device, const std::string& precision, const py::object& vocab,
                       const py::object& lora) {
             tfm::ModelOptions o{vocab.is_none() ? "" : path_of(vocab), precision, device};
             o.lora = lora.is_none() ? "" : path_of(lora);
             const std::string checkpoint = path_of(path);
             py::gil_scoped_release release;
             return std::make_unique<tfm::Generator>(checkpoint, o);
           }),
           "path"_a, "device"_a = "cpu", "precision"_a = "f32", "vocab"_a = py::none(), "lora"_a = py::none(),
           "Loads a language model; `lora`: a LoRA adapter's directory (PEFT's), merged into its weights (as tfm generate --lora)")
      .def(
          "stream",
          [stop_strings, prompt_of](const tfm::Generator& g, const py::object& prompt, int64_t max_tokens, float temperature, int64_t top_k, float top_p,
                         float min_p, float repetition_penalty, float frequency_penalty, float presence_penalty, const py::object& stop,
                         uint64_t seed, const py::object& tools) {
            const tfm::GenerationOptions o{max_tokens,         temperature,       top_k,           top_p, min_p, repetition_penalty,
                                           frequency_penalty, presence_penalty, seed, stop_strings(stop)};
            return PieceIterator{g.stream(prompt_of(prompt, tools), o)};
          },
          "prompt"_a = "", "max_tokens"_a = 500, "temperature"_a = 0.8f, "top_k"_a = 0, "top_p"_a = 1.0f, "min_p"_a = 0.0f,
          "repetition_penalty"_a = 1.0f, "frequency_penalty"_a = 0.0f, "presence_penalty"_a = 0.0f, "stop"_a = py::none(), "seed"_a = 1,
          "tools"_a = py::none(),
          py::keep_alive<0, 1>(),  // the generator lives while a stream of it does
          "The text that continues `prompt` (a text, or a chat model's conversation: a list of OpenAI's message dicts, "
          "{'role': ..., 'content': ...} with an assistant's 'tool_calls' and a tool's 'tool_call_id' and 'name', written by its "
          "chat template, with `tools`: OpenAI's list of {'type': 'function', 'function': {...}} dicts), piece by piece as it is "
          "generated")
      .def(
          "generate",
          [](const py::object& self, const py::args& args, const py::kwargs& options) {
            // Piece by piece, so that Ctrl-C ends it at once (dropping the stream cancels the request).
            const py::object stream = self.attr("stream")(*args, **options);
            PieceIterator& it = stream.cast<PieceIterator&>();
            std::string text;
            while (std::optional<std::string> piece = it.next_piece()) {
              text += *piece;
              if (PyErr_CheckSignals() != 0) throw py::error_already_set();
            }
            return text;
          },
          "generate(prompt='', **options): the whole text that continues `prompt` (a text or a conversation); the options are "
          "stream()'s (max_tokens, temperature, top_k, top_p, min_p, repetition_penalty, frequency_penalty, presence_penalty, stop, seed, "
          "tools)")
      .def(
          "parse_tool_calls",
          [](const tfm::Generator& g, const std::string& reply) {
            const tfm::ChatReply r = g.parse_tool_calls(reply);
            py::list calls;
            for (const tfm::ToolCall& c : r.tool_calls)
              calls.append(py::dict("id"_a = c.id, "type"_a = "function", "function"_a = py::dict("name"_a = c.name, "arguments"_a = c.arguments)));
            // (content None beside calls and no text, as OpenAI's and tfm serve's messages have it)
            const py::object content = r.content.empty() && !r.tool_calls.empty() ? py::object(py::none()) : py::object(py::str(r.content));
            py::dict message("role"_a = "assistant", "content"_a = content);
            if (!r.tool_calls.empty()) message["tool_calls"] = calls;
            return message;
          },
          "reply"_a,
          "A reply as OpenAI's assistant message: {'role': 'assistant', 'content': ..., 'tool_calls': [...]} with the tool calls it "
          "makes in the format the model's template teaches (arguments: JSON text); the whole reply as content where it makes none. "
          "The message can join the conversation as it is")
      .def_property_readonly("has_chat_template", &tfm::Generator::has_chat_template,
                             "Whether the model takes conversations (its tokenizer has a chat template)");
}

void bind_encoder_and_classifier(py::module_& m) {
  py::class_<tfm::Encoder>(m, "Encoder",
                           "A BERT-style encoder (`tfm bert train`, a Hugging Face BERT or sentence-transformers directory): sentence "
                           "vectors, and a classifier's labels of sentences or of their words")
      .def(model_init<tfm::Encoder>(), "path"_a, "device"_a = "cpu", "precision"_a = "f32", "vocab"_a = py::none())
      .def(
          "embed",
          [](const tfm::Encoder& e, const std::vector<std::string>& sentences, const std::string& pool, bool normalize) {
            tfm::Embeddings v;
            {
              py::gil_scoped_release release;
              v = e.embed(sentences, pool, normalize);
            }
            return to_numpy(v.values, {static_cast<py::ssize_t>(v.count), static_cast<py::ssize_t>(v.dim)});  // [sentences, dim]
          },
          "sentences"_a, "pool"_a = "", "normalize"_a = false,
          "One vector per sentence: pool 'mean', 'max' or 'cls' ('': the model's own); normalize: length 1")
      .def(
          "classify",
          [](const tfm::Encoder& e, const std::vector<std::string>& sentences) {
            tfm::SentenceLabels k;
            {
              py::gil_scoped_release release;
              k = e.classify(sentences);
            }
            py::list labels;
            for (int64_t label : k.labels) labels.append(e.labels()[static_cast<size_t>(label)]);
            return py::make_tuple(labels, to_numpy(k.probabilities, {static_cast<py::ssize_t>(k.count), static_cast<py::ssize_t>(k.classes)}));
          },
          "sentences"_a, "A sentence classifier's (label names, probabilities [sentences, labels])")
      .def(
          "tag",
          [](const tfm::Encoder& e, const std::vector<std::string>& sentences) {
            std::vector<tfm::TaggedSentence> tagged;
            {
              py::gil_scoped_release release;
              tagged = e.tag(sentences);
            }
            py::list out;
            for (const tfm::TaggedSentence& t : tagged) {
              py::list words, entities;
              for (const tfm::TaggedWord& w : t.words)
                words.append(py::dict("word"_a = w.text, "label"_a = e.labels()[static_cast<size_t>(w.label)], "probability"_a = w.probability));
              for (const tfm::Entity& x : t.entities)
                entities.append(py::dict("type"_a = x.type, "text"_a = x.text, "first_word"_a = x.first_word, "end_word"_a = x.end_word,
                                         "score"_a = x.score));
              out.append(py::dict("words"_a = words, "entities"_a = entities));
            }
            return out;
          },
          "sentences"_a, "A token classifier's words (word, label, probability) and entities (type, text, words, score) per sentence")
      .def_property_readonly("dim", &tfm::Encoder::dim)
      .def_property_readonly("head", &tfm::Encoder::head)
      .def_property_readonly("labels", &tfm::Encoder::labels);
  py::class_<tfm::Classifier>(m, "Classifier", "Image classes from a `tfm vit train` Vision Transformer")
      .def(py::init([](const py::object& path, const std::string& device, const std::string& precision) {
             const std::string checkpoint = path_of(path);
             py::gil_scoped_release release;
             return std::make_unique<tfm::Classifier>(checkpoint, tfm::ModelOptions{"", precision, device});
           }),
           "path"_a, "device"_a = "cpu", "precision"_a = "f32")
      .def(
          "classify",
          [](const tfm::Classifier& c, const py::array& given) {
            // [n, size, size] (one channel) or [n, channels, size, size] uint8 pixels -> labels [n], probabilities [n, classes]
            const py::ssize_t size = c.image_size(), channels = c.channels();
            const bool shaped = (given.ndim() == 3 && channels == 1 && given.shape(1) == size && given.shape(2) == size) ||
                                (given.ndim() == 4 && given.shape(1) == channels && given.shape(2) == size && given.shape(3) == size);
            const std::string want = "[n, " + std::to_string(size) + ", " + std::to_string(size) + "]" +
                                     (channels == 1 ? " or [n, 1, " : " or [n, " + std::to_string(channels) + ", ") + std::to_string(size) +
                                     ", " + std::to_string(size) + "]";
            if (!shaped) throw py::value_error("images must be " + want + ", got shape " + py::str(given.attr("shape")).cast<std::string>());
            if (!given.dtype().is(py::dtype::of<uint8_t>()))
              throw py::value_error("images must be uint8 pixels (0-255), got " + py::str(given.dtype()).cast<std::string>() +
                                    "; scale and convert them first (e.g. (x * 255).round().astype(numpy.uint8))");
            const auto images = py::array_t<uint8_t, py::array::c_style>::ensure(given);
            const std::vector<uint8_t> pixels(images.data(), images.data() + images.size());
            tfm::Classification r;
            {
              py::gil_scoped_release release;
              r = c.classify(pixels, images.shape(0));
            }
            py::array_t<int64_t> labels(static_cast<py::ssize_t>(r.count));
            std::copy(r.labels.begin(), r.labels.end(), labels.mutable_data());
            return py::make_tuple(labels, to_numpy(r.probabilities, {static_cast<py::ssize_t>(r.count), static_cast<py::ssize_t>(r.classes)}));
          },
          "images"_a)
      .def(
          "pixels_of",
          [](const tfm::Classifier& c, const py::object& image) {
            // An image file's path, or [height, width] / [height, width, channels] uint8 pixels
            // (numpy.asarray of a PIL image) -> [channels, size, size] as classify takes them.
            tfm::Image img;
            if (py::isinstance<py::array>(image)) {
              const py::array given = image.cast<py::array>();
              const bool shaped = given.ndim() == 2 || (given.ndim() == 3 && (given.shape(2) == 1 || given.shape(2) == 3));
              if (!shaped || !given.dtype().is(py::dtype::of<uint8_t>()))
                throw py::value_error("an image must be uint8 pixels [height, width] or [height, width, 1 or 3], got " +
                                      py::str(given.dtype()).cast<std::string>() + " " + py::str(given.attr("shape")).cast<std::string>());
              const auto a = py::array_t<uint8_t, py::array::c_style>::ensure(given);
              img = {a.shape(0), a.shape(1), a.ndim() == 3 ? a.shape(2) : 1, std::vector<uint8_t>(a.data(), a.data() + a.size())};
            } else {
              const std::string path = path_of(image);
              py::gil_scoped_release release;
              img = tfm::read_image(path);
            }
            std::vector<uint8_t> pixels;
            {
              py::gil_scoped_release release;
              pixels = c.pixels_of(img);
            }
            const py::ssize_t size = c.image_size();
            py::array_t<uint8_t> out({static_cast<py::ssize_t>(c.channels()), size, size});
            std::copy(pixels.begin(), pixels.end(), out.mutable_data());
            return out;
          },
          "image"_a, "An image as classify takes it, resized as `tfm vit eval -i` resizes it: a file's path or numpy pixels")
      .def(
          "embed",
          [](const tfm::Classifier& c, const py::array_t<uint8_t, py::array::c_style | py::array::forcecast>& images, const std::string& pool) {
            // [n, channels, size, size] uint8 pixels (pixels_of's, stacked) -> [n, dim]: "pooler" (pooler_output), "cls"
            // (last_hidden_state[:, 0]), or "" (pooler where the model has one)
            const std::vector<uint8_t> pixels(images.data(), images.data() + images.size());
            const int64_t n = images.ndim() == 4 ? images.shape(0) : -1;  // any other shape: refused by embed's own check
            tfm::Embeddings v;
            {
              py::gil_scoped_release release;
              v = c.embed(pixels, n, pool);
            }
            return to_numpy(v.values, {static_cast<py::ssize_t>(v.count), static_cast<py::ssize_t>(v.dim)});
          },
          "images"_a, "pool"_a = "")
      .def_property_readonly("has_classifier", &tfm::Classifier::has_classifier)
      .def_property_readonly("image_size", &tfm::Classifier::image_size)
      .def_property_readonly("channels", &tfm::Classifier::channels)
      .def_property_readonly("classes", &tfm::Classifier::classes)
      .def_property_readonly("class_names", &tfm::Classifier::class_names);
}

void bind_checkpoints(py::module_& m) {
  m.def(
      "read_checkpoint",
      [](const py::object& path) {
        const std::string file = path_of(path);
        tfm::Checkpoint c;
        {
          py::gil_scoped_release release;
          c = tfm::read_checkpoint(file);
        }
        py::dict tensors;
        for (const auto& [name, a] : c.tensors) tensors[py::str(name)] = to_numpy(a.values, {a.shape.begin(), a.shape.end()});
        return py::make_tuple(tensors, c.metadata);
      },
      "path"_a, "A checkpoint's tensors (name -> float32 NumPy array) and its metadata (str -> str)");
  m.def(
      "write_checkpoint",
      [](const py::object& path, const std::map<std::string, py::array_t<float, py::array::c_style | py::array::forcecast>>& tensors,
         const std::map<std::string, std::string>& metadata) {
        const std::string file = path_of(path);
        tfm::Checkpoint c{{}, metadata};
        for (const auto& [name, a] : tensors)
          c.tensors[name] = {{a.shape(), a.shape() + a.ndim()}, {a.data(), a.data() + a.size()}};
        py::gil_scoped_release release;
        tfm::write_checkpoint(file, c);
      },
      "path"_a, "tensors"_a, "metadata"_a = std::map<std::string, std::string>{},
      "Writes tensors (name -> array, stored as float32) and metadata atomically");
}

// What tfm::train reports, as Python values.
py::dict result_dict(const tfm::TrainingResult& r) {
  py::dict metrics;
  for (const auto& [name, value] : r.metrics) metrics[py::str(name)] = value;
  const bool validated = !r.metrics.empty();  // none when the run stopped, or had nothing to train, before validating
  return py::dict("stopped"_a = r.stopped, "steps"_a = r.steps, "metrics"_a = metrics,
                  "score_name"_a = validated ? py::object(py::str(r.score_name)) : py::none(),
                  "best_score"_a = validated ? py::object(py::float_(r.best_score)) : py::none(), "report"_a = r.report);
}

// A stop request a Python thread can make while train() runs in another.
struct StopSource {
  std::stop_source source;
  void request() { source.request_stop(); }
};

// Discards what is written to it: train(..., quiet=True).
struct NullBuffer : std::streambuf {
  int overflow(int c) override { return c; }
};

// Hands what tfm writes, line by line and from any thread, to Python's sys.stdout, so that
// notebooks and redirect_stdout see a run's progress.
struct PythonStdout : std::streambuf {
  std::string line;
  int overflow(int c) override {
    if (c == EOF) return c;
    line += static_cast<char>(c);
    if (c == '\n') sync();
    return c;
  }
  int sync() override {
    if (line.empty()) return 0;
    py::gil_scoped_acquire gil;
    try {
      py::object out = py::module_::import("sys").attr("stdout");
      out.attr("write")(line);
      out.attr("flush")();
    } catch (const py::error_already_set&) {  // a closed or missing sys.stdout: the line is lost, the run goes on
    }
    line.clear();
    return 0;
  }
};

// A training error's flags (the command line's names: "--resume X, or ... --force") as
// the settings a Python caller sets: options.resume, options.force = True, task.train_src.
std::string python_names(const std::string& message, const py::object& options, const py::object& task) {
  static const std::map<std::string, std::string> renamed = {
      {"out", "options.out_dir"},          {"steps", "options.max_steps"},          {"lr", "options.schedule.lr"},
      {"min-lr", "options.schedule.min_lr"}, {"warmup", "options.schedule.warmup"}, {"weight-decay", "options.adam.weight_decay"}};
  const std::regex flag("--([a-z][a-z0-9-]*)");
  std::string out;
  auto at = message.cbegin();
  for (std::sregex_iterator it(message.begin(), message.end(), flag), end; it != end; ++it) {
    out.append(at, (*it)[0].first), at = (*it)[0].second;
    std::string name = (*it)[1].str(), field = name;
    std::replace(field.begin(), field.end(), '-', '_');
    const auto found = renamed.find(name);
    const bool on_options = py::hasattr(options, field.c_str()), on_task = py::hasattr(task, field.c_str());
    if (found != renamed.end())
      out += found->second;
    else if (on_options || on_task)
      out += (on_options ? "options." : "task.") + field + (py::isinstance<py::bool_>((on_options ? options : task).attr(field.c_str())) ? " = True" : "");
    else
      out += (*it)[0].str();
  }
  return out.append(at, message.cend());
}

template <class Task>
void bind_train(py::module_& m) {
  m.def(
      "train",
      [](const tfm::TrainingOptions& options, const Task& task, StopSource* given_stop, bool quiet) {
        // On its own thread, so that Ctrl-C here stops the run as on the command line: after
        // its current step, saved; then the KeyboardInterrupt.
        NullBuffer null;
        PythonStdout python;
        std::ostream log(quiet ? static_cast<std::streambuf*>(&null) : &python);
        std::stop_source stop = given_stop ? given_stop->source : std::stop_source();
        std::future<tfm::TrainingResult> run = std::async(std::launch::async, [&] {
          return tfm::train(options, task, stop.get_token(), &log);
        });
        try {
          return result_dict(wait_interruptibly(run, [&] {
            stop.request_stop();
            py::gil_scoped_release release;
            run.wait();
          }));
        } catch (const std::runtime_error& e) {  // tfm's errors: RuntimeError, in the names of Python's settings
          throw std::runtime_error(python_names(e.what(), py::cast(options), py::cast(task)));
        }
      },
      "options"_a, "task"_a, "stop"_a = nullptr, "quiet"_a = false);
}

void bind_training(py::module_& m) {
  using O = tfm::TrainingOptions;
  // Edited in place only (options.schedule.lr = ...): a fresh one would lose what the task
  // chose and Python does not see (the schedule's kind, AdamW's decoupled decay).
  py::class_<tfm::Schedule>(m, "Schedule", "The learning rate's schedule (edit it in place: options.schedule.lr = ...)")
      .def_readwrite("lr", &tfm::Schedule::lr).def_readwrite("min_lr", &tfm::Schedule::min_lr)
      .def_readwrite("warmup", &tfm::Schedule::warmup).def_readwrite("decay_steps", &tfm::Schedule::decay_steps);
  py::class_<tfm::AdamOptions>(m, "AdamOptions", "Adam's settings (edit them in place: options.adam.beta2 = ...)")
      .def_readwrite("beta1", &tfm::AdamOptions::beta1).def_readwrite("beta2", &tfm::AdamOptions::beta2)
      .def_readwrite("eps", &tfm::AdamOptions::eps).def_readwrite("weight_decay", &tfm::AdamOptions::weight_decay);
  auto options = settings_class<O>(m, "TrainingOptions", "The training loop's settings: the training commands' flags (start from a task's training_defaults())");
  options.def_readwrite("epochs", &O::epochs).def_readwrite("max_steps", &O::max_steps)
      .def_readwrite("max_minutes", &O::max_minutes).def_readwrite("accumulate", &O::accumulate).def_readwrite("schedule", &O::schedule)
      .def_readwrite("adam", &O::adam).def_readwrite("clip_norm", &O::clip_norm).def_readwrite("validate_every", &O::validate_every)
      .def_readwrite("save_every", &O::save_every).def_readwrite("patience", &O::patience)
      .def_readwrite("skip_nonfinite", &O::skip_nonfinite).def_readwrite("seed", &O::seed).def_readwrite("log_every", &O::log_every)
      .def_readwrite("force", &O::force).def_readwrite("precision", &O::precision).def_readwrite("device", &O::device);
  def_paths(options, {{"out_dir", &O::out_dir}, {"resume", &O::resume}, {"init_from", &O::init_from}});
  using D = tfm::TextData;
  auto text = settings_class<D>(m, "TextData", "A text to train on: text, valid_text, vocab (SentencePiece; empty: characters)");
  def_paths(text, {{"text", &D::text}, {"valid_text", &D::valid_text}, {"vocab", &D::vocab}});
  using T = tfm::TranslationTask;
  auto translation = settings_class<T>(m, "TranslationTask", "A translation model on a parallel corpus (tfm train)");
  def_paths(translation, {{"train_src", &T::train_src}, {"train_tgt", &T::train_tgt}, {"valid_src", &T::valid_src}, {"valid_tgt", &T::valid_tgt},
                          {"src_vocab", &T::src_vocab}, {"tgt_vocab", &T::tgt_vocab}, {"config", &T::config}});
  translation.def_readwrite("preset", &T::preset).def_readwrite("model", &T::model)
      .def_readwrite("max_tokens", &T::max_tokens).def_readwrite("label_smoothing", &T::label_smoothing)
      .def_readwrite("max_sentence_tokens", &T::max_sentence_tokens).def_readwrite("valid_sentences", &T::valid_sentences)
      .def_readwrite("source_language", &T::source_language).def_readwrite("target_language", &T::target_language)
      .def_static("training_defaults", &T::training_defaults);
  using C = tfm::CopyTask;
  auto copy = settings_class<C>(m, "CopyTask", "The copy task (tfm train without data)");
  def_paths(copy, {{"config", &C::config}});
  copy.def_readwrite("model", &C::model).def_readwrite("batch", &C::batch)
      .def_readwrite("seq_len", &C::seq_len).def_readwrite("samples", &C::samples).def_static("training_defaults", &C::training_defaults);
  using L = tfm::LanguageModelTask;
  auto lm = settings_class<L>(m, "LanguageModelTask", "A decoder-only language model on a text (tfm lm train)");
  def_paths(lm, {{"config", &L::config}});
  lm.def_readwrite("data", &L::data).def_readwrite("model", &L::model)
      .def_readwrite("batch", &L::batch).def_readwrite("sample_tokens", &L::sample_tokens).def_static("training_defaults", &L::training_defaults);
  using V = tfm::VitTask;
  auto vit = settings_class<V>(m, "VitTask", "A Vision Transformer on an MNIST-style image set or an image folder (tfm vit train)");
  def_paths(vit, {{"data_dir", &V::data_dir}, {"config", &V::config}});
  vit.def_readwrite("model", &V::model)
      .def_readwrite("batch", &V::batch).def_readwrite("valid_images", &V::valid_images)
      .def_readwrite("valid_fraction", &V::valid_fraction).def_readwrite("flip", &V::flip)
      .def_static("training_defaults", &V::training_defaults);
  using B = tfm::MaskedLmTask;
  auto bert = settings_class<B>(m, "MaskedLmTask", "A BERT-style encoder with the masked-LM objective (tfm bert train)");
  def_paths(bert, {{"config", &B::config}});
  bert.def_readwrite("data", &B::data).def_readwrite("model", &B::model)
      .def_readwrite("batch", &B::batch).def_readwrite("mask_fraction", &B::mask_fraction).def_static("training_defaults", &B::training_defaults);
  fine_tuning_class<tfm::SentenceClassifierTask>(m, "SentenceClassifierTask",
                                                 "A BERT sentence classifier fine-tuned from TrainingOptions.init_from (tfm bert classifier)");
  fine_tuning_class<tfm::TokenClassifierTask>(m, "TokenClassifierTask",
                                              "A BERT token classifier (NER) fine-tuned from TrainingOptions.init_from (tfm bert tagger)");
  py::class_<StopSource>(m, "StopSource", "Pass to train(stop=...); request() from another thread ends the run after its step, saved")
      .def(py::init<>())
      .def("request", &StopSource::request);
  bind_train<tfm::TranslationTask>(m);
  bind_train<tfm::CopyTask>(m);
  bind_train<tfm::LanguageModelTask>(m);
  bind_train<tfm::VitTask>(m);
  bind_train<tfm::MaskedLmTask>(m);
  bind_train<tfm::SentenceClassifierTask>(m);
  bind_train<tfm::TokenClassifierTask>(m);
}

}  // namespace

PYBIND11_MODULE(tfm, m) {
  m.doc() = "tfm: Transformers in C++ (translation, language models, BERT, ViT): inference, training and checkpoints";
  bind_translator(m);
  bind_generator(m);
  bind_encoder_and_classifier(m);
  bind_checkpoints(m);
  bind_training(m);
}
