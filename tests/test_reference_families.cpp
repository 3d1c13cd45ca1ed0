// The decoder-only (GPT) and Vision Transformer models against their PyTorch twins
// (tests/reference/model.py, fixtures from make_fixtures.py): every sublayer's
// output, the loss, every gradient, and 5 steps of AdamW + warm-up/cosine + clipping.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "autograd/autograd.h"
#include "models/gpt.h"
#include "models/vit.h"
#include "ops/loss.h"
#include "ops/shape.h"
#include "support/compare.h"
#include "support/fixture.h"
#include "train/trainer.h"

namespace tfm {
namespace {

constexpr double kForwardTol = 1e-5;  // relative to each tensor's largest magnitude
constexpr double kGradTol = 1e-4;
constexpr double kLossTol = 1e-5;

using LossOf = std::function<Tensor()>;

void expect_forward_and_gradients_match(const testing::ModelFixture& f, nn::Module& model, const LossOf& loss_of, int traces) {
  Tensor loss;
  testing::WorstDifference worst_forward, worst_grad;
  {
    nn::TraceRecorder recorder;
    loss = loss_of();
    EXPECT_EQ(testing::expect_traces_match(f, recorder, kForwardTol, worst_forward), traces);
  }
  EXPECT_TENSOR_NEAR("loss", loss, f.get("loss"), kLossTol);
  autograd::backward(loss);
  testing::expect_grads_match(f, model, kGradTol, worst_grad);
  std::cout << "  forward: " << worst_forward.summary() << "\n  gradients: " << worst_grad.summary() << "\n";
}

void expect_adamw_steps_match(const testing::ModelFixture& f, nn::Module& model, const LossOf& loss_of) {
  auto s = nlohmann::json::parse(f.file.metadata.at("fixture.train"));
  training::Schedule schedule{training::Schedule::Kind::Cosine, s["lr"].get<float>(), s["min_lr"].get<float>(), s["warmup"].get<int64_t>(),
                           s["decay_steps"].get<int64_t>(), 0};
  training::AdamOptions adam{0.0f, 0.9f, s["beta2"].get<float>(), 1e-8f, s["weight_decay"].get<float>(), /*decoupled=*/true};
  training::OptimizationStep optimization(model, {adam, s["clip"].get<double>()}, std::cout);  // the Trainer's step
  std::vector<float> expected = f.get("train.losses").to_vector();
  double worst = 0.0;
  for (size_t step = 1; step <= expected.size(); ++step) {
    const double got = optimization.gradients([&](int64_t) { return training::BatchLoss{loss_of(), 1}; }, 0, 1).loss;
    optimization.update(training::learning_rate(schedule, static_cast<int64_t>(step)));
    const double want = expected[step - 1];
    EXPECT_NEAR(got, want, kLossTol * std::abs(want)) << "step " << step;
    worst = std::max(worst, std::abs(got - want) / std::abs(want));
  }
  std::cout << "  5 AdamW steps: worst relative loss difference " << worst << "\n";
}

struct GptCase {
  testing::ModelFixture f = testing::load_model_fixture("gpt.safetensors");
  models::GPT model{models::StackConfig::from_json(f.config_json, "gpt fixture", "gpt")};
  models::Tokens ids = f.tokens("input.ids");
  GptCase() { f.load_weights(model); }
  Tensor loss() {  // next-token cross-entropy of ids[:, :-1] predicting ids[:, 1:]
    std::vector<int> x, y;
    for (int64_t r = 0; r < ids.rows(); ++r)
      for (int64_t c = 0; c + 1 < ids.cols(); ++c) x.push_back(ids.at(r, c)), y.push_back(ids.at(r, c + 1));
    const models::Tokens input(x, ids.rows(), ids.cols() - 1);
    return ops::cross_entropy(ops::reshape(model.forward(input), {-1, model.config().vocab}), Tensor::from_values(y), 0.0f, -1);
  }
};

TEST(ReferenceGPT, CausalTiedStackMatchesPyTorch) {
  GptCase c;
  expect_forward_and_gradients_match(c.f, c.model, [&] { return c.loss(); }, 13);
}

TEST(ReferenceGPT, FiveAdamWStepsMatchPyTorch) {
  GptCase c;
  expect_adamw_steps_match(c.f, c.model, [&] { return c.loss(); });
}

struct VitCase {
  testing::ModelFixture f = testing::load_model_fixture("vit.safetensors");
  models::ViT model{models::StackConfig::from_json(f.config_json, "vit fixture", "vit")};
  std::vector<int> labels;
  VitCase() {
    f.load_weights(model);
    for (float v : f.get("input.labels").to_vector()) labels.push_back(static_cast<int>(v));
  }
  Tensor loss() { return ops::cross_entropy(model.forward(f.get("input.images")), Tensor::from_values(labels), 0.0f, -1); }
};

TEST(ReferenceViT, ForwardAndBackwardMatchPyTorch) {
  VitCase c;
  expect_forward_and_gradients_match(c.f, c.model, [&] { return c.loss(); }, 14);
}

TEST(ReferenceViT, FiveAdamWStepsMatchPyTorch) {
  VitCase c;
  expect_adamw_steps_match(c.f, c.model, [&] { return c.loss(); });
}

}  // namespace
}  // namespace tfm
