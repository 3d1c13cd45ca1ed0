// `tfm info`: what a checkpoint holds.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "io/checkpoint.h"
#include "models/config.h"

namespace tfm::cli {

void add_info_command(CLI::App& app, int&) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("info", "Show a checkpoint's model configuration, size, vocabularies and training state");
  add_model_flag(cmd, *path, "Checkpoint file (safetensors)");
  cmd->callback([path] {
    io::SafeTensors file = io::read_safetensors(*path);
    io::Checkpoint info = io::checkpoint_info(file, *path);
    models::TransformerConfig config = models::TransformerConfig::from_json(info.config_json, *path);
    int64_t params = 0;
    for (const auto& [name, t] : file.tensors)
      if (name.rfind(io::kOptimizerPrefix, 0) != 0) params += t.numel();
    std::cout << "model: " << (info.model_kind.empty() ? "unknown" : info.model_kind) << "\nconfig: " << config.to_json()
              << "\nparameters: " << params << "\n";
    if (info.metadata.count("tfm.vocab")) std::cout << "vocabularies: " << info.metadata.at("tfm.vocab") << "\n";
    std::cout << "training state: " << (info.train_state.empty() ? "none" : info.train_state) << "\n";
  });
}

}  // namespace tfm::cli
