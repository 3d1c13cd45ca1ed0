#pragma once
// The flags every training command shares (steps, output directory, optimiser,
// schedule, validation, checkpoints, resume), bound to a TrainerOptions whose
// values are the family's defaults.
#include <CLI/CLI.hpp>

#include "train/trainer.h"

namespace tfm::cli {

void add_trainer_flags(CLI::App* cmd, train::TrainerOptions& o);

}  // namespace tfm::cli
