// The built-in copy task: it learns to copy, and resuming from a checkpoint
// reproduces an uninterrupted run bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <stop_token>

#include "autograd/autograd.h"
#include "models/gpt.h"
#include "ops/elementwise.h"
#include "ops/loss.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "support/compare.h"
#include "support/devices.h"
#include "support/process.h"
#include "tfm/training.h"
#include "train/copy_task.h"
#include "train/optimizer.h"
#include "train/trainer.h"

namespace tfm {
namespace {

TEST(CopyTask, DefaultRunCopiesEverySample) {
  testing::TempDir dir;
  training::TrainerOptions options = CopyTask::training_defaults();  // exactly what `tfm train` runs
  options.out_dir = dir.path("run");
  std::ostringstream log;
  training::CopyTaskResult r = training::run_copy_task(options, CopyTask{}, log);
  EXPECT_EQ(r.decoded, 5);
  EXPECT_EQ(r.copied, r.decoded) << log.str();
  // The last steps' mean: single-step losses jump with dropout and the random batch.
  double tail = 0;
  for (size_t i = r.losses.size() - 50; i < r.losses.size(); ++i) tail += r.losses[i] / 50;
  EXPECT_LT(tail, 0.15);
}

TEST(CopyTask, ResumeReproducesAnUninterruptedRunBitForBit) {
  testing::TempDir dir;
  CopyTask task;
  task.model = R"({"d_model": 32, "d_ff": 64, "heads": 2})";  // small; dropout stays on, so RNG state matters
  task.samples = 0, task.batch = 8;
  training::TrainerOptions o = CopyTask::training_defaults();
  o.max_steps = 8, o.out_dir = dir.path("straight");
  std::ostringstream log;
  std::vector<double> straight = training::run_copy_task(o, task, log).losses;

  training::TrainerOptions first = o;
  first.max_steps = 3, first.out_dir = dir.path("split");
  std::vector<double> head = training::run_copy_task(first, task, log).losses;
  training::TrainerOptions rest = o;
  rest.out_dir = dir.path("split"), rest.resume = dir.path("split/last.safetensors");
  std::vector<double> tail = training::run_copy_task(rest, task, log).losses;

  head.insert(head.end(), tail.begin(), tail.end());
  ASSERT_EQ(head.size(), straight.size());
  for (size_t i = 0; i < straight.size(); ++i) EXPECT_EQ(head[i], straight[i]) << "step " << i + 1;
  testing::expect_same_checkpoint_tensors(dir.path("straight/last.safetensors"), dir.path("split/last.safetensors"));
}

// The simulated device (tensor/device.h) runs the CPU's kernels but lets no code above
// them touch its memory: a run there, resumed there, ends with the CPU's weights bit for
// bit, so nothing in training assumes host memory.
TEST(CopyTask, TrainsOnTheSimulatedDeviceAsOnTheCpu) {
  testing::TempDir dir;
  CopyTask task;
  task.model = R"({"d_model": 32, "d_ff": 64, "heads": 2})";
  task.samples = 2, task.batch = 8;
  TrainingOptions o = CopyTask::training_defaults();
  o.max_steps = 6;
  testing::expect_the_simulated_device_trains_and_resumes_as_the_cpu(dir.path(""), o, task);
}

// tfm::train's stop token ends the run after its current step, saved; it resumes from there.
TEST(CopyTask, AStopRequestEndsTheRunAfterItsStepAndSavesIt) {
  testing::TempDir dir;
  CopyTask task;
  task.model = R"({"d_model": 32, "d_ff": 64, "heads": 2})";
  task.samples = 1, task.batch = 4;
  TrainingOptions o = CopyTask::training_defaults();
  o.out_dir = dir.path("run"), o.max_steps = 50;
  std::stop_source stop;
  stop.request_stop();  // before the first step: the run stops after it
  std::ostringstream log;
  TrainingResult r = tfm::train(o, task, stop.get_token(), &log);
  EXPECT_TRUE(r.stopped) << log.str();
  EXPECT_EQ(r.steps, 1);
  EXPECT_TRUE(r.metrics.empty()) << "a stopped run does not validate";
  ASSERT_TRUE(std::filesystem::exists(dir.path("run/last.safetensors"))) << log.str();
  o.resume = dir.path("run/last.safetensors"), o.max_steps = 3;
  r = tfm::train(o, task, {}, &log);
  EXPECT_FALSE(r.stopped) << log.str();
  EXPECT_EQ(r.steps, 3);
  EXPECT_EQ(r.score_name, "copied");
  ASSERT_EQ(r.metrics.size(), 1u);
  EXPECT_EQ(r.metrics[0].first, "copied");
  EXPECT_NE(r.report.find("sequences copied exactly"), std::string::npos) << r.report;
}

// A small GPT (its output tied to the token embedding), initialised from `seed`.
std::unique_ptr<models::GPT> small_gpt() {
  models::StackConfig c;
  c.family = "gpt", c.vocab = 40, c.d_model = 16, c.heads = 2, c.d_ff = 32, c.layers = 2, c.max_len = 8;
  auto m = std::make_unique<models::GPT>(c);
  Rng rng(5);
  m->init_parameters(rng);
  return m;
}

void backward_of_a_batch(models::GPT& m) {
  const models::Tokens x{{1, 5, 9, 3, 7, 2, 8, 30}, 2, 4};
  autograd::backward(ops::cross_entropy(ops::reshape(m.forward(x), {-1, 40}), Tensor::from_values<int32_t>({5, 9, 3, 7, 2, 8, 30, 11}), 0.0f, -1));
}

TEST(FlatParameters, ParametersAndGradientsAreViewsOfTwoBuffersInReverseOrder) {
  const auto flat_model = small_gpt(), plain = small_gpt();
  const auto named = plain->named_parameters();
  const nn::FlatParameters& flat = flat_model->flatten_parameters();
  EXPECT_EQ(&flat_model->flatten_parameters(), &flat) << "flattening twice moves nothing";
  ASSERT_EQ(flat.entries.size(), named.size()) << "tied parameters appear once";
  ASSERT_GE(flat.values.numel(), plain->num_parameters());
  int64_t offset = 0;
  for (size_t i = 0; i < named.size(); ++i) {
    const nn::FlatParameters::Entry& e = flat.entries[i];
    const auto& [name, value] = named[named.size() - 1 - i];  // the output layers' parameters first
    EXPECT_EQ(e.name, name);
    EXPECT_EQ(e.offset, offset);
    EXPECT_EQ(e.param.data(), flat.values.data() + offset) << name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(e.param.data()) % 64, 0u) << name << " starts on a 64-byte boundary";
    EXPECT_TENSOR_NEAR(name, e.param, value, 0.0);
    offset += (value.numel() + 15) / 16 * 16;
  }
  backward_of_a_batch(*flat_model);
  backward_of_a_batch(*plain);
  for (size_t i = 0; i < named.size(); ++i) {
    const nn::FlatParameters::Entry& e = flat.entries[i];
    ASSERT_TRUE(e.param.grad().defined()) << e.name;
    EXPECT_EQ(e.param.grad().data(), flat.grads.data() + e.offset) << e.name;
    EXPECT_TENSOR_NEAR(e.name + " gradient", e.param.grad(), named[named.size() - 1 - i].second.grad(), 0.0);
  }
  int64_t covered = 0;
  const auto buckets = flat.buckets(300);
  for (const auto& [begin, end] : buckets) {
    EXPECT_EQ(begin, covered);
    covered = end;
  }
  EXPECT_EQ(covered, flat.entries.back().offset + flat.entries.back().param.numel());
  EXPECT_GT(buckets.size(), 4u);
}

// A job of one process that records the sums it is asked for.
class RecordingJob : public dist::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void start_sum(float* data, int64_t n) override { buckets.emplace_back(data, data + n); }
  void wait() override {}
  void sum(std::vector<double>&) override {}
  std::vector<std::string> all_gather(const std::string& mine) override { return {mine}; }
  void reduce_scatter_sum(float*, const std::vector<int64_t>&) override {}
  void all_gather_parts(float*, const std::vector<int64_t>&) override {}
  std::vector<std::vector<float>> buckets;  // each sum's data as it was handed over
};

