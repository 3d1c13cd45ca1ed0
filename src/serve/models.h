#pragma once
// The checkpoints a server holds, each loaded into the library class of its family,
// and the choice of model a request makes (its "model" field, or the only one).
#include <atomic>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/metrics.h"
#include "serve/server.h"
#include "tfm/classifier.h"
#include "tfm/encoder.h"
#include "tfm/generator.h"
#include "tfm/translator.h"

namespace tfm::serve {

struct ServedModel {
  std::string name, family, path;  // family: translation, gpt, bert or vit (tfm::checkpoint_family)
  std::string lora;                 // a language model's LoRA adapter directory (--lora), merged as it loads
  int64_t loaded = 0;               // when, in seconds since 1970 (OpenAI's "created")
  std::unique_ptr<Translator> translator;
  std::unique_ptr<Generator> generator;
  std::unique_ptr<Encoder> encoder;
  std::unique_ptr<Classifier> classifier;
  // An encoder or classifier computes on its caller's thread: one request at a time
  // uses every thread, where several would divide them and finish no sooner.
  std::timed_mutex one_at_a_time;
  std::atomic<int64_t> translated_tokens{0};
};

class ModelSet {
 public:
  // Loads every model (a name not given is the file's name, or its directory's for
  // best/last.safetensors), with its LoRA adapter if --lora gives one, and registers its metrics.
  ModelSet(const ServerOptions& options, Metrics& metrics, std::ostream& log);

  // The model `name` (empty: the only one of `family`) for `endpoint`, or an HttpError.
  ServedModel& pick(const std::string& name, const std::string& family, const std::string& endpoint);
  // The model `name` (empty: the only one), of any family.
  ServedModel& pick_any(const std::string& name);
  // GET /v1/models: OpenAI's list, each entry with its family and endpoints.
  nlohmann::json list() const;
  std::string summary() const;  // "mt (translation), lm (gpt)"

 private:
  std::vector<std::unique_ptr<ServedModel>> models_;
  // The model an adapter names (or the only one), checked to be a language model without one.
  ServedModel& adapted(const AdapterSpec& adapter);
};

}  // namespace tfm::serve
