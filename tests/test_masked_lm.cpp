// The BERT-style family: BERT's masking recipe, a short masked-LM training run
// through the shared Trainer, and `tfm embed`.
#include <gtest/gtest.h>

#include <sstream>

#include "support/devices.h"
#include "support/process.h"
#include "train/masked_lm.h"

namespace tfm {
namespace {

using testing::TempDir;

TEST(MaskTokens, ChoosesFifteenPercentAndSplitsThemEightyTenTen) {
  data::Tokenizer tok = data::Tokenizer::characters("abcdefghijklmnopqrstuvwxyz");
  std::vector<int> ids;
  Rng fill(1);
  for (int64_t r = 0; r < 64; ++r) {
    ids.push_back(data::Tokenizer::kBos);
    for (int64_t c = 1; c < 128; ++c) ids.push_back(static_cast<int>(fill.randint(5, tok.size())));
  }
  models::Tokens batch(ids, 64, 128);
  const std::vector<int> original = ids;
  std::vector<int> targets = training::mask_tokens(batch, tok, 0.15, 7);
  int64_t chosen = 0, masked = 0, kept = 0, cls_chosen = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i] < 0) {
      EXPECT_EQ(batch.data()[i], original[i]);
      continue;
    }
    ++chosen;
    cls_chosen += original[i] == data::Tokenizer::kBos;
    EXPECT_EQ(targets[i], original[i]);
    masked += batch.data()[i] == tok.mask_id();
    kept += batch.data()[i] == original[i];
  }
  const double n = static_cast<double>(64 * 127);
  EXPECT_NEAR(chosen / n, 0.15, 0.01);
  EXPECT_EQ(cls_chosen, 0);
  EXPECT_NEAR(masked / double(chosen), 0.8, 0.03);
  EXPECT_NEAR(kept / double(chosen), 0.1 + 0.1 / 26, 0.03);  // kept, plus random draws of the same letter
}

TEST(MaskedLmTraining, PredictsMaskedCharactersAndEmbeds) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 300; ++i) text += "the quick brown fox jumps over the lazy dog\n";
  testing::write_file(dir.path("text.txt"), text);
  MaskedLmTask task;
  task.data.text = dir.path("text.txt");
  task.model = R"({"d_model": 32, "heads": 2, "d_ff": 64, "layers": 2, "max_len": 24, "dropout": 0})";
  task.batch = 16, task.mask_fraction = 0.3;  // more targets a step: a tiny model learns in a few seconds
  TrainingOptions o = MaskedLmTask::training_defaults();
  o.out_dir = dir.path("run"), o.max_steps = 1500, o.validate_every = 500, o.schedule.warmup = 20, o.schedule.lr = 3e-3f;
  std::ostringstream log;
  ASSERT_FALSE(tfm::train(o, task, {}, &log).stopped) << log.str();
  const std::string metrics = testing::read_file(dir.path("run/metrics.jsonl"));
  const size_t at = metrics.rfind("\"masked_accuracy\":");
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_GT(std::stod(metrics.substr(at + 18)), 80.0) << log.str();  // a repeated sentence: context gives most letters away

  testing::write_file(dir.path("sentences.txt"), "the lazy dog\nquick fox\n");
  testing::CliResult e = testing::run_tfm("embed " + dir.path("run/best.safetensors") + " --input " + dir.path("sentences.txt"));
  ASSERT_EQ(e.code, 0) << e.output;
  std::istringstream lines(e.output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream numbers(line);
    int count = 0;
    for (double v; numbers >> v;) ++count;
    EXPECT_EQ(count, 32) << line;
  }
  testing::CliResult cls = testing::run_tfm("embed " + dir.path("run/best.safetensors") + " --pool cls < " + dir.path("sentences.txt"));
  EXPECT_EQ(cls.code, 0) << cls.output;
  EXPECT_EQ(std::count(cls.output.begin(), cls.output.end(), '\n'), 2) << cls.output;
  // --model, -i and -o: the same vectors in a file.
  testing::CliResult file = testing::run_tfm("embed --model " + dir.path("run/best.safetensors") + " -i " + dir.path("sentences.txt") +
                                             " -o " + dir.path("vectors.txt"));
  ASSERT_EQ(file.code, 0) << file.output;
  EXPECT_EQ(testing::read_file(dir.path("vectors.txt")), e.output);
  testing::CliResult d = testing::run_tfm("embed --model " + dir.path("run/best.safetensors") + " -i " + dir.path(""));
  EXPECT_EQ(d.code, 1);
  EXPECT_NE(d.output.find("is a directory, not a text file"), std::string::npos) << d.output;
}

// On the simulated device (tensor/device.h: the CPU's kernels, its memory out of reach of
// everything else), with validation: the CPU's weights bit for bit.
TEST(MaskedLmTraining, TrainsOnTheSimulatedDeviceAsOnTheCpu) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the quick brown fox jumps over the lazy dog\n";
  testing::write_file(dir.path("text.txt"), text);
  MaskedLmTask task;
  task.data.text = dir.path("text.txt");
  task.model = R"({"d_model": 16, "heads": 2, "d_ff": 32, "layers": 1, "max_len": 24})";
  task.batch = 8;
  TrainingOptions o = MaskedLmTask::training_defaults();
  o.max_steps = 4, o.validate_every = 2, o.schedule.warmup = 2;
  testing::expect_the_simulated_device_trains_as_the_cpu(dir.path(""), o, task);
}

}  // namespace
}  // namespace tfm
