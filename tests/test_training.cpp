// The built-in copy task: it learns to copy, and resuming from a checkpoint
// reproduces an uninterrupted run bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "support/compare.h"
#include "support/process.h"
#include "train/copy_task.h"
#include "train/optimizer.h"

namespace tfm {
namespace {

TEST(CopyTask, DefaultRunCopiesEverySample) {
  testing::TempDir dir;
  train::CopyTaskOptions o;  // exactly what `tfm train` runs
  o.trainer.out_dir = dir.path("run");
  std::ostringstream log;
  train::CopyTaskResult r = train::run_copy_task(o, log);
  EXPECT_EQ(r.decoded, 5);
  EXPECT_EQ(r.copied, r.decoded) << log.str();
  // The last steps' mean: single-step losses jump with dropout and the random batch.
  double tail = 0;
  for (size_t i = r.losses.size() - 50; i < r.losses.size(); ++i) tail += r.losses[i] / 50;
  EXPECT_LT(tail, 0.15);
}

TEST(CopyTask, ResumeReproducesAnUninterruptedRunBitForBit) {
  testing::TempDir dir;
  train::CopyTaskOptions o;
  o.model.d_model = 32, o.model.d_ff = 64, o.model.heads = 2;  // small; dropout stays on, so RNG state matters
  o.trainer.max_steps = 8, o.samples = 0, o.batch = 8, o.trainer.out_dir = dir.path("straight");
  std::ostringstream log;
  std::vector<double> straight = train::run_copy_task(o, log).losses;

  train::CopyTaskOptions first = o;
  first.trainer.max_steps = 3, first.trainer.out_dir = dir.path("split");
  std::vector<double> head = train::run_copy_task(first, log).losses;
  train::CopyTaskOptions rest = o;
  rest.trainer.out_dir = dir.path("split"), rest.trainer.resume = dir.path("split/last.safetensors");
  std::vector<double> tail = train::run_copy_task(rest, log).losses;

  head.insert(head.end(), tail.begin(), tail.end());
  ASSERT_EQ(head.size(), straight.size());
  for (size_t i = 0; i < straight.size(); ++i) EXPECT_EQ(head[i], straight[i]) << "step " << i + 1;
  testing::expect_same_checkpoint_tensors(dir.path("straight/last.safetensors"), dir.path("split/last.safetensors"));
}

TEST(Schedule, NoamWarmsUpThenDecays) {
  // factor * d^-0.5 * min(step^-0.5, step * warmup^-1.5): linear rise, peak at warmup, then 1/sqrt(step).
  EXPECT_FLOAT_EQ(train::noam_lr(1, 512, 1.0f, 4000), static_cast<float>(std::pow(512.0, -0.5) * std::pow(4000.0, -1.5)));
  EXPECT_FLOAT_EQ(train::noam_lr(4000, 512, 1.0f, 4000), static_cast<float>(std::pow(512.0, -0.5) * std::pow(4000.0, -0.5)));
  EXPECT_GT(train::noam_lr(4000, 512, 1.0f, 4000), train::noam_lr(3999, 512, 1.0f, 4000));
  EXPECT_GT(train::noam_lr(4000, 512, 1.0f, 4000), train::noam_lr(4001, 512, 1.0f, 4000));
  EXPECT_EQ(train::noam_lr(0, 512, 1.0f, 4000), train::noam_lr(1, 512, 1.0f, 4000));
}

TEST(ClipGradNorm, ScalesToTheGlobalNorm) {
  Tensor a = Tensor::zeros({2}), b = Tensor::zeros({1});
  a.set_requires_grad(true), b.set_requires_grad(true);
  // Gradients (3, 4) and (12): global norm 13.
  Tensor ga = Tensor::from_vector({2}, {3, 4}), gb = Tensor::from_vector({1}, {12});
  a.impl()->grad = ga.impl_ptr(), b.impl()->grad = gb.impl_ptr();
  EXPECT_NEAR(train::clip_grad_norm({a, b}, 6.5), 13.0, 1e-9);
  EXPECT_NEAR(a.grad().data()[0], 1.5, 1e-5);
  EXPECT_NEAR(b.grad().data()[0], 6.0, 1e-5);
}

}  // namespace
}  // namespace tfm
