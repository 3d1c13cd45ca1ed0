// tfm: the command-line front end. Each subcommand parses its flags, calls the
// library, and turns any tfm::Error into one "tfm: error: ..." line and exit code 1.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "io/checkpoint.h"
#include "models/config.h"
#include "tensor/error.h"
#include "train/copy_task.h"

namespace {

constexpr const char* kVersion = "0.1.0";

void add_train_command(CLI::App& app, tfm::train::CopyTaskOptions& o, std::string& config_path) {
  CLI::App* cmd = app.add_subcommand("train", "Train a model. With no data it trains the built-in copy task and decodes samples.");
  cmd->add_option("--config", config_path, "Model configuration as a JSON file (fields of TransformerConfig; see README)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--steps", o.steps, "Total optimisation steps")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--batch", o.batch, "Sequences per batch")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--seq-len", o.seq_len, "Copy-task sequence length, start symbol included")->capture_default_str()->check(CLI::Range(2, 4096));
  cmd->add_option("--lr-factor", o.lr_factor, "Factor of the warm-up learning-rate schedule")->capture_default_str();
  cmd->add_option("--warmup", o.warmup, "Warm-up steps of the schedule")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--seed", o.seed, "Random seed (initialisation, data, dropout)")->capture_default_str();
  cmd->add_option("--save", o.save_path, "Checkpoint to write (safetensors), atomically");
  cmd->add_option("--save-every", o.save_every, "Also checkpoint every N steps (0: only at the end)")->capture_default_str();
  cmd->add_option("--resume", o.resume_path, "Continue the run saved in this checkpoint")->check(CLI::ExistingFile);
  cmd->add_option("--log-every", o.log_every, "Log line interval when output is not a terminal")->capture_default_str();
  cmd->add_option("--samples", o.samples, "Sequences to decode and print after training")->capture_default_str();
}

int run_info(const std::string& path) {
  tfm::io::SafeTensors file = tfm::io::read_safetensors(path);
  tfm::io::Checkpoint info = tfm::io::checkpoint_info(file, path);
  tfm::models::TransformerConfig config = tfm::models::TransformerConfig::from_json(info.config_json, path);
  int64_t params = 0;
  for (const auto& [name, t] : file.tensors)
    if (name.rfind(tfm::io::kOptimizerPrefix, 0) != 0) params += t.numel();
  std::cout << "model: " << (info.model_kind.empty() ? "unknown" : info.model_kind) << "\nconfig: " << config.to_json()
            << "\nparameters: " << params << "\ntraining state: " << (info.train_state.empty() ? "none" : info.train_state) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tfm: a Transformer engine and toolkit (\"Attention Is All You Need\" and its family)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", kVersion);
  int threads = 0;
  app.add_option("--threads", threads, "Worker threads (default: all cores, or OMP_NUM_THREADS)");

  tfm::train::CopyTaskOptions copy;
  std::string config_path;
  add_train_command(app, copy, config_path);

  std::string info_path;
  CLI::App* info = app.add_subcommand("info", "Show a checkpoint's model configuration, size and training state");
  info->add_option("checkpoint", info_path, "Checkpoint file (safetensors)")->required();

  CLI11_PARSE(app, argc, argv);
  if (threads > 0) omp_set_num_threads(threads);
  try {
    if (app.got_subcommand("train")) {
      if (!config_path.empty()) copy.model = tfm::models::TransformerConfig::from_file(config_path);
      tfm::train::CopyTaskResult r = tfm::train::run_copy_task(copy, std::cout);
      return r.copied == r.decoded ? 0 : 2;
    }
    if (app.got_subcommand("info")) return run_info(info_path);
  } catch (const tfm::Error& e) {
    std::cerr << "tfm: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "tfm: error: out of memory\n";
    return 1;
  }
  return 0;
}
