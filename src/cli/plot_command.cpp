// `tfm plot`: training curves of a run (the trainer also redraws them as it goes).
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "train/curves.h"

namespace tfm::cli {

void add_plot_command(CLI::App& app, int&) {
  auto paths = std::make_shared<std::pair<std::string, std::string>>("", "curves.png");
  CLI::App* cmd = app.add_subcommand("plot", "Draw training curves (loss and BLEU against step) from a run's metrics.jsonl");
  cmd->add_option("metrics", paths->first, "metrics.jsonl written by `tfm train`")->required()->check(CLI::ExistingFile);
  add_png_output(cmd, paths->second);
  cmd->callback([paths] {
    training::plot_training_curves(paths->first, paths->second);
    std::cout << "wrote " << paths->second << "\n";
  });
}

}  // namespace tfm::cli
