// Flags and behaviour that several commands share.
#include "cli/commands.h"

#include <iostream>
#include <string>

#include "tensor/error.h"
#include "viz/image.h"

namespace tfm::cli {

void help_without_subcommand(CLI::App& app, int& exit_code) {
  app.require_subcommand(0, 1);
  app.callback([&app, &exit_code] {
    if (!app.get_subcommands().empty()) return;
    std::cout << app.help();
    exit_code = 2;
  });
}

void add_model_flag(CLI::App* cmd, std::string& path, const std::string& help, bool positional) {
  auto* g = cmd->add_option_group("checkpoint");
  // A checkpoint file, or a Hugging Face model directory (decode::read_model).
  g->add_option("--model", path, help + ", or a Hugging Face model directory")->check(CLI::ExistingPath);
  if (positional) g->add_option("checkpoint", path, "The same as --model")->check(CLI::ExistingPath);
  g->require_option(1);
}

ops::Precision precision_flag(const CLI::App& cmd) {
  const CLI::App* root = &cmd;
  while (root->get_parent()) root = root->get_parent();
  return ops::parse_precision(root->get_option("--precision")->as<std::string>());
}

std::string device_flag(const CLI::App& cmd) {
  const CLI::App* root = &cmd;
  while (root->get_parent()) root = root->get_parent();
  return root->get_option("--device")->as<std::string>();
}

void use_for_inference(nn::Module& model, const CLI::App& cmd) {
  model.products().set_precision(precision_flag(cmd));
  model.products().freeze();
}

void add_png_output(CLI::App* cmd, std::string& path) {
  // Checked before any work (and again when written): an earlier picture is replaced, anything else refused.
  auto picture = [](const std::string& p) {
    try {
      viz::expect_picture_path(p);
      return std::string();
    } catch (const Error& e) {
      return std::string(e.what());
    }
  };
  cmd->add_option("--output,-o", path, "PNG file to write (replaces an earlier picture, never another kind of file)")
      ->capture_default_str()
      ->check(picture);
  cmd->add_option("--out", path, "Former name of --output")->group("Deprecated")->check(picture);
}

}  // namespace tfm::cli
