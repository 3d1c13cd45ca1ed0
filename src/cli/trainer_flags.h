#pragma once
// The flags every training command shares (steps, output directory, optimiser,
// schedule, validation, checkpoints, resume) bound to a tfm::TrainingOptions whose
// values are the family's defaults, and the model flags of the single-stack families.
#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/stop_on_signal.h"
#include "models/stack_config.h"
#include "ops/linear_products.h"
#include "tfm/training.h"

namespace tfm::cli {

class TrainerFlags {
 public:
  // Adds the "training" group to `cmd`, bound to `options` (whose values --help shows).
  TrainerFlags(CLI::App* cmd, tfm::TrainingOptions& options);
  // Sets the fields of the flags given on `target` (another task's defaults: `tfm train`
  // binds the flags to translation's and may run the copy task).
  void given_onto(tfm::TrainingOptions& target) const;
  // --resume without --out: the run goes on in the checkpoint's own directory (not the
  // family's default one, which may hold another run).
  void resume_in_place(tfm::TrainingOptions& o, const std::string& checkpoint) const;

  // Adds option `name` (a flag for a bool) bound to field(options), which given_onto sets
  // on another struct too.
  template <class Field>
  CLI::Option* add(CLI::Option_group* group, const std::string& name, Field field, const std::string& help) {
    auto& value = field(options_);
    using T = std::remove_reference_t<decltype(value)>;
    CLI::Option* option;
    if constexpr (std::is_same_v<T, bool>) option = group->add_flag(name, value, help);
    else option = group->add_option(name, value, help)->capture_default_str();
    set_if_given_.push_back([option, field](tfm::TrainingOptions& target) {
      if (option->count() > 0) field(target) = option->as<T>();
    });
    return option;
  }

 private:
  tfm::TrainingOptions& options_;
  std::vector<std::function<void(tfm::TrainingOptions&)>> set_if_given_;
  CLI::Option* out_ = nullptr;
  CLI::Option* resume_ = nullptr;
};

// --text, --valid, --vocab: the text a language model or masked LM trains on.
void add_text_flags(CLI::App* cmd, tfm::TextData& data);

// The "model" group of a single-stack family's training command: --config (a JSON file
// of the family), --layers, --heads, --d-model, --d-ff, --dropout, and the family's own
// flags added with bind(). The flags show the family's defaults; settings() gives the
// task the ones given, as JSON (the library puts them over --config, and --config over
// the defaults).
class ModelFlags {
 public:
  ModelFlags(CLI::App* cmd, models::StackConfig& model, std::string& config_path);
  CLI::Option_group* group() const { return group_; }
  // Registers `option` (of group()) as setting the configuration field `key`.
  CLI::Option* bind(CLI::Option* option, const char* key);
  // The flags given, as a JSON object ("" if none): {"layers": 3, ...}.
  std::string settings() const;

 private:
  models::StackConfig& model_;
  CLI::Option_group* group_;
  std::vector<std::pair<CLI::Option*, std::string>> flags_;
};

// A single-stack family's `train` command (lm, vit, bert): its task and training options
// bound to flags. The model flags show `defaults` (the family's).
template <class Task>
struct StackTrainCommand {
  StackTrainCommand(CLI::App* cmd, const models::StackConfig& defaults) : model(defaults), model_flags(cmd, model, task.config) {}
  Task task;
  tfm::TrainingOptions training = Task::training_defaults();
  models::StackConfig model;  // the model flags' values
  ModelFlags model_flags;
  std::optional<TrainerFlags> trainer_flags;
};

// After the family's own flags: the training flags, and the callback that trains.
template <class Task>
void add_training_flags_and_run(CLI::App* cmd, const std::shared_ptr<StackTrainCommand<Task>>& c, int& exit_code) {
  c->trainer_flags.emplace(cmd, c->training);
  cmd->callback([c, cmd, &exit_code] {
    c->task.model = c->model_flags.settings();
    tfm::TrainingOptions training = c->training;
    training.precision = to_string(precision_flag(*cmd));
    training.device = device_flag(*cmd);
    const StopOnSignal stop;  // Ctrl-C, SIGTERM: stop after this step and save
    exit_code = tfm::train(training, c->task, stop.token()).stopped ? 130 : 0;
  });
}

}  // namespace tfm::cli
