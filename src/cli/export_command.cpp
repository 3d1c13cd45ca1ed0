// `tfm export --hf`: a model written as a Hugging Face model directory.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "decode/hf_export.h"

namespace tfm::cli {

void add_export_command(CLI::App& app, int&) {
  struct Options {
    std::string model, hf, lora;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("export", "Write a model as a Hugging Face model directory (MarianMT, M2M100, GPT-2, Llama, Mistral, Qwen2, BERT or ViT)");
  add_model_flag(cmd, o->model, "Checkpoint of any family", /*positional=*/false);
  cmd->add_option("--hf", o->hf, "The directory to write (new, or empty): config.json, model.safetensors and the tokenizer's files")
      ->required();
  cmd->add_option("--lora", o->lora, "A LoRA adapter of the model (PEFT's directory, e.g. runs/lora/best_adapter), merged into the weights written")
      ->check(CLI::ExistingDirectory);
  cmd->callback([o] {
    decode::export_hf(o->model, o->hf, o->lora);
    std::cerr << "tfm: wrote " << o->hf << " (transformers' from_pretrained reads it, and so does tfm: --model " << o->hf << ")\n";
  });
}

}  // namespace tfm::cli
