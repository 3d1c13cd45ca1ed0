#include "serve/models.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <stdexcept>

#include "serve/request.h"
#include "tfm/checkpoint.h"

namespace tfm::serve {

namespace {

std::string default_name(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string stem = p.stem().string();
  if ((stem == "best" || stem == "last") && p.parent_path().has_filename()) return std::filesystem::absolute(p).parent_path().filename().string();
  return stem;
}

// The endpoints a model answers: a language model's chats only with a chat template.
std::vector<std::string> endpoints_of(const ServedModel& m) {
  const std::string& family = m.family;
  if (family == "translation") return {"/v1/translate", "/v1/attention"};
  if (family == "gpt" && m.generator->has_chat_template()) return {"/v1/generate", "/v1/completions", "/v1/chat/completions", "/v1/attention"};
  if (family == "gpt") return {"/v1/generate", "/v1/completions", "/v1/attention"};
  if (family == "bert") return {"/v1/embed", "/v1/classify", "/v1/attention"};
  return {"/v1/classify", "/v1/attention"};
}

void load(ServedModel& m, const ServerOptions& o, Metrics& metrics) {
  ModelOptions model_options{"", o.precision, o.device};
  model_options.max_cache_bytes = o.max_cache_mb << 20;
  model_options.lora = m.lora;
  if (m.family == "translation") {
    TranslatorOptions t;
    t.precision = o.precision, t.device = o.device, t.threads = o.threads, t.workers = o.workers, t.max_batch = o.batch;
    t.max_batch_tokens = o.max_tokens, t.batch_wait_us = o.batch_wait_ms * 1000;
    t.on_batch = [&metrics, name = m.name](int64_t sentences, int64_t tokens) { metrics.batch(name, sentences, tokens); };
    m.translator = std::make_unique<Translator>(m.path, t);
    metrics.add_counter({"tfm_generated_tokens_total", "Tokens generated: target subwords of translations, new tokens of generations.",
                         "model=\"" + m.name + "\"", [&m] { return static_cast<double>(m.translated_tokens.load()); }});
  } else if (m.family == "gpt") {
    m.generator = std::make_unique<Generator>(m.path, model_options);
    metrics.add_counter({"tfm_generated_tokens_total", "Tokens generated: target subwords of translations, new tokens of generations.",
                         "model=\"" + m.name + "\"", [&m] { return static_cast<double>(m.generator->stats().tokens); }});
    metrics.add_gauge({"tfm_generation_running", "Requests in a language model's running batch (continuous batching).",
                       "model=\"" + m.name + "\"", [&m] { return static_cast<double>(m.generator->stats().running); }});
    metrics.add_gauge({"tfm_generation_waiting", "Requests of a language model's batch waiting for room in its cache (--max-cache-mb).",
                       "model=\"" + m.name + "\"", [&m] { return static_cast<double>(m.generator->stats().waiting); }});
    metrics.add_gauge({"tfm_generation_cache_bytes", "Bytes of keys and values a language model's running batch holds.",
                       "model=\"" + m.name + "\"", [&m] { return static_cast<double>(m.generator->stats().cache_bytes); }});
  } else if (m.family == "bert") {
    m.encoder = std::make_unique<Encoder>(m.path, model_options);
  } else {
    m.classifier = std::make_unique<Classifier>(m.path, model_options);
  }
}

}  // namespace

ModelSet::ModelSet(const ServerOptions& o, Metrics& metrics, std::ostream& log) {
  if (o.models.empty()) throw std::runtime_error("no model to serve: give --model PATH (or NAME=PATH), once per model");
  for (const ModelSpec& spec : o.models) {
    auto m = std::make_unique<ServedModel>();
    m->name = spec.name.empty() ? default_name(spec.path) : spec.name;
    m->path = spec.path;
    for (const auto& other : models_)
      if (other->name == m->name)
        throw std::runtime_error("two models are named '" + m->name + "' (" + other->path + ", " + m->path +
                                 "): name them with --model NAME=PATH");
    m->family = checkpoint_family(spec.path);
    models_.push_back(std::move(m));
  }
  for (const AdapterSpec& adapter : o.loras) adapted(adapter).lora = adapter.dir;  // every adapter checked before any model loads
  for (const auto& m : models_) {
    m->loaded = static_cast<int64_t>(std::time(nullptr));
    log << "tfm serve: loading " << m->name << " (" << m->family << ") from " << m->path
        << (m->lora.empty() ? "" : " with the LoRA adapter " + m->lora) << "\n" << std::flush;
    load(*m, o, metrics);
  }
}

ServedModel& ModelSet::adapted(const AdapterSpec& adapter) {
  const std::string what = "--lora " + (adapter.model.empty() ? "" : adapter.model + "=") + adapter.dir;
  if (adapter.model.empty() && models_.size() > 1)
    throw std::runtime_error(what + ": several models are served (" + summary() + "): name the one it adapts, as --lora NAME=DIR");
  const auto named = std::find_if(models_.begin(), models_.end(), [&](const auto& m) { return adapter.model.empty() || m->name == adapter.model; });
  if (named == models_.end()) throw std::runtime_error(what + ": no model is named '" + adapter.model + "' (served: " + summary() + ")");
  ServedModel& m = **named;
  if (m.family != "gpt")
    throw std::runtime_error(what + ": model '" + m.name + "' is a " + m.family + " model; LoRA adapters apply to language models (gpt)");
  if (!m.lora.empty()) throw std::runtime_error(what + ": model '" + m.name + "' has an adapter already (" + m.lora + "): one per model");
  return m;
}

ServedModel& ModelSet::pick(const std::string& name, const std::string& family, const std::string& endpoint) {
  if (!name.empty()) {
    for (auto& m : models_) {
      if (m->name != name) continue;
      if (m->family != family)
        throw HttpError(400, "model '" + name + "' is a " + m->family + " model; " + endpoint + " needs a " + family + " model");
      return *m;
    }
    throw HttpError(404, "no model named '" + name + "' (served: " + summary() + ")");
  }
  std::vector<ServedModel*> found;
  for (auto& m : models_)
    if (m->family == family) found.push_back(m.get());
  if (found.empty()) throw HttpError(400, endpoint + " needs a " + family + " model, and none is served (served: " + summary() + ")");
  if (found.size() > 1) {
    std::string names;
    for (const ServedModel* m : found) names += (names.empty() ? "" : ", ") + m->name;
    throw HttpError(400, "several " + family + " models are served (" + names + "): name one in 'model'");
  }
  return *found[0];
}

ServedModel& ModelSet::pick_any(const std::string& name) {
  for (auto& m : models_)
    if (m->name == name || (name.empty() && models_.size() == 1)) return *m;
  if (name.empty()) throw HttpError(400, "several models are served (" + summary() + "): name one in 'model'");
  throw HttpError(404, "no model named '" + name + "' (served: " + summary() + ")");
}

nlohmann::json ModelSet::list() const {
  nlohmann::json data = nlohmann::json::array();
  for (const auto& m : models_) {
    data.push_back({{"id", m->name}, {"object", "model"}, {"created", m->loaded}, {"owned_by", "tfm"}, {"family", m->family},
                    {"endpoints", endpoints_of(*m)}});
    if (!m->lora.empty()) data.back()["lora"] = m->lora;
  }
  return {{"object", "list"}, {"data", data}};
}

std::string ModelSet::summary() const {
  std::string out;
  for (const auto& m : models_) out += (out.empty() ? "" : ", ") + m->name + " (" + m->family + ")";
  return out;
}

}  // namespace tfm::serve
