// `tfm export --hf`: a model written as a Hugging Face model directory.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "decode/hf_export.h"

namespace tfm::cli {

void add_export_command(CLI::App& app, int&) {
  struct Options {
    std::string model, hf;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("export", "Write a model as a Hugging Face model directory (MarianMT, GPT-2, BERT or ViT)");
  add_model_flag(cmd, o->model, "Checkpoint of any family", /*positional=*/false);
  cmd->add_option("--hf", o->hf, "The directory to write (new, or empty): config.json, model.safetensors and the tokenizer's files")
      ->required();
  cmd->callback([o] {
    decode::export_hf(o->model, o->hf);
    std::cerr << "tfm: wrote " << o->hf << " (transformers' from_pretrained reads it, and so does tfm: --model " << o->hf << ")\n";
  });
}

}  // namespace tfm::cli
