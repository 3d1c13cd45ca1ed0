// `tfm average`: checkpoint averaging (a run's last saves, or any checkpoints of one model).
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "io/average.h"
#include "io/checkpoint.h"
#include "tensor/error.h"

namespace tfm::cli {

namespace {

struct AverageOptions {
  std::vector<std::string> inputs;
  std::string output;
  int last = 0;
};

// The checkpoints to average: the inputs as they are, or with --last N the last N
// step-N saves of the one run directory given.
std::vector<std::string> checkpoints_of(const AverageOptions& o) {
  if (o.last == 0) {
    for (size_t i = 0; i < o.inputs.size(); ++i) {
      const std::string& p = o.inputs[i];
      TFM_CHECK(!std::filesystem::is_directory(p), p << ": is a directory; give --last N to average its last N step-N checkpoints");
      for (size_t j = 0; j < i; ++j)  // (the same file twice would count double in the mean)
        TFM_CHECK(!std::filesystem::equivalent(p, o.inputs[j]), p << ": is given twice (as " << o.inputs[j] << "); each checkpoint counts once");
    }
    return o.inputs;
  }
  TFM_CHECK(o.inputs.size() == 1 && std::filesystem::is_directory(o.inputs[0]),
            "--last N takes one run directory (whose step-N checkpoints --save-every kept)");
  return io::last_step_checkpoints(o.inputs[0], o.last);
}

}  // namespace

void add_average_command(CLI::App& app, int&) {
  auto o = std::make_shared<AverageOptions>();
  CLI::App* cmd = app.add_subcommand("average", "Average checkpoints of one model (a run's last saves): often better than any one of them");
  cmd->add_option("inputs", o->inputs, "Checkpoints of one model, or with --last one run directory")->required()->check(CLI::ExistingPath);
  cmd->add_option("--last", o->last, "Average the last N step-N checkpoints of the run directory given (kept by train --save-every)")
      ->check(CLI::Range(2, 1000000));
  cmd->add_option("-o,--output", o->output, "The checkpoint to write: weights only, usable wherever a checkpoint is (a new file)")
      ->required();
  cmd->callback([o] {
    TFM_CHECK(!std::filesystem::exists(o->output), o->output << ": exists; tfm average writes a new file (nothing is overwritten)");
    const std::vector<std::string> paths = checkpoints_of(*o);
    const io::SafeTensors averaged = io::average_checkpoints(paths);
    io::write_safetensors(o->output, averaged.tensors, averaged.metadata);
    std::cerr << "tfm: wrote " << o->output << ": the mean of " << paths.size() << " checkpoints (" << averaged.metadata.at("tfm.averaged")
              << ")\n";
  });
}

}  // namespace tfm::cli
