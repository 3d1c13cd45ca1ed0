#pragma once
// The flags every training command shares (steps, output directory, optimiser,
// schedule, validation, checkpoints, resume), bound to a TrainerOptions whose
// values are the family's defaults.
#include <CLI/CLI.hpp>

#include "models/stack_config.h"
#include "train/text_data.h"
#include "train/trainer.h"

namespace tfm::cli {

void add_trainer_flags(CLI::App* cmd, train::TrainerOptions& o);

// --text, --valid, --vocab: the text a language model or masked LM trains on.
void add_text_flags(CLI::App* cmd, train::TextSource& source);

// The "model" group: --config (a JSON file of `family`), --layers, --heads, --d-model,
// --d-ff, --dropout. Returns the group for the family's own flags.
CLI::Option_group* add_model_flags(CLI::App* cmd, models::StackConfig& model, std::string& config_path, const std::string& family);

}  // namespace tfm::cli