// The Trainer hands every bucket of the flat gradient buffer to the reduction, in
// order, before clipping; a reduction that changes nothing changes no loss.
TEST(FlatParameters, TheTrainerReducesEveryBucketOfEveryStep) {
  testing::TempDir dir;
  CopyTask task;
  task.model = R"({"d_model": 32, "d_ff": 64, "heads": 2})";
  task.samples = 0, task.batch = 8;
  training::TrainerOptions o = CopyTask::training_defaults();
  o.max_steps = 4, o.out_dir = dir.path("plain");
  std::ostringstream log;
  const std::vector<double> plain = training::run_copy_task(o, task, log).losses;
  RecordingJob job;
  o.out_dir = dir.path("reduced"), o.bucket_mb = 5000 * 4.0 / (1 << 20), o.comm = &job;
  const std::vector<double> reduced = training::run_copy_task(o, task, log).losses;
  std::vector<int64_t> sizes;
  for (const auto& bucket : job.buckets) sizes.push_back(static_cast<int64_t>(bucket.size()));
  ASSERT_EQ(reduced.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i)  // summed, then divided: rounding apart
    EXPECT_NEAR(reduced[i], plain[i], 1e-5 * plain[i]) << "step " << i + 1;
  int64_t floats = 0;
  for (int64_t n : sizes) floats += n;
  models::TransformerConfig config = training::default_copy_model();
  config.d_model = 32, config.d_ff = 64, config.heads = 2;
  models::EncoderDecoder model(config);
  const nn::FlatParameters::Entry& last = model.flatten_parameters().entries.back();
  EXPECT_EQ(floats, 4 * (last.offset + last.param.numel())) << "each step's buckets cover the parameters once";
  EXPECT_GT(sizes.size(), 4u * 3);
}

