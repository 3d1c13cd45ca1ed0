// Training that can be left running overnight: a run killed with SIGKILL at random
// moments and resumed ends with exactly the weights of an uninterrupted run, and a
// checkpoint that cannot be written (the file-size limit stands in for a full disk)
// stops training with a clear error and leaves the previous checkpoint intact. The
// metrics of a resumed run hold each step once, and one directory holds one run at a time.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/compare.h"
#include "support/process.h"

namespace tfm {
namespace {

using testing::TempDir;

// A tiny character language model that checkpoints (last.safetensors) every 5 steps.
std::vector<std::string> lm_args(const TempDir& dir, const std::string& out, int steps) {
  return {"lm", "train", "--text", dir.path("text.txt"), "--out", dir.path(out), "--steps", std::to_string(steps), "--layers", "2",
          "--d-model", "32", "--heads", "2", "--context", "32", "--batch", "8", "--validate-every", "5", "--sample-tokens", "0",
          "--warmup", "5", "--log-every", "5"};
}

std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const std::string& a : args) s += " '" + a + "'";
  return s;
}

void write_text(const TempDir& dir) {
  std::string text;
  for (int i = 0; i < 400; ++i) text += "So shaken as we are, so wan with care, find we a time for frighted peace to pant.\n";
  testing::write_file(dir.path("text.txt"), text);
}

TEST(CrashSafety, SigkillAtRandomMomentsThenResumeEqualsAnUninterruptedRun) {
  TempDir dir;
  write_text(dir);
  const int steps = 400;  // about 2.5 s in Release, so that a kill lands in the middle
  testing::CliResult straight = testing::run_tfm(joined(lm_args(dir, "straight", steps)));
  ASSERT_EQ(straight.code, 0) << straight.output;

  std::random_device seed;
  std::mt19937 gen(seed());
  std::uniform_int_distribution<int> delay_ms(100, 1200);
  const std::string last = dir.path("killed/last.safetensors");
  int kills = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::vector<std::string> args = lm_args(dir, "killed", steps);
    if (std::filesystem::exists(last)) args.insert(args.end(), {"--resume", last});
    const pid_t pid = testing::start_tfm(args, dir.path("killed.log"));
    const int ms = delay_ms(gen);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    const bool was_running = ::kill(pid, SIGKILL) == 0;
    const bool killed = testing::wait_tfm(pid).code == 128 + SIGKILL;
    if (was_running && killed) ++kills;
    std::cout << "  attempt " << attempt + 1 << ": SIGKILL after " << ms << " ms" << (killed ? "" : " (had already finished)") << "\n";
  }
  std::vector<std::string> finish = lm_args(dir, "killed", steps);
  if (std::filesystem::exists(last)) finish.insert(finish.end(), {"--resume", last});
  testing::CliResult rest = testing::run_tfm(joined(finish));
  ASSERT_EQ(rest.code, 0) << rest.output << testing::read_file(dir.path("killed.log"));
  EXPECT_GE(kills, 1) << "no run was killed while training; the test proved nothing";
  testing::expect_same_checkpoint_tensors(dir.path("straight/last.safetensors"), last);
}

TEST(CrashSafety, CheckpointThatCannotBeWrittenLeavesThePreviousOneIntact) {
  TempDir dir;
  write_text(dir);
  const std::string last = dir.path("run/last.safetensors");
  ASSERT_EQ(testing::run_tfm(joined(lm_args(dir, "run", 10))).code, 0);
  const std::string before = testing::read_file(last);
  ASSERT_GT(before.size(), 100000u);

  // Files may not grow past 64 KiB, far less than a checkpoint: the next save fails. SIGXFSZ
  // is left at its default (which would kill the process): tfm must ignore it itself.
  std::vector<std::string> more = lm_args(dir, "run", 20);
  more.insert(more.end(), {"--resume", last});
  testing::CliResult full = testing::run_command("bash -c \"ulimit -f 64; exec " + std::string(TFM_BINARY) + joined(more) + "\"");
  EXPECT_EQ(full.code, 1) << full.output;
  EXPECT_NE(full.output.find("tfm: error: cannot write " + last + ": write failed (File too large); the previous file is untouched"),
            std::string::npos)
      << full.output;
  EXPECT_EQ(testing::read_file(last), before) << "the previous checkpoint changed";
  EXPECT_FALSE(std::filesystem::exists(last + ".tmp"));

  testing::CliResult resumed = testing::run_tfm(joined(more));
  EXPECT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed " + last + " at step 10"), std::string::npos) << resumed.output;
}

// A run killed after logging steps it had not saved logs them again once resumed: the
// metrics hold each step once, however far back the run resumes.
TEST(CrashSafety, MetricsHoldEachStepOnceAfterAResume) {
  TempDir dir;
  write_text(dir);
  std::vector<std::string> args = lm_args(dir, "run", 15);
  args.insert(args.end(), {"--save-every", "5"});
  ASSERT_EQ(testing::run_tfm(joined(args)).code, 0);
  // As a SIGKILL in the middle of an append leaves it.
  testing::write_file(dir.path("run/metrics.jsonl"), testing::read_file(dir.path("run/metrics.jsonl")) + "{\"step\":16,\"train_lo");

  args.insert(args.end(), {"--resume", dir.path("run/step-5.safetensors"), "--force"});  // (--force: back past the later saves)
  testing::CliResult resumed = testing::run_tfm(joined(args));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  std::istringstream metrics(testing::read_file(dir.path("run/metrics.jsonl")));
  std::vector<std::string> records;
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    records.push_back(std::to_string(j.at("step").get<int>()) + (j.contains("train_loss") ? " train" : " valid"));
  }
  const std::vector<std::string> expected{"5 train", "5 valid", "10 train", "10 valid", "15 train", "15 valid"};
  EXPECT_EQ(records, expected);
}

// One run per output directory: a second one fails at once, and the lock goes with the
// process that held it, however it ended.
TEST(CrashSafety, ASecondRunOnTheSameDirectoryIsRefused) {
  TempDir dir;
  write_text(dir);
  const pid_t first = testing::start_tfm(lm_args(dir, "run", 1000000), dir.path("first.log"));
  for (int i = 0; i < 6000 && testing::read_file(dir.path("first.log")).find("model:") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  testing::CliResult second = testing::run_tfm(joined(lm_args(dir, "run", 5)) + " --force");
  ::kill(first, SIGKILL);
  testing::wait_tfm(first);
  EXPECT_EQ(second.code, 1);
  EXPECT_EQ(second.output, "tfm: error: " + dir.path("run") + " is in use by another tfm run (it holds " + dir.path("run/.lock") +
                               "); wait for it to finish or choose another directory\n");

  testing::CliResult after = testing::run_tfm(joined(lm_args(dir, "run", 5)) + " --force");
  EXPECT_EQ(after.code, 0) << after.output;
}

}  // namespace
}  // namespace tfm
