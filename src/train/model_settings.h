#pragma once
// How every training task chooses its model (tfm/training.h): the family's defaults,
// then layers of JSON settings over them, each over the last: a preset's sizes
// (translation's --preset), the file `config` (--config), the object `model` (the
// model flags, or a library caller's settings). A resumed run keeps its checkpoint's
// architecture instead, and a setting given that disagrees with it is an error.
#include <string>
#include <utility>
#include <vector>

#include "models/config.h"
#include "models/stack_config.h"

namespace tfm::training {

class ModelSettings {
 public:
  // The file at `config_path`, then the JSON object `model_json` (either may be empty).
  ModelSettings(const std::string& config_path, const std::string& model_json);
  // Puts settings under the others (a preset's sizes), named `origin` in errors.
  void put_first(const std::string& origin, const std::string& json);

  // The settings over a family's defaults, layer by layer; not validated (the caller
  // completes the configuration first: the vocabulary).
  models::StackConfig over(models::StackConfig defaults) const;
  models::TransformerConfig over(models::TransformerConfig defaults) const;
  // What errors about the result name: the file if there is one.
  const std::string& origin() const { return origin_; }
  bool gives(const std::string& key) const;
  // A run resumed or started from a checkpoint keeps its architecture: each setting given
  // must have the checkpoint's value, but the dropout rate, a setting of training, is
  // taken where given (fine-tuning with more of it). Returns the configuration to build.
  template <class Config>
  Config kept(const Config& chosen, Config saved, const std::string& resume) const {
    check_kept(chosen.to_json(), saved.to_json(), resume);
    if (gives(kTrainingSetting)) saved.dropout = chosen.dropout;
    return saved;
  }
  static constexpr const char* kTrainingSetting = "dropout";  // the one setting of a configuration that training may change

 private:
  // `chosen` and `saved` are the two configurations' to_json() (so 0.1 compares as the
  // float it is); dropout aside.
  void check_kept(const std::string& chosen, const std::string& saved, const std::string& resume) const;

  std::vector<std::pair<std::string, std::string>> layers_;  // (origin, JSON text)
  std::string origin_ = "the model settings";
};

}  // namespace tfm::training
