// The tfm binary as a user runs it: help, clear one-line errors, exit codes, and
// training runs that never overwrite another run or turn into another task.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "io/safetensors.h"
#include "support/process.h"

namespace {

using tfm::testing::CliResult;
using tfm::testing::run_tfm;

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

  CliResult forced = copy_task(run, "--steps 2 --force");
  EXPECT_EQ(forced.code, 0) << forced.output;
  EXPECT_NE(forced.output.find("--force: removed the previous run's"), std::string::npos) << forced.output;
  EXPECT_EQ(tfm::testing::read_file(dir.path("run/metrics.jsonl")).find("\"step\":4"), std::string::npos) << "the old run's metrics remain";
}

// `tfm train --resume` without data flags is the copy task's: a translation checkpoint
// is refused, never continued (and overwritten) as a copy task.
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

}  // namespace
