// The tfm binary as a user runs it: help, clear one-line errors, exit codes, and
// training runs that never overwrite another run or turn into another task.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/safetensors.h"
#include "support/fixture.h"
#include "support/process.h"

namespace {

using tfm::testing::CliResult;
using tfm::testing::run_tfm;

// A flag value refused before any work: exit status 2 (usage) and one line naming the flag, the bound and the value.
struct BadFlag {
  std::string args, message;
};

class CliBadFlag : public ::testing::TestWithParam<BadFlag> {};

TEST_P(CliBadFlag, IsAUsageErrorThatNamesTheFlag) {
  // Commands that need a file get one that exists, so that the flag's own check is what fails.
  const std::string text = (std::filesystem::temp_directory_path() / "tfm_cli_flags.txt").string();
  std::ofstream(text) << "some text\n";
  std::string args = GetParam().args;
  for (size_t at; (at = args.find("FILE")) != std::string::npos;) args.replace(at, 4, text);
  CliResult r = run_tfm(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
  EXPECT_NE(r.output.find("tfm: error: " + GetParam().message), std::string::npos) << args << "\n" << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    EveryCommand, CliBadFlag,
    ::testing::Values(
        BadFlag{"--threads 0 info FILE", "--threads must be from 1 to 1024 (got 0)"},
        BadFlag{"--threads -3 info FILE", "--threads must be from 1 to 1024 (got -3)"},
        BadFlag{"--threads abc info FILE", "--threads must be from 1 to 1024 (got abc)"},
        BadFlag{"--threads 99999999999 info FILE", "--threads must be from 1 to 1024 (got 99999999999)"},
        BadFlag{"train --log-every 0", "--log-every must be at least 1 (got 0)"},
        BadFlag{"train --log-every -1", "--log-every must be at least 1 (got -1)"},
        BadFlag{"train --batch 0", "--batch must be at least 1 (got 0)"},
        BadFlag{"train --steps -5", "--steps must be at least 0 (got -5)"},
        BadFlag{"lm train --lr 1e30", "--lr must be a number greater than 0 and at most 1000 (got 1e30)"},
        BadFlag{"train --save-every -1", "--save-every must be at least 0 (got -1)"},
        BadFlag{"train --samples -3", "--samples must be at least 0 (got -3)"},
        BadFlag{"train --seq-len 1", "--seq-len must be at least 2 (got 1)"},
        BadFlag{"train --valid-sentences -3", "--valid-sentences must be at least 0 (got -3)"},
        BadFlag{"train --max-sentence-tokens -1", "--max-sentence-tokens must be at least 1 (got -1)"},
        BadFlag{"train --max-tokens 0", "--max-tokens must be at least 1 (got 0)"},
        BadFlag{"train --lr-factor nan", "--lr-factor must be a number greater than 0 and at most 1000 (got nan)"},
        BadFlag{"train --clip-norm -1", "--clip-norm must be a number of at least 0 (got -1)"},
        BadFlag{"train --max-minutes nan", "--max-minutes must be a number of at least 0 (got nan)"},
        BadFlag{"train --patience -1", "--patience must be at least 0 (got -1)"},
        BadFlag{"train --label-smoothing 2", "--label-smoothing must be at least 0 and below 1 (got 2)"},
        BadFlag{"train --dropout nan", "--dropout must be at least 0 and below 1 (got nan)"},
        BadFlag{"lm train --text FILE --lr nan", "--lr must be a number greater than 0 and at most 1000 (got nan)"},
        BadFlag{"lm train --text FILE --lr inf", "--lr must be a number greater than 0 and at most 1000 (got inf)"},
        BadFlag{"lm train --text FILE --lr -1", "--lr must be a number greater than 0 and at most 1000 (got -1)"},
        BadFlag{"lm train --text FILE --lr 1e300", "--lr must be a number greater than 0 and at most 1000 (got 1e300)"},
        BadFlag{"lm train --text FILE --min-lr -1", "--min-lr must be a number of at least 0 (got -1)"},
        BadFlag{"lm train --text FILE --beta2 1.5", "--beta2 must be at least 0 and below 1 (got 1.5)"},
        BadFlag{"lm train --text FILE --beta2 nan", "--beta2 must be at least 0 and below 1 (got nan)"},
        BadFlag{"lm train --text FILE --weight-decay nan", "--weight-decay must be a number of at least 0 (got nan)"},
        BadFlag{"lm train --text FILE --clip-norm nan", "--clip-norm must be a number of at least 0 (got nan)"},
        BadFlag{"lm train --text FILE --max-minutes -1", "--max-minutes must be a number of at least 0 (got -1)"},
        BadFlag{"lm train --text FILE --log-every 0", "--log-every must be at least 1 (got 0)"},
        BadFlag{"lm train --text FILE --epochs 0", "--epochs must be at least 1 (got 0)"},
        BadFlag{"lm train --text FILE --accumulate 0", "--accumulate must be at least 1 (got 0)"},
        BadFlag{"lm train --text FILE --context 0", "--context must be from 1 to 131072 (got 0)"},
        BadFlag{"lm train --text FILE --context 100000000", "--context must be from 1 to 131072 (got 100000000)"},
        BadFlag{"lm train --text FILE --seed -1", "--seed must be at least 0 (got -1)"},
        BadFlag{"lm train --text FILE --sample-tokens -1", "--sample-tokens must be at least 0 (got -1)"},
        BadFlag{"lm train --text FILE --heads 0", "--heads must be from 1 to 65536 (got 0)"},
        BadFlag{"bert train --text FILE --mask-fraction 1", "--mask-fraction must be greater than 0 and below 1 (got 1)"},
        BadFlag{"bert train --text FILE --max-len 1", "--max-len must be from 2 to 100000 (got 1)"},
        BadFlag{"vit train --valid-images 0", "--valid-images must be at least 1 (got 0)"},
        BadFlag{"vit train --patch 0", "--patch must be at least 1 (got 0)"},
        BadFlag{"vit train --channels 2", "--channels must be 1 or 3 (got 2)"},
        BadFlag{"vit train --image-size 5000", "--image-size must be from 1 to 4096 (got 5000)"},
        BadFlag{"vit train --valid-fraction 1", "--valid-fraction must be greater than 0 and below 1 (got 1)"},
        BadFlag{"vit eval FILE --data d -i a.png", "--data excludes --input"},
        BadFlag{"generate FILE --temperature nan", "--temperature must be from 0 to 100 (got nan)"},
        BadFlag{"generate FILE --top-p nan", "--top-p must be from 0 to 1 (got nan)"},
        BadFlag{"generate FILE --top-k -1", "--top-k must be at least 0 (got -1)"},
        BadFlag{"translate --model FILE --max-len-a nan", "--max-len-a must be a number of at least 0 (got nan)"},
        BadFlag{"translate --model FILE --nbest 1 --nbest 2", "--nbest is given 2 times; give it once"},
        BadFlag{"translate --model FILE --max-len-a -1", "--max-len-a must be a number of at least 0 (got -1)"},
        BadFlag{"translate --model FILE --max-len-a 1e39", "--max-len-a must be a number of at least 0 (got 1e39)"},
        BadFlag{"translate --model FILE --length-penalty nan", "--length-penalty must be a finite number (got nan)"},
        BadFlag{"translate --model FILE --beam 0", "--beam must be from 1 to 64 (got 0)"},
        BadFlag{"translate --model FILE --batch 0", "--batch must be at least 1 (got 0)"},
        BadFlag{"translate --model FILE --workers -1", "--workers must be from 0 to 1024 (got -1)"},
        BadFlag{"attention --model FILE --layer -2", "--layer must be at least -1 (got -2)"},
        BadFlag{"attention --model FILE --image -1", "--image must be at least 0 (got -1)"},
        BadFlag{"vocab --src FILE --tgt FILE --size 7", "--size must be from 8 to 1000000 (got 7)"}));

// Values that pass each flag's own check but not the run: exit status 1 and a message naming the file or flag to fix.
struct BadRun {
  std::string args;
  int code;
  std::string message;
};

class CliBadRun : public ::testing::TestWithParam<BadRun> {};

TEST_P(CliBadRun, SaysWhatToFix) {
  tfm::testing::TempDir dir;
  tfm::testing::write_file(dir.path("text.txt"), std::string(3000, 'a') + "\n");
  tfm::testing::write_file(dir.path("empty.txt"), "");
  tfm::testing::write_file(dir.path("short.txt"), "abcdefghij\n");
  std::string args = GetParam().args;
  const std::pair<const char*, std::string> files[] = {
      {"TEXT", dir.path("text.txt")}, {"EMPTY", dir.path("empty.txt")}, {"SHORT", dir.path("short.txt")}, {"OUT", dir.path("run")}, {"DIR", dir.path("")}};
  for (const auto& [name, path] : files)
    for (size_t at; (at = args.find(name)) != std::string::npos;) args.replace(at, std::strlen(name), path);
  CliResult r = run_tfm(args);
  EXPECT_EQ(r.code, GetParam().code) << args << "\n" << r.output;
  std::string message = GetParam().message;
  for (size_t at; (at = message.find("EMPTY")) != std::string::npos;) message.replace(at, 5, dir.path("empty.txt"));
  EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    EveryCommand, CliBadRun,
    ::testing::Values(
        BadRun{"lm train --text TEXT --valid EMPTY --steps 1 --out OUT", 1, "EMPTY: is too short: validation needs at least 65 tokens (one window), it has 0"},
        BadRun{"lm train --text SHORT --steps 1 --out OUT", 1, "short.txt: too short: training needs at least 65 tokens (one window), the text has 9"},
        BadRun{"lm train --text TEXT --batch 1000000000 --steps 1 --out OUT", 1, "--batch 1000000000 windows of 65 tokens is more than the training text's"},
        BadRun{"lm train --text TEXT --min-lr 0.01 --steps 1 --out OUT", 1, "--min-lr 0.01 must be from 0 to --lr 0.001"},
        BadRun{"train --steps 2 --warmup 5 --log-every 1 --samples 0 --out OUT", 0, "warning: 2 steps are fewer than the 5 warm-up steps (--warmup)"},
        BadRun{"train --seq-len 65 --out OUT", 1, "copy task: seq_len 65 exceeds the model's max_len 64"},
        BadRun{"train --train-src TEXT --out OUT", 1, "translation training needs train_src, train_tgt, valid_src, valid_tgt, src_vocab and tgt_vocab (--train-src, --train-tgt"},
        BadRun{"train --preset base --out OUT", 2, "--preset applies only to translation training (with --train-src and --train-tgt)"},
        BadRun{"train --max-tokens 100 --out OUT", 2, "--max-tokens applies only to translation training"},
        BadRun{"train --train-src TEXT --train-tgt TEXT --seq-len 4 --out OUT", 2, "--seq-len applies only to the copy task"},
        BadRun{"vocab --src TEXT --out OUT", 2, "vocab needs either --text, or --src and --tgt"},
        BadRun{"vocab --text TEXT --tgt TEXT --out OUT", 2, "vocab needs either --text, or --src and --tgt"},
        BadRun{"score --hyp DIR --ref TEXT", 1, "is a directory, not a text file"},
        BadRun{"generate --model TEXT --prompt \"$(printf 'a\\377')\"", 1, "--prompt: invalid UTF-8"}));

TEST(Cli, ScoreReadsTheHypothesesFromStandardInput) {
  tfm::testing::TempDir dir;
  tfm::testing::write_file(dir.path("ref.txt"), "a small cat sat on the mat\n");
  CliResult r = run_tfm("score --hyp - --ref " + dir.path("ref.txt") + " < " + dir.path("ref.txt"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("BLEU = 100.00"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("chrF2 = 100.00"), std::string::npos) << r.output;
}

TEST(Cli, TheCheckpointIsGivenWithModelOrAlone) {
  tfm::testing::TempDir dir;
  ASSERT_EQ(run_tfm("train --steps 1 --samples 0 --out " + dir.path("run")).code, 0);
  const std::string ckpt = dir.path("run/last.safetensors");
  EXPECT_EQ(run_tfm("info --model " + ckpt).code, 0);
  EXPECT_EQ(run_tfm("info " + ckpt).code, 0);
  CliResult both = run_tfm("info --model " + ckpt + " " + ckpt);
  EXPECT_EQ(both.code, 2) << both.output;
  CliResult none = run_tfm("info");
  EXPECT_EQ(none.code, 2) << none.output;
  EXPECT_NE(none.output.find("--model"), std::string::npos) << none.output;
  // A safetensors file without tfm's metadata is described as it is.
  tfm::io::write_safetensors(dir.path("plain.safetensors"), {{"w", tfm::Tensor::ones({2, 3})}, {"b", tfm::Tensor::ones({3})}}, {});
  CliResult plain = run_tfm("info " + dir.path("plain.safetensors"));
  EXPECT_EQ(plain.code, 0) << plain.output;
  EXPECT_NE(plain.output.find("model: none (no tfm metadata"), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find("tensors: 2, parameters: 9\n  w [2, 3]\n  b [3]"), std::string::npos) << plain.output;
}

// The learning rate of a run's first step, from its metrics.jsonl.
double first_lr(const std::string& run_dir) {
  const std::string metrics = tfm::testing::read_file(run_dir + "/metrics.jsonl");
  const size_t at = metrics.find("\"lr\":");
  return at == std::string::npos ? -1.0 : std::stod(metrics.substr(at + 5));
}

// The copy task runs with the flags given and its own defaults for the others (which
// --help shows as translation's): the paper's rate factor * 128^-0.5 * warmup^-1.5 at step 1.
TEST(Cli, TrainTakesTheSharedOptimiserFlags) {
  tfm::testing::TempDir dir;
  CliResult r = run_tfm("train --steps 2 --samples 0 --lr 0.5 --min-lr 1e-4 --beta2 0.99 --weight-decay 0.01 --warmup 1 --log-every 1 --out " +
                        dir.path("run"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("2 steps of batch 48"), std::string::npos) << r.output;
  EXPECT_NEAR(first_lr(dir.path("run")), 0.5 / std::sqrt(128.0), 1e-7);
  CliResult old = run_tfm("train --steps 1 --samples 0 --lr-factor 0.5 --warmup 1 --out " + dir.path("old"));
  EXPECT_EQ(old.code, 0) << old.output;
  EXPECT_NEAR(first_lr(dir.path("old")), 0.5 / std::sqrt(128.0), 1e-7);
  CliResult defaults = run_tfm("train --steps 1 --samples 0 --out " + dir.path("defaults"));
  EXPECT_EQ(defaults.code, 0) << defaults.output;
  EXPECT_NEAR(first_lr(dir.path("defaults")), 1.0 / std::sqrt(128.0) / std::pow(200.0, 1.5), 1e-10) << "the copy task's 200 warm-up steps";
}

TEST(Cli, UsageErrorsExitWithStatus2) {
  for (const char* args : {"--no-such-flag", "train --no-such-flag", "translate", "frobnicate"}) {
    CliResult r = run_tfm(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("tfm: error: ", 0), 0u) << args << "\n" << r.output;
  }
}

TEST(Cli, NoCommandListsTheCommands) {
  for (const char* args : {"", "lm", "vit", "bert"}) {
    CliResult r = run_tfm(args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_NE(r.output.find("train"), std::string::npos) << args << "\n" << r.output;
  }
  EXPECT_NE(run_tfm("").output.find("translate"), std::string::npos);
}

TEST(Cli, VersionNamesTheCommitTheCpuInstructionsAndTheGpu) {
  CliResult r = run_tfm("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.output.rfind("tfm 0.2.0 (commit ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("CPU instructions in use (oneDNN): "), std::string::npos) << r.output;
  // The GPU --device cuda would use ("CUDA: NVIDIA H200 (sm_90, ...)"), or why none ("CUDA: none (...)").
  EXPECT_NE(r.output.find("\nCUDA: "), std::string::npos) << r.output;
}

// OMP_NUM_THREADS, which the thread count defaults to, in --threads' range (the review's
// C2: 100,000 threads aborted translate and crashed generate, --threads 2 or not: a
// worker thread starts from the environment's count).
TEST(Cli, OmpNumThreadsOutsideTheThreadRangeIsRefusedInOneLine) {
  using tfm::testing::run_command;
  const std::string kTfm = TFM_BINARY, model = tfm::testing::fixture_path("threads/lm.safetensors");
  for (const char* bad : {"100000", "1025", "0", "four", "4,100000"})
    for (const char* threads : {"", "--threads 2 "}) {
      const CliResult r = run_command(std::string("OMP_NUM_THREADS=") + bad + " " + kTfm + " " + threads + "generate " + model + " --max-new-tokens 3");
      EXPECT_EQ(r.code, 1) << bad << ": " << r.output;
      // (libgomp adds its own line for the values it cannot read)
      EXPECT_NE(r.output.find(std::string("tfm: error: OMP_NUM_THREADS=") + bad +
                              ": thread counts are whole numbers from 1 to 1024, as --threads takes them\n"),
                std::string::npos)
          << bad << ": " << r.output;
    }
  EXPECT_EQ(run_command("OMP_NUM_THREADS=3 " + kTfm + " generate " + model + " --max-new-tokens 3").code, 0);
}

// --threads holds for generation's worker thread too, which would otherwise start from
// OMP_NUM_THREADS (8 here: 9 threads in all with --threads 1, before the fix).
TEST(Cli, GenerationComputesWithTheThreadsGiven) {
  const std::string command = "OMP_NUM_THREADS=8 " + std::string(TFM_BINARY) + " --threads 1 generate " +
                              tfm::testing::fixture_path("threads/lm.safetensors") + " --max-new-tokens 100000 > /dev/null 2>&1 & echo $!";
  FILE* pipe = ::popen(command.c_str(), "r");
  long pid = 0;
  ASSERT_EQ(std::fscanf(pipe, "%ld", &pid), 1);
  ::pclose(pipe);
  int most = 0, samples = 0;
  for (int i = 0; i < 100; ++i, ::usleep(5000)) {  // the first half second of its generation
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("Threads:", 0) == 0) most = std::max(most, std::stoi(line.substr(8))), ++samples;
  }
  ::kill(static_cast<pid_t>(pid), SIGKILL);
  ASSERT_GT(samples, 0) << "generation ended before it could be seen";
  EXPECT_LE(most, 3) << "threads of `tfm --threads 1 generate` (the main thread, the worker, an OpenMP team of 1)";
}

// tfm sets libgomp's spin count (src/ops/openmp_wait.cpp) unless the environment chose a wait.
TEST(Cli, IdleThreadsSpinBrieflyUnlessTheEnvironmentSaysOtherwise) {
  using tfm::testing::run_command;
  const std::string kTfm = TFM_BINARY;
  CliResult r = run_command("env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY " + kTfm + " --version");
  EXPECT_NE(r.output.find("OpenMP: idle threads spin 1000 pause iterations (GOMP_SPINCOUNT), then sleep (tfm's default)"), std::string::npos)
      << r.output;
  r = run_command("env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=active " + kTfm + " --version");
  EXPECT_NE(r.output.find("OpenMP: idle threads wait active (OMP_WAIT_POLICY)\n"), std::string::npos) << r.output;
  r = run_command("env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=20 " + kTfm + " --version");
  EXPECT_NE(r.output.find("OpenMP: idle threads spin 20 pause iterations (GOMP_SPINCOUNT), then sleep\n"), std::string::npos) << r.output;
}

// generate and vit eval write their text to -o as translate and embed do: the same text as on standard output.
TEST(Cli, GenerateAndVitEvalWriteToOutput) {
  tfm::testing::TempDir dir;
  const std::string fixtures = std::string(TFM_FIXTURE_DIR) + "/threads/";
  const std::pair<std::string, std::string> commands[] = {
      {"generate " + fixtures + "lm.safetensors --prompt 'ROMEO:' --max-new-tokens 20 --temperature 0", "text"},
      {"vit eval " + fixtures + "vit.safetensors --data " + fixtures + "fashion", "report"}};
  for (const auto& [command, file] : commands) {
    CliResult to_stdout = run_tfm(command);
    ASSERT_EQ(to_stdout.code, 0) << command << "\n" << to_stdout.output;
    CliResult to_file = run_tfm(command + " -o " + dir.path(file));
    ASSERT_EQ(to_file.code, 0) << command << "\n" << to_file.output;
    EXPECT_EQ(to_file.output, "") << command;
    EXPECT_EQ(tfm::testing::read_file(dir.path(file)), to_stdout.output) << command;
    CliResult to_dir = run_tfm(command + " -o " + dir.path(""));
    EXPECT_EQ(to_dir.code, 1) << command << "\n" << to_dir.output;
    EXPECT_EQ(std::count(to_dir.output.begin(), to_dir.output.end(), '\n'), 1) << to_dir.output;
  }
}

TEST(Cli, HelpListsTheCommands) {
  CliResult r = run_tfm("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.output.find("train"), std::string::npos);
  EXPECT_NE(r.output.find("info"), std::string::npos);
  CliResult t = run_tfm("train --help");
  EXPECT_EQ(t.code, 0);
  EXPECT_NE(t.output.find("--resume"), std::string::npos);
}

TEST(Cli, BadCheckpointGivesOneErrorLineAndNonZeroExit) {
  const std::string path = (std::filesystem::temp_directory_path() / "tfm_cli_bad.safetensors").string();
  std::ofstream(path) << "definitely not a checkpoint";
  CliResult r = run_tfm("info " + path);
  std::filesystem::remove(path);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.output.rfind("tfm: error: ", 0), 0u) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST(Cli, UnreadableConfigIsReported) {
  const std::string path = (std::filesystem::temp_directory_path() / "tfm_cli_bad.json").string();
  std::ofstream(path) << "{\"d_model\": 12, \"heads\": 5, \"src_vocab\": 11, \"tgt_vocab\": 11}";
  CliResult r = run_tfm("train --steps 1 --config " + path);
  std::filesystem::remove(path);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("tfm: error: " + path + ": d_model 12 is not divisible by heads 5"), std::string::npos) << r.output;
}

TEST(Cli, TrainSavesACheckpointThatInfoReads) {
  tfm::testing::TempDir dir;
  const std::string path = dir.path("run/last.safetensors");
  CliResult t = run_tfm("train --steps 5 --samples 1 --out " + dir.path("run"));
  EXPECT_NE(t.output.find("checkpoints in " + dir.path("run")), std::string::npos) << t.output;
  CliResult r = run_tfm("info " + path);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"d_model\":128"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"step\":5"), std::string::npos) << r.output;
}

// The copy task at its smallest, into `out`.
CliResult copy_task(const std::string& out, const std::string& more) {
  return run_tfm("train --batch 4 --seq-len 4 --samples 0 --out " + out + " " + more);
}

// A run that --epochs ends before --steps says so (it once stopped at step 150 of 3,000
// without a word).
TEST(Cli, ARunEndedByItsEpochsSaysSo) {
  tfm::testing::TempDir dir;
  tfm::testing::write_file(dir.path("text.txt"), std::string(3000, 'a') + "\n");
  CliResult r = run_tfm("lm train --text " + dir.path("text.txt") + " --layers 1 --d-model 16 --heads 2 --batch 4 --steps 500 --epochs 1 "
                        "--validate-every 0 --sample-tokens 0 --out " + dir.path("run") + " 2>&1");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("the 1 epoch (--epochs) ended the run at step 10 of the 500 asked for (--steps)"), std::string::npos) << r.output;
}

// A resume given other training data than its run's says so (the checkpoint records what
// the run trained on); the same data, nothing.
TEST(Cli, AResumeOnOtherDataWarns) {
  tfm::testing::TempDir dir;
  tfm::testing::write_file(dir.path("a.txt"), std::string(3000, 'a') + "\n");
  tfm::testing::write_file(dir.path("b.txt"), std::string(2000, 'a') + "\n");
  const std::string common = " --validate-every 0 --sample-tokens 0 --batch 4 --out " + dir.path("run") + " 2>&1";
  ASSERT_EQ(run_tfm("lm train --text " + dir.path("a.txt") + " --layers 1 --d-model 16 --heads 2 --steps 2" + common).code, 0);
  const std::string resume = " --resume " + dir.path("run/last.safetensors");
  CliResult same = run_tfm("lm train --text " + dir.path("a.txt") + " --steps 3" + resume + common);
  EXPECT_EQ(same.code, 0) << same.output;
  EXPECT_EQ(same.output.find("other data"), std::string::npos) << same.output;
  CliResult other = run_tfm("lm train --text " + dir.path("b.txt") + " --steps 4" + resume + common);
  EXPECT_EQ(other.code, 0) << other.output;
  EXPECT_NE(other.output.find("warning: the run trained on other data (2700 training tokens, fnv "), std::string::npos) << other.output;
}

// A resume from an earlier save into its run's directory would overwrite the later last,
// best and metrics: refused (they stay as they were) unless --force rewinds.
TEST(Cli, AResumeFromAnEarlierSaveKeepsTheLaterOnesUnlessForced) {
  tfm::testing::TempDir dir;
  const std::string run = dir.path("run"), last = dir.path("run/last.safetensors");
  ASSERT_EQ(copy_task(run, "--steps 4 --save-every 2").code, 0);
  const std::string kept = tfm::testing::read_file(last), metrics = tfm::testing::read_file(dir.path("run/metrics.jsonl"));
  CliResult back = copy_task(run, "--steps 6 --resume " + run + "/step-2.safetensors");
  EXPECT_EQ(back.code, 1) << back.output;
  EXPECT_NE(back.output.find(run + "/step-2.safetensors is step 2 of a run that went on to step 4 (" + last + ")"), std::string::npos)
      << back.output;
  EXPECT_EQ(tfm::testing::read_file(last), kept);
  EXPECT_EQ(tfm::testing::read_file(dir.path("run/metrics.jsonl")), metrics);
  EXPECT_EQ(copy_task(run, "--steps 6 --resume " + last).code, 0);
  EXPECT_EQ(copy_task(run, "--steps 6 --resume " + run + "/step-2.safetensors --force").code, 0);
}

TEST(Cli, AFreshRunRefusesADirectoryHoldingAnotherRunUnlessForced) {
  tfm::testing::TempDir dir;
  const std::string run = dir.path("run"), last = dir.path("run/last.safetensors");
  ASSERT_EQ(copy_task(run, "--steps 4").code, 0);
  const std::string checkpoint = tfm::testing::read_file(last), metrics = tfm::testing::read_file(dir.path("run/metrics.jsonl"));

  CliResult again = copy_task(run, "--steps 2");
  EXPECT_EQ(again.code, 1);
  EXPECT_EQ(again.output, "tfm: error: " + run + " already holds a training run (best.safetensors, curves.png, last.safetensors, metrics.jsonl); " +
                              "continue it with --resume " + last + ", or start a new one there with --force (which deletes those files) " +
                              "or in another --out\n");
  EXPECT_EQ(tfm::testing::read_file(last), checkpoint);
  EXPECT_EQ(tfm::testing::read_file(dir.path("run/metrics.jsonl")), metrics);

  // --force with a run that fails its own checks: the previous run stays.
  tfm::testing::write_file(dir.path("short.json"), R"({"max_len": 3})");  // shorter than --seq-len 4: refused once the run has begun
  CliResult failed = copy_task(run, "--steps 2 --force --config " + dir.path("short.json"));
  EXPECT_EQ(failed.code, 1) << failed.output;
  EXPECT_EQ(tfm::testing::read_file(last), checkpoint);
  EXPECT_EQ(tfm::testing::read_file(dir.path("run/metrics.jsonl")), metrics);

  CliResult forced = copy_task(run, "--steps 2 --force");
  EXPECT_EQ(forced.code, 0) << forced.output;
  EXPECT_NE(forced.output.find("--force: removed the previous run's"), std::string::npos) << forced.output;
  EXPECT_EQ(tfm::testing::read_file(dir.path("run/metrics.jsonl")).find("\"step\":4"), std::string::npos) << "the old run's metrics remain";

  // A run killed before its first checkpoint left metrics only: nothing to resume or lose.
  const std::string early = dir.path("early");
  std::filesystem::create_directories(early);
  tfm::testing::write_file(early + "/metrics.jsonl", "{\"step\":1,\"train_loss\":2.0}\n");
  CliResult fresh = copy_task(early, "--steps 2");
  EXPECT_EQ(fresh.code, 0) << fresh.output;
  EXPECT_NE(fresh.output.find("removed the files of a run that saved no checkpoint: metrics.jsonl"), std::string::npos) << fresh.output;
  EXPECT_EQ(tfm::testing::read_file(early + "/metrics.jsonl").find("\"step\":1,"), std::string::npos) << "the old run's metrics remain";
}

// The review's L1: a resumed run goes on in its checkpoint's directory, never in another
// run's (the default one included), unless forced.
TEST(Cli, AResumedRunGoesOnInItsOwnDirectoryAndRefusesAnotherRuns) {
  tfm::testing::TempDir dir;
  const std::string a = dir.path("a"), b = dir.path("b");
  ASSERT_EQ(copy_task(a, "--steps 2").code, 0);
  ASSERT_EQ(copy_task(b, "--steps 3").code, 0);
  const std::string b_last = tfm::testing::read_file(b + "/last.safetensors"), b_metrics = tfm::testing::read_file(b + "/metrics.jsonl");

  CliResult into_b = run_tfm("train --batch 4 --seq-len 4 --samples 0 --steps 4 --resume " + a + "/last.safetensors --out " + b);
  EXPECT_EQ(into_b.code, 1);
  EXPECT_EQ(into_b.output, "tfm: error: " + b + " holds another training run (best.safetensors, curves.png, last.safetensors, metrics.jsonl) than the one " +
                               a + "/last.safetensors continues; continue it in its own directory (--out " + a +
                               ", the default) or in an empty one, or replace that run with --force (which deletes those files)\n");
  EXPECT_EQ(tfm::testing::read_file(b + "/last.safetensors"), b_last);
  EXPECT_EQ(tfm::testing::read_file(b + "/metrics.jsonl"), b_metrics);

  // Without --out, in the checkpoint's directory (run from elsewhere: the default runs/copy is not touched).
  CliResult in_place = run_tfm("train --batch 4 --seq-len 4 --samples 0 --steps 4 --resume " + a + "/last.safetensors");
  EXPECT_EQ(in_place.code, 0) << in_place.output;
  EXPECT_NE(in_place.output.find("checkpoints in " + a), std::string::npos) << in_place.output;
  EXPECT_NE(run_tfm("info " + a + "/last.safetensors").output.find("\"step\":4"), std::string::npos);

  // A copy of the run's last checkpoint resumes into the run's directory; --force replaces another run.
  std::filesystem::copy_file(a + "/last.safetensors", dir.path("copy.safetensors"));
  EXPECT_EQ(run_tfm("train --batch 4 --seq-len 4 --samples 0 --steps 5 --resume " + dir.path("copy.safetensors") + " --out " + a).code, 0);
  CliResult forced = run_tfm("train --batch 4 --seq-len 4 --samples 0 --steps 6 --resume " + a + "/last.safetensors --out " + b + " --force");
  EXPECT_EQ(forced.code, 0) << forced.output;
  EXPECT_NE(run_tfm("info " + b + "/last.safetensors").output.find("\"step\":6"), std::string::npos);
}

// `tfm train --resume` without data flags is the copy task's: a translation checkpoint
// is refused, never continued (and overwritten) as a copy task.
// The copy task takes the model flags (--dropout, --post-norm, --config); a resumed run refuses ones that disagree with its checkpoint.
TEST(Cli, CopyTaskResumeRefusesModelFlagsThatDisagree) {
  tfm::testing::TempDir dir;
  const std::string last = dir.path("run/last.safetensors");
  ASSERT_EQ(copy_task(dir.path("run"), "--steps 1 --dropout 0.2").code, 0);
  EXPECT_NE(run_tfm("info " + last).output.find("\"dropout\":0.2"), std::string::npos);
  CliResult r = copy_task(dir.path("run"), "--steps 2 --resume " + last + " --post-norm");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.output, "tfm: error: the model settings disagree with " + last + ": norm_first false (" + last +
                          ": true) (a run resumed or started from a checkpoint keeps its architecture; dropout may change)\n");
  EXPECT_EQ(copy_task(dir.path("run"), "--steps 2 --resume " + last + " --dropout 0.2").code, 0);
}

TEST(Cli, TrainResumeOfATranslationCheckpointNeedsItsData) {
  tfm::testing::TempDir dir;
  const std::string last = dir.path("run/last.safetensors");
  ASSERT_EQ(copy_task(dir.path("run"), "--steps 1").code, 0);
  tfm::io::SafeTensors file = tfm::io::read_safetensors(last);
  file.metadata["tfm.vocab"] = R"({"src":{"path":"v.model","crc32":1},"tgt":{"path":"v.model","crc32":1}})";  // what translation records
  tfm::io::write_safetensors(last, file.tensors, file.metadata);
  const std::string before = tfm::testing::read_file(last);

  CliResult r = run_tfm("train --steps 2 --resume " + last + " --out " + dir.path("run"));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.output, "tfm: error: " + last + ": is a translation checkpoint (it records vocabularies); resume it with its data: " +
                          "--train-src, --train-tgt, --valid-src, --valid-tgt, --src-vocab and --tgt-vocab\n");
  EXPECT_EQ(tfm::testing::read_file(last), before);
}

// `tfm average --last N RUN`: a run's last saves averaged into a new file that the
// other commands read; an existing output and a directory without --last refused.
TEST(Cli, AverageWritesTheMeanOfARunsLastSaves) {
  tfm::testing::TempDir dir;
  const std::string run = dir.path("run"), out = dir.path("avg.safetensors");
  ASSERT_EQ(copy_task(run, "--steps 3 --save-every 1").code, 0);
  CliResult r = run_tfm("average --last 2 " + run + " -o " + out);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("the mean of 2 checkpoints (step-2.safetensors, step-3.safetensors)"), std::string::npos) << r.output;
  CliResult info = run_tfm("info " + out);
  EXPECT_EQ(info.code, 0) << info.output;
  EXPECT_NE(info.output.find("averaged from: step-2.safetensors, step-3.safetensors"), std::string::npos) << info.output;
  EXPECT_NE(info.output.find("training state: none"), std::string::npos) << info.output;

