#pragma once
// Each tfm subcommand registers its flags and an action on the CLI11 app. An
// action returns the process exit code through `exit_code`; errors are thrown as
// tfm::Error and printed by main as one line.
#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "models/vit.h"

namespace tfm::cli {

void add_train_command(CLI::App& app, int& exit_code);
void add_vocab_command(CLI::App& app, int& exit_code);
void add_translate_command(CLI::App& app, int& exit_code);
void add_score_command(CLI::App& app, int& exit_code);
void add_info_command(CLI::App& app, int& exit_code);
void add_attention_command(CLI::App& app, int& exit_code);
void add_plot_command(CLI::App& app, int& exit_code);
void add_lm_command(CLI::App& app, int& exit_code);
void add_generate_command(CLI::App& app, int& exit_code);
void add_vit_command(CLI::App& app, int& exit_code);
void add_bert_command(CLI::App& app, int& exit_code);
void add_embed_command(CLI::App& app, int& exit_code);

// A ViT checkpoint from `tfm vit train`, loaded and in eval mode.
std::unique_ptr<models::ViT> load_vit(const std::string& path);

}  // namespace tfm::cli
