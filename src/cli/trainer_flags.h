#pragma once
// The flags every training command shares (steps, output directory, optimiser,
// schedule, validation, checkpoints, resume), bound to a TrainerOptions whose
// values are the family's defaults.
#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "models/stack_config.h"
#include "train/text_data.h"
#include "train/trainer.h"

namespace tfm::cli {

void add_trainer_flags(CLI::App* cmd, train::TrainerOptions& o);

// --text, --valid, --vocab: the text a language model or masked LM trains on.
void add_text_flags(CLI::App* cmd, train::TextSource& source);

// The "model" group of a family's training command: --config (a JSON file of the
// family), --layers, --heads, --d-model, --d-ff, --dropout, and the family's own flags
// added with bind(). The flags write into `model`; resolve() combines them with the
// file, the flags given taking precedence: flags > --config > the family's defaults.
class ModelFlags {
 public:
  ModelFlags(CLI::App* cmd, models::StackConfig& model, const std::string& family);
  CLI::Option_group* group() const { return group_; }
  // Registers `option` (of group()) as setting the configuration field `key`.
  CLI::Option* bind(CLI::Option* option, const char* key);
  const models::StackConfig& defaults() const { return defaults_; }
  // `base` (the defaults unless given), then --config, then the flags given; not yet
  // validated (the vocabulary comes later). `origin` receives what errors should name.
  models::StackConfig resolve(const models::StackConfig& base, std::string& origin) const;
  models::StackConfig resolve(std::string& origin) const { return resolve(defaults_, origin); }
  // A resumed run keeps its checkpoint's architecture: a flag given that disagrees with
  // the checkpoint at `resume` is an error naming the flag and both values.
  void check_resume(const std::string& resume) const;

 private:
  nlohmann::json flags_given() const;  // {"layers": 3, ...}

  models::StackConfig& model_;
  models::StackConfig defaults_;
  std::string family_, config_path_;
  CLI::Option_group* group_;
  std::vector<std::pair<CLI::Option*, std::string>> flags_;
};

}  // namespace tfm::cli