// One weight w; batch 0 has one token of loss 3w, batch 1 three tokens of loss w each.
class TokenCountTask : public training::TrainingTask {
 public:
  struct OneWeight : nn::Module {
    Tensor w = Tensor::zeros({1});
    OneWeight() { register_parameter("w", w); }
  };
  nn::Module& model() override { return model_; }
  void init_parameters(Rng&) override { model_.w.fill(1.0f); }
  io::Checkpoint describe() const override { return {"test", "{}", {}, "", {}}; }
  int64_t begin_epoch(int64_t, uint64_t) override { return 2; }
  BatchLoss batch_loss(int64_t i) override {
    const int64_t tokens = i == 0 ? 1 : 3;
    return {ops::sum(ops::scale(model_.w, i == 0 ? 3.0f : 1.0f)), tokens, tokens};
  }
  training::Validation validate() override { return {{{"none", 0.0}}, "none"}; }

 private:
  OneWeight model_;
};

// With --accumulate, a step's loss is the mean over all its tokens (here (3 + 1 + 1 + 1) / 4),
// not the mean of its batches' means ((3 + 1) / 2); the reduction sees the summed gradient.
TEST(Trainer, AccumulatedBatchesAreAveragedOverTheirTokens) {
  testing::TempDir dir;
  training::TrainerOptions o;
  o.out_dir = dir.path("run"), o.accumulate = 2, o.max_steps = 1, o.log_every = 1, o.clip_norm = 0;
  RecordingJob job;
  o.comm = &job;
  std::ostringstream log;
  training::Trainer trainer(o, log);
  TokenCountTask task;
  ASSERT_FALSE(trainer.run(task).stopped) << log.str();
  ASSERT_EQ(job.buckets.size(), 1u);
  EXPECT_EQ(job.buckets[0], std::vector<float>{6.0f}) << "d/dw of the summed loss 3w + w + w + w";
  const std::string metrics = testing::read_file(dir.path("run/metrics.jsonl"));
  EXPECT_NE(metrics.find("\"train_loss\":1.5"), std::string::npos) << metrics;
}

TEST(Schedule, NoamWarmsUpThenDecays) {
  // factor * d^-0.5 * min(step^-0.5, step * warmup^-1.5): linear rise, peak at warmup, then 1/sqrt(step).
  EXPECT_FLOAT_EQ(training::noam_lr(1, 512, 1.0f, 4000), static_cast<float>(std::pow(512.0, -0.5) * std::pow(4000.0, -1.5)));
  EXPECT_FLOAT_EQ(training::noam_lr(4000, 512, 1.0f, 4000), static_cast<float>(std::pow(512.0, -0.5) * std::pow(4000.0, -0.5)));
  EXPECT_GT(training::noam_lr(4000, 512, 1.0f, 4000), training::noam_lr(3999, 512, 1.0f, 4000));
  EXPECT_GT(training::noam_lr(4000, 512, 1.0f, 4000), training::noam_lr(4001, 512, 1.0f, 4000));
  EXPECT_EQ(training::noam_lr(0, 512, 1.0f, 4000), training::noam_lr(1, 512, 1.0f, 4000));
}

TEST(ClipGradNorm, ScalesToTheGlobalNorm) {
  // Gradients (3, 4) and (12) in one flat buffer: global norm 13.
  Tensor grads = Tensor::from_vector({3}, {3, 4, 12});
  EXPECT_EQ(training::clip_grad_norm(grads, 6.5).to_vector(), (std::vector<float>{169, 0})) << "the sum of squares before clipping";
  EXPECT_NEAR(grads.data()[0], 1.5, 1e-5);
  EXPECT_NEAR(grads.data()[2], 6.0, 1e-5);
  EXPECT_NEAR(training::clip_grad_norm(grads, 100.0).to_vector()[0], 42.25, 1e-5) << "below the bound: left as they are";
  EXPECT_NEAR(grads.data()[2], 6.0, 1e-5);
}

}  // namespace
}  // namespace tfm
