// The tfm binary as a user runs it: help, clear one-line errors, exit codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

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

}  // namespace