  const std::string before = tfm::testing::read_file(out);
  CliResult again = run_tfm("average " + run + "/step-1.safetensors " + run + "/step-2.safetensors -o " + out);
  EXPECT_EQ(again.code, 1);
  EXPECT_EQ(again.output, "tfm: error: " + out + ": exists; tfm average writes a new file (nothing is overwritten)\n");
  EXPECT_EQ(tfm::testing::read_file(out), before);
  CliResult whole = run_tfm("average " + run + " -o " + dir.path("b.safetensors"));
  EXPECT_EQ(whole.output, "tfm: error: " + run + ": is a directory; give --last N to average its last N step-N checkpoints\n");
  CliResult too_many = run_tfm("average --last 4 " + run + " -o " + dir.path("b.safetensors"));
  EXPECT_NE(too_many.output.find("holds 3 step-N checkpoints, fewer than the 4 asked for"), std::string::npos) << too_many.output;
  CliResult twice = run_tfm("average " + run + "/step-1.safetensors " + run + "/../run/step-1.safetensors -o " + dir.path("b.safetensors"));
  EXPECT_EQ(twice.output, "tfm: error: " + run + "/../run/step-1.safetensors: is given twice (as " + run +
                              "/step-1.safetensors); each checkpoint counts once\n");
}

}  // namespace
