// The whole encoder-decoder against PyTorch's nn.Transformer (fixtures from
// tests/reference/make_fixtures.py): every sublayer's output, the loss, every
// parameter's gradient, and the losses of 5 Adam + warm-up + clipping steps.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "autograd/autograd.h"
#include "nn/trace.h"
#include "ops/convert.h"
#include "ops/loss.h"
#include "ops/shape.h"
#include "support/compare.h"
#include "support/fixture.h"
#include "train/seq2seq.h"
#include "train/step.h"

namespace tfm {
namespace {

constexpr double kForwardTol = 1e-5;  // relative to each tensor's largest magnitude
constexpr double kGradTol = 1e-4;
constexpr double kLossTol = 1e-5;

class ReferenceTransformer : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceTransformer, ForwardLossAndGradientsMatchPyTorch) {
  testing::ModelFixture f = testing::load_model_fixture("model_" + GetParam() + ".safetensors");
  auto model = f.make_model();
  models::Tokens src = f.tokens("input.src"), tgt_in = f.tokens("input.tgt_in"), tgt_out = f.tokens("input.tgt_out");

  nn::TraceRecorder recorder;
  Tensor logits = model->generator->logits(model->forward(src, tgt_in));
  Tensor loss = ops::cross_entropy(ops::reshape(logits, {-1, f.config.tgt_vocab}), ops::reshape(tgt_out.ids, {-1}), 0.1f, f.config.pad_id);

  testing::WorstDifference worst_forward, worst_grad;
  EXPECT_EQ(testing::expect_traces_match(f, recorder, kForwardTol, worst_forward), 33)
      << "every sublayer of 2+2 layers, both stacks' norms, positions and generator";
  EXPECT_TENSOR_NEAR("loss", loss, f.get("loss"), kLossTol);
  autograd::backward(loss);
  testing::expect_grads_match(f, *model, kGradTol, worst_grad);
  std::cout << "  " << GetParam() << " forward: " << worst_forward.summary() << "\n  " << GetParam()
            << " gradients: " << worst_grad.summary() << "\n";
}

TEST_P(ReferenceTransformer, FiveAdamStepsMatchPyTorch) {
  testing::ModelFixture f = testing::load_model_fixture("model_" + GetParam() + ".safetensors");
  auto settings = nlohmann::json::parse(f.file.metadata.at("fixture.train"));
  auto model = f.make_model();
  // The Trainer's step, Adam with the paper's defaults: betas (0.9, 0.98), eps 1e-9.
  training::OptimizationStep optimization(*model, {training::AdamOptions{}, settings["clip"].get<double>()}, std::cout);
  training::Seq2SeqBatch batch{f.tokens("input.src"), f.tokens("input.tgt_in"), f.tokens("input.tgt_out")};
  const float smoothing = settings["smoothing"].get<float>();
  std::vector<float> expected = f.get("train.losses").to_vector();
  double worst = 0.0;
  for (size_t step = 1; step <= expected.size(); ++step) {
    const double loss =
        optimization.gradients([&](int64_t) { return training::BatchLoss{training::seq2seq_loss(*model, batch, smoothing), 1}; }, 0, 1).loss;
    optimization.update(training::noam_lr(static_cast<int64_t>(step), f.config.d_model, settings["factor"].get<float>(), settings["warmup"].get<int64_t>()));
    EXPECT_NEAR(loss, expected[step - 1], kLossTol * std::abs(expected[step - 1])) << "step " << step;
    worst = std::max(worst, std::abs(loss - expected[step - 1]) / std::abs(expected[step - 1]));
  }
  std::cout << "  " << GetParam() << " 5 Adam steps: worst relative loss difference " << worst << "\n";
}

// Training's forward runs the encoder on the source's real tokens only; inference
// (encode, then decode) on the padded batch. Both must give the decoder the same
// output, padded target rows included.
TEST_P(ReferenceTransformer, PackedTrainingForwardEqualsPaddedEncodeThenDecode) {
  testing::ModelFixture f = testing::load_model_fixture("model_" + GetParam() + ".safetensors");
  auto model = f.make_model();
  model->eval();
  models::Tokens src = f.tokens("input.src"), tgt_in = f.tokens("input.tgt_in");
  ASSERT_LT(models::unpad(src, f.config.pad_id).positions.numel(), src.rows() * src.cols()) << "the fixture's sources should have padding";
  autograd::NoGradGuard no_grad;
  const ops::AttentionMask src_mask = models::padding_mask(src, f.config.pad_id, Device::CPU);
  const Tensor padded = model->decode(model->encode(src, src_mask), src_mask, tgt_in, models::padding_mask(tgt_in, f.config.pad_id, Device::CPU, true));
  EXPECT_TENSOR_NEAR("decoder output", model->forward(src, tgt_in), padded, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Variants, ReferenceTransformer,
                         ::testing::Values("post_relu", "post_gelu", "pre_relu", "pre_gelu", "pre_gelu_tied"));

TEST(ReferenceLosses, BothLabelSmoothingFormsMatchPyTorch) {
  io::SafeTensors f = io::read_safetensors(testing::fixture_path("losses.safetensors"));
  const Tensor targets = ops::to(*f.find("targets"), DType::i32);
  Tensor logits = f.find("logits")->clone();
  logits.set_requires_grad(true);
  Tensor ce = ops::cross_entropy(logits, targets, 0.1f, 0);
  autograd::backward(ce);
  EXPECT_TENSOR_NEAR("cross_entropy", ce, *f.find("cross_entropy"), 1e-6);
  EXPECT_TENSOR_NEAR("cross_entropy.grad", logits.grad(), *f.find("cross_entropy.grad"), 1e-6);

  logits.zero_grad();
  Tensor kl = ops::label_smoothing_kl(logits, targets, 0.1f, 0, f.find("kl.normalizer")->item());
  autograd::backward(kl);
  EXPECT_TENSOR_NEAR("kl", kl, *f.find("kl"), 1e-6);
  EXPECT_TENSOR_NEAR("kl.grad", logits.grad(), *f.find("kl.grad"), 1e-6);
}

}  // namespace
}  // namespace tfm
