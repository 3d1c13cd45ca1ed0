// tfm: the command-line front end. Each subcommand (cli/*_command.cpp) parses its
// flags and calls the library; any tfm::Error becomes one "tfm: error: ..." line
// and exit status 1, a usage error (an unknown flag, a value out of range) exit status 2.
// Started by mpirun (or srun), it first joins the launcher's job: its training commands
// then train one model with all the job's processes (dist/launched_job.h).
#include <omp.h>

#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/validators.h"
#include "dist/launched_job.h"
#include "io/output_file.h"
#include "threads/openmp_wait.h"
#include "ops/dispatch.h"
#include "ops/linear_products.h"
#include "tensor/error.h"

#ifndef TFM_GIT_COMMIT
#define TFM_GIT_COMMIT "unknown"
#endif

namespace {

// The GPU that --device cuda would use, or why there is none.
std::string gpu() {
  try {
    return tfm::ops::kernels(tfm::ops::usable_device("cuda")).describe();
  } catch (const tfm::Error& e) {
    return std::string("CUDA: none (") + e.what() + ")";
  }
}

std::string version() {
  return std::string("tfm 0.2.0 (commit ") + TFM_GIT_COMMIT + ")\n" + tfm::ops::kernels(tfm::Device::CPU).describe() + "\n" + gpu() +
         "\nOpenMP: " + tfm::openmp_wait_setting();
}

// "tfm: error: <what>" on standard error, naming the process in a job of several, in one
// write: the lines of processes failing together (mpirun forwards them all) do not mix.
void report_error(const std::string& what) {
  const tfm::dist::Communicator* job = tfm::dist::launched_job();
  const std::string rank = job && job->size() > 1 ? "rank " + std::to_string(job->rank()) + " of " + std::to_string(job->size()) + ": " : "";
  std::fputs(("tfm: error: " + rank + what + "\n").c_str(), stderr);
}

// Help and the version are printed once, by rank 0 of a job.
bool prints_once() {
  const tfm::dist::Communicator* job = tfm::dist::launched_job();
  return !job || job->rank() == 0;
}

int run(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) {
  tfm::choose_openmp_wait(argv);  // may execute the program again: before anything else
  try {
    tfm::dist::join_launched_job();
  } catch (const tfm::Error& e) {
    report_error(e.what());
    return 1;
  }
  const int exit_code = run(argc, argv);
  // A process of a job that failed stops at once: the launcher then stops the others,
  // which may be waiting for it (leaving the job would wait for them).
  const tfm::dist::Communicator* job = tfm::dist::launched_job();
  if (exit_code != 0 && exit_code != 130 && job && job->size() > 1) tfm::dist::end_after_failure(exit_code);
  tfm::dist::leave_launched_job();
  return exit_code;
}

namespace {

int run(int argc, char** argv) {
  tfm::io::handle_output_signals();
  CLI::App app{"tfm: a Transformer engine and toolkit (\"Attention Is All You Need\" and its family)"};
  int exit_code = 0;
  tfm::cli::help_without_subcommand(app, exit_code);
  app.set_version_flag("--version", version, "Print the version, git commit, CPU instructions in use and GPU, then exit");
  int threads = 0;
  app.add_option("--threads", threads, "Worker threads, 1 to 1024 (default: the cores this process may run on, or OMP_NUM_THREADS; under mpirun, those it binds the process to)")
      ->check(tfm::cli::in_range(1, 1024))  // before the action below, which then parses a valid number
      ->each([](const std::string& v) { omp_set_num_threads(std::stoi(v)); });
  std::string precision = "f32";
  app.add_option("--precision", precision,
                 "Linear layers' products: f32, bf16 (training and inference) or int8 (inference)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16", "int8"}));  // read by each command (cli::precision_flag)
  std::string device = "cpu";
  app.add_option("--device", device,
                 "Where models compute: cpu, cuda (the GPU of a build with TFM_CUDA), or sim (the tests' simulated device: the CPU's kernels behind a GPU's rules)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda", "sim"}));  // read by each command (cli::device_flag); sim: the tests' simulated device
  // Global options may also come after the subcommand: `tfm translate --precision bf16`.
  app.fallthrough();
  tfm::cli::add_train_command(app, exit_code);
  tfm::cli::add_vocab_command(app, exit_code);
  tfm::cli::add_translate_command(app, exit_code);
  tfm::cli::add_score_command(app, exit_code);
  tfm::cli::add_info_command(app, exit_code);
  tfm::cli::add_average_command(app, exit_code);
  tfm::cli::add_convert_command(app, exit_code);
  tfm::cli::add_export_command(app, exit_code);
  tfm::cli::add_attention_command(app, exit_code);
  tfm::cli::add_plot_command(app, exit_code);
  tfm::cli::add_lm_command(app, exit_code);
  tfm::cli::add_generate_command(app, exit_code);
  tfm::cli::add_chat_command(app, exit_code);
  tfm::cli::add_vit_command(app, exit_code);
  tfm::cli::add_bert_command(app, exit_code);
  tfm::cli::add_embed_command(app, exit_code);
  tfm::cli::add_classify_command(app, exit_code);
  tfm::cli::add_serve_command(app, exit_code);
  // In a job of several processes, only training uses them; any other command would run
  // once per process, each writing the same output.
  app.parse_complete_callback([&app] {
    // Before OpenMP makes its threads (a worker thread's start from OMP_NUM_THREADS, not
    // from --threads, so that one bad value is refused whatever the flags).
    if (const std::string problem = tfm::openmp_threads_problem(); !problem.empty()) throw tfm::Error(problem);
    const tfm::dist::Communicator* job = tfm::dist::launched_job();
    if (!job || job->size() == 1) return;
    const CLI::App* leaf = &app;
    std::string command;
    while (!leaf->get_subcommands().empty()) {
      leaf = leaf->get_subcommands().front();
      command += (command.empty() ? "" : " ") + leaf->get_name();
    }
    TFM_CHECK(leaf->get_name() == "train", "tfm " << command << " runs in one process: under mpirun -np " << job->size()
                                               << ", only the training commands (train, lm train, vit train, bert train) use several");
  });
  try {
    app.parse(argc, argv);
    tfm::io::check_stdout();  // output lost to a full disk must not end with status 0
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help, --version: which a full disk loses, too
      if (!prints_once()) return 0;
      app.exit(e);
      try {
        tfm::io::check_stdout();
      } catch (const tfm::Error& lost) {
        report_error(lost.what());
        return 1;
      }
      return 0;
    }
    // CLI11 puts "--flag: " before a validator's message; ours read as a sentence: "--batch must be at least 1 (got 0)".
    std::string message = e.what();
    if (const size_t at = message.find(": must be "); at != std::string::npos) message.erase(at, 1);
    // CLI11's "--beam: At Most 1 required but received 2" for a flag given twice (the review's U7).
    if (const size_t at = message.find(": At Most 1 required but received "); at != std::string::npos)
      message = message.substr(0, at) + " is given " + message.substr(at + 34) + " times; give it once";
    report_error(message + " (see --help)");
    return 2;
  } catch (const tfm::Error& e) {
    report_error(e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    report_error("out of memory");
    return 1;
  } catch (const std::exception& e) {  // a bug: every expected failure is a tfm::Error
    report_error(std::string("internal error: ") + e.what());
    return 1;
  }
  return exit_code;
}

}  // namespace
