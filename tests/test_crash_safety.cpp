// Training that can be left running overnight: a run killed with SIGKILL at random
// moments and resumed ends with exactly the weights of an uninterrupted run, and a
// checkpoint that cannot be written (the file-size limit stands in for a full disk)
// stops training with a clear error and leaves the previous checkpoint intact.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

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

  // Files may not grow past 64 KiB, far less than a checkpoint: the next save fails.
  std::vector<std::string> more = lm_args(dir, "run", 20);
  more.insert(more.end(), {"--resume", last});
  testing::CliResult full =
      testing::run_command("bash -c \"trap '' XFSZ; ulimit -f 64; exec " + std::string(TFM_BINARY) + joined(more) + "\"");
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

}  // namespace
}  // namespace tfm
