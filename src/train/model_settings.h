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
  // A resumed run: each setting given must have the checkpoint's value. `chosen` and
  // `saved` are the two configurations' to_json() (so 0.1 compares as the float it is).
  void check_kept(const std::string& chosen, const std::string& saved, const std::string& resume) const;

 private:
  std::vector<std::pair<std::string, std::string>> layers_;  // (origin, JSON text)
  std::string origin_ = "the model settings";
};

}  // namespace tfm::training
