#pragma once
// Each tfm subcommand registers its flags and an action on the CLI11 app. An
// action returns the process exit code through `exit_code`; errors are thrown as
// tfm::Error and printed by main as one line.
#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "decode/family_checkpoint.h"
#include "models/vit.h"
#include "nn/module.h"
#include "ops/linear_products.h"

namespace tfm::cli {

void add_train_command(CLI::App& app, int& exit_code);
void add_vocab_command(CLI::App& app, int& exit_code);
void add_translate_command(CLI::App& app, int& exit_code);
void add_score_command(CLI::App& app, int& exit_code);
void add_info_command(CLI::App& app, int& exit_code);
void add_average_command(CLI::App& app, int& exit_code);
void add_convert_command(CLI::App& app, int& exit_code);
void add_export_command(CLI::App& app, int& exit_code);
void add_attention_command(CLI::App& app, int& exit_code);
void add_plot_command(CLI::App& app, int& exit_code);
void add_lm_command(CLI::App& app, int& exit_code);
void add_generate_command(CLI::App& app, int& exit_code);
void add_chat_command(CLI::App& app, int& exit_code);
void add_vit_command(CLI::App& app, int& exit_code);
void add_bert_command(CLI::App& app, int& exit_code);
void add_embed_command(CLI::App& app, int& exit_code);
void add_classify_command(CLI::App& app, int& exit_code);
void add_serve_command(CLI::App& app, int& exit_code);

// --model PATH, the checkpoint a command reads, required; with `positional`, a path
// given alone (`tfm info ckpt`) is accepted as a shorthand.
void add_model_flag(CLI::App* cmd, std::string& path, const std::string& help, bool positional = true);

// -o/--output FILE for a command that draws a PNG (and --out, its former name).
void add_png_output(CLI::App* cmd, std::string& path);

// Without a subcommand, `app` prints its help (which lists the subcommands) and sets exit code 2.
void help_without_subcommand(CLI::App& app, int& exit_code);

// The precision `--precision` gives (a flag of the root command, which may also come
// after the subcommand).
ops::Precision precision_flag(const CLI::App& cmd);
// The global --device's value ("cpu", "cuda"; "sim" in tests), checked where it is used.
std::string device_flag(const CLI::App& cmd);

// For inference: the model's products in --precision's, its weights frozen (their
// converted copies made once, not per product).
void use_for_inference(nn::Module& model, const CLI::App& cmd);

// A ViT checkpoint from `tfm vit train` (or a Hugging Face ViT), loaded and in eval mode,
// with its recorded classes (an image folder's names, resized images; or MNIST-style
// files', maybe named).
struct LoadedVit {
  std::unique_ptr<models::ViT> model;
  decode::VitClasses classes;
  std::optional<data::ImageProcessor> processor;  // a Hugging Face model's
};
LoadedVit load_vit(const std::string& path);

// `tfm embed --image`: one line of numbers per image file, the ViT's features pooled by
// `pool` ("pooler" or "cls"; "": the model's default, tfm::Classifier::embed).
std::string image_features(const std::string& checkpoint, const std::vector<std::string>& files, const std::string& pool, const CLI::App& cmd);

// A label's class name: its name in `names` (a model's); without names (of `classes`),
// Fashion-MNIST's names for a 10-class set in a directory named "fashion...", else the number.
std::string class_name(int64_t label, const std::vector<std::string>& names, int64_t classes, const std::string& data_dir);

}  // namespace tfm::cli
