// `tfm convert`: a Hugging Face model directory written as a tfm checkpoint.
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "decode/hf_checkpoint.h"
#include "io/checkpoint.h"
#include "tensor/error.h"

namespace tfm::cli {

void add_convert_command(CLI::App& app, int&) {
  struct Options {
    std::string model, output;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("convert", "Write a Hugging Face model directory (opus-mt, GPT-2, BERT, ViT) as a tfm checkpoint");
  cmd->add_option("--model", o->model, "Hugging Face model directory (config.json, model.safetensors or pytorch_model.bin, tokenizer files)")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("-o,--output", o->output, "The checkpoint to write (.safetensors); its tokenizer record points at the directory's files")
      ->required();
  cmd->callback([o] {
    TFM_CHECK(!std::filesystem::exists(o->output), o->output << ": exists; tfm convert writes a new file (nothing is overwritten)");
    const io::SafeTensors file = decode::read_hf_checkpoint(o->model);
    io::write_safetensors(o->output, file.tensors, file.metadata);
    int64_t params = 0;
    for (const auto& [name, t] : file.tensors) params += t.numel();
    std::cerr << "tfm: wrote " << o->output << ": a " << io::kind_name(file.metadata.at(io::kModelKindKey)) << " model of " << params
              << " parameters\n";
  });
}

}  // namespace tfm::cli
