// tfm: the command-line front end. Each subcommand (cli/*_command.cpp) parses its
// flags and calls the library; any tfm::Error becomes one "tfm: error: ..." line
// and exit status 1.
#include <omp.h>

#include <iostream>

#include "cli/commands.h"
#include "io/output_file.h"
#include "ops/reduced_precision.h"
#include "tensor/error.h"

int main(int argc, char** argv) {
  tfm::io::handle_output_signals();
  CLI::App app{"tfm: a Transformer engine and toolkit (\"Attention Is All You Need\" and its family)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "0.2.0");
  int threads = 0;
  app.add_option("--threads", threads, "Worker threads (default: all cores, or OMP_NUM_THREADS)")
      ->each([](const std::string& v) { omp_set_num_threads(std::stoi(v)); });
  std::string precision = "f32";
  app.add_option("--precision", precision,
                 "Linear layers' products: f32, bf16 (training and inference) or int8 (inference)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16", "int8"}))
      ->each([](const std::string& v) { tfm::ops::set_linear_precision(tfm::ops::parse_precision(v)); });
  // Global options may also come after the subcommand: `tfm translate --precision bf16`.
  app.fallthrough();
  int exit_code = 0;
  tfm::cli::add_train_command(app, exit_code);
  tfm::cli::add_vocab_command(app, exit_code);
  tfm::cli::add_translate_command(app, exit_code);
  tfm::cli::add_score_command(app, exit_code);
  tfm::cli::add_info_command(app, exit_code);
  tfm::cli::add_attention_command(app, exit_code);
  tfm::cli::add_plot_command(app, exit_code);
  tfm::cli::add_lm_command(app, exit_code);
  tfm::cli::add_generate_command(app, exit_code);
  tfm::cli::add_vit_command(app, exit_code);
  tfm::cli::add_bert_command(app, exit_code);
  tfm::cli::add_embed_command(app, exit_code);
  try {
    app.parse(argc, argv);
    tfm::io::check_stdout();  // output lost to a full disk must not end with status 0
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tfm::Error& e) {
    std::cerr << "tfm: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "tfm: error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {  // a bug: every expected failure is a tfm::Error
    std::cerr << "tfm: error: internal error: " << e.what() << "\n";
    return 1;
  }
  return exit_code;
}
