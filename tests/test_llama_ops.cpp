// The Llama family's pieces (RMS norm, rotary embeddings in both layouts and with
// linear and llama3 scaling, grouped-query attention) against what transformers'
// own code computes (tests/reference/make_llama_op_fixtures.py).
#include <gtest/gtest.h>

#include <string>

#include "autograd/autograd.h"
#include "io/safetensors.h"
#include "ops/attention.h"
#include "ops/layer_norm.h"
#include "ops/rotary.h"
#include "support/compare.h"
#include "support/fixture.h"
#include "tensor/error.h"

namespace tfm {
namespace {

constexpr double kTol = 1e-5;  // relative to the reference's largest magnitude

class LlamaOps : public ::testing::Test {
 protected:
  void SetUp() override { file_ = io::read_safetensors(testing::fixture_path("llama_ops.safetensors")); }
  const Tensor& get(const std::string& name) const {
    const Tensor* t = file_.find(name);
    if (!t) throw Error("llama_ops.safetensors has no " + name);
    return *t;
  }
  autograd::NoGradGuard no_grad_;
  io::SafeTensors file_;
};

TEST_F(LlamaOps, RmsNormIsLlamaRMSNorm) {
  EXPECT_TENSOR_NEAR("rms.y", ops::rms_norm(get("rms.x"), get("rms.weight"), 1e-6f), get("rms.y"), kTol);
}

// Heads of 8 at rope_theta 500: Hugging Face's half-split pairs, plain and with linear
// scaling, and Meta's interleaved ones.
TEST_F(LlamaOps, RotaryIsTransformersAndMetas) {
  ops::Rope rope;
  rope.theta = 500.0;
  const Tensor &x = get("rope.x"), &positions = get("rope.positions");
  EXPECT_TENSOR_NEAR("rope.half", ops::rotary(x, positions, ops::rotary_frequencies(8, rope), ops::RotaryLayout::half), get("rope.half"), kTol);
  EXPECT_TENSOR_NEAR("rope.interleaved", ops::rotary(x, positions, ops::rotary_frequencies(8, rope), ops::RotaryLayout::interleaved),
                     get("rope.interleaved"), kTol);
  rope.scaling = {"linear", 2.0};
  EXPECT_TENSOR_NEAR("rope.linear", ops::rotary(x, positions, ops::rotary_frequencies(8, rope), ops::RotaryLayout::half), get("rope.linear"),
                     kTol);
}

// Llama 3.1's rope_scaling: low frequencies divided by 8, high ones kept, those between blended.
TEST_F(LlamaOps, Llama3FrequenciesAreTransformers) {
  ops::Rope rope;
  rope.theta = 500000.0, rope.scaling = {"llama3", 8.0, 1.0, 4.0, 8192};
  EXPECT_TENSOR_NEAR("rope.llama3.freq", ops::rotary_frequencies(128, rope), get("rope.llama3.freq"), kTol);
}

TEST_F(LlamaOps, GroupedQueryAttentionIsRepeatKv) {
  ops::AttentionMask causal;
  causal.causal = true;
  EXPECT_TENSOR_NEAR("gqa.out", ops::attention(get("gqa.q"), get("gqa.k"), get("gqa.v"), {4, 2}, causal), get("gqa.out"), kTol);
}

TEST(LlamaOpsErrors, UnknownScalingAndUnsharedHeadsAreRefusedByName) {
  ops::Rope rope;
  rope.scaling.type = "yarn";
  EXPECT_THROW(
      {
        try {
          ops::rotary_frequencies(8, rope);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("rope_scaling type 'yarn' is not supported"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  const Tensor q = Tensor::zeros({1, 2, 12}), kv = Tensor::zeros({1, 2, 8});
  EXPECT_THROW(ops::attention(q, kv, kv, {3, 2}, ops::AttentionMask()), Error);
}

}  // namespace
}  // namespace tfm
