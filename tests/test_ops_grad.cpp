// Every op's backward against central finite differences.
#include <gtest/gtest.h>
#include <algorithm>
#include <vector>
#include <limits>
#include <memory>
#include <iostream>
#include <cmath>
#include <cstring>

#include "autograd/autograd.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/layer_norm.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/linear_products.h"
#include "ops/reduce.h"
#include "ops/rotary.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "ops/cpu/rows.h"
#include "ops/cpu/vec_math.h"
#include "support/compare.h"
#include "support/gradcheck.h"
#include "tensor/rng.h"

namespace tfm {
namespace {

using testing::random_tensor;
using V = std::vector<Tensor>;
constexpr double kTol = 2e-3;

TEST(OpsGrad, Linear) {
  EXPECT_GRADCHECK([](const V& x) { return ops::linear(x[0], x[1], x[2], ops::LinearProducts::f32()); },
                   (V{random_tensor({2, 3, 4}, 1), random_tensor({5, 4}, 2), random_tensor({5}, 3)}), kTol);
  EXPECT_GRADCHECK([](const V& x) { return ops::linear(x[0], x[1], Tensor(), ops::LinearProducts::f32()); }, (V{random_tensor({3, 4}, 1), random_tensor({2, 4}, 2)}), kTol);
}

// How many of linear(x, w, b)'s outputs fall on each side of the ReLU's kink, and how
// close to it the nearest lies: the ReLU tests below are void with one side empty, and
// finite differences are wrong for an output within their step of 0.
struct KinkSides {
  int negative = 0, positive = 0;
  float nearest = std::numeric_limits<float>::infinity();
};
KinkSides kink_sides(const V& x) {
  autograd::NoGradGuard no_grad;
  KinkSides k;
  for (float v : ops::linear(x[0], x[1], x[2], ops::LinearProducts::f32()).to_vector()) {
    (v < 0.0f ? k.negative : k.positive)++;
    k.nearest = std::min(k.nearest, std::fabs(v));
  }
  return k;
}

TEST(OpsGrad, LinearRelu) {
  const V inputs{random_tensor({2, 3, 4}, 1), random_tensor({5, 4}, 2), random_tensor({5}, 3)};
  const KinkSides k = kink_sides(inputs);
  ASSERT_GT(k.negative, 0);
  ASSERT_GT(k.positive, 0);
  ASSERT_GT(k.nearest, 0.01f) << "an output within the finite differences' reach of the kink";
  EXPECT_GRADCHECK([](const V& x) { return ops::linear_relu(x[0], x[1], x[2], ops::LinearProducts::f32()); }, inputs, kTol);
}

// The fused op is relu(linear): the same output and gradients, bit for bit, in each
// precision that trains.
TEST(OpsGrad, LinearReluEqualsLinearThenRelu) {
  for (const ops::Precision precision : {ops::Precision::f32, ops::Precision::bf16}) {
    const ops::LinearProducts products(precision);
    V fused{random_tensor({40, 24}, 1), random_tensor({37, 24}, 2), random_tensor({37}, 3)}, plain;
    const KinkSides k = kink_sides(fused);
    ASSERT_TRUE(k.negative > 0 && k.positive > 0) << "outputs on one side of the kink only";
    for (Tensor& t : fused) plain.push_back(t.clone().set_requires_grad(true)), t.set_requires_grad(true);
    const Tensor g = random_tensor({40, 37}, 4);
    Tensor a = ops::linear_relu(fused[0], fused[1], fused[2], products);
    Tensor b = ops::relu(ops::linear(plain[0], plain[1], plain[2], products));
    autograd::backward(ops::sum(ops::mul(a, g)));
    autograd::backward(ops::sum(ops::mul(b, g)));
    const std::string p = ops::to_string(precision);
    EXPECT_TENSOR_NEAR(p + " output", a, b, 0.0);
    for (size_t i = 0; i < fused.size(); ++i) EXPECT_TENSOR_NEAR(p + " grad " + std::to_string(i), fused[i].grad(), plain[i].grad(), 0.0);
  }
}

TEST(OpsGrad, Matmul) {
  EXPECT_GRADCHECK([](const V& x) { return ops::matmul(x[0], x[1]); }, (V{random_tensor({2, 3, 4}, 1), random_tensor({2, 4, 5}, 2)}), kTol);
}

TEST(OpsGrad, BroadcastingAddMulScale) {
  EXPECT_GRADCHECK([](const V& x) { return ops::add(x[0], x[1]); }, (V{random_tensor({2, 3, 4}, 1), random_tensor({3, 4}, 2)}), kTol);
  EXPECT_GRADCHECK([](const V& x) { return ops::add(x[0], x[1]); }, (V{random_tensor({2, 1, 4}, 1), random_tensor({3, 1}, 2)}), kTol);
  EXPECT_GRADCHECK([](const V& x) { return ops::mul(x[0], x[1]); }, (V{random_tensor({2, 3, 4}, 1), random_tensor({2, 1, 4}, 2)}), kTol);
  EXPECT_GRADCHECK([](const V& x) { return ops::scale(x[0], -2.5f); }, (V{random_tensor({3, 4}, 1)}), kTol);
}

TEST(OpsGrad, ShapeOps) {
  EXPECT_GRADCHECK([](const V& x) { return ops::mul(ops::reshape(x[0], {4, 6}), random_tensor({4, 6}, 9)); }, (V{random_tensor({2, 3, 4}, 1)}), kTol);
  EXPECT_GRADCHECK([](const V& x) { return ops::mul(ops::permute(x[0], {2, 0, 1}), random_tensor({4, 2, 3}, 9)); }, (V{random_tensor({2, 3, 4}, 1)}), kTol);
  EXPECT_GRADCHECK([](const V& x) { return ops::contiguous(ops::transpose(x[0], 0, 2)); }, (V{random_tensor({2, 3, 4}, 1)}), kTol);
  EXPECT_GRADCHECK([](const V& x) { return ops::mul(ops::slice(x[0], 1, 1, 3), random_tensor({2, 2, 4}, 9)); }, (V{random_tensor({2, 3, 4}, 1)}), kTol);
  EXPECT_GRADCHECK([](const V& x) { return ops::scale(ops::concat({x[0], x[1]}, 1), 1.5f); },
                   (V{random_tensor({2, 3, 4}, 1), random_tensor({2, 2, 4}, 2)}), kTol);
  // Slices add their gradients into one buffer per input (autograd's AccumulateFn):
  // overlapping slices of a leaf; slices of two op outputs whose gradients arrive
  // first as one shared tensor (add hands its gradient to both inputs), which the
  // slices must not add into in place.
  EXPECT_GRADCHECK([](const V& x) { return ops::add(ops::slice(x[0], 1, 0, 2), ops::slice(x[0], 1, 1, 3)); }, (V{random_tensor({2, 3, 4}, 1)}), kTol);
  EXPECT_GRADCHECK(
      [](const V& x) {
        Tensor y = ops::scale(x[0], 2.0f);
        Tensor v = ops::scale(x[0], -3.0f);
        return ops::concat({ops::add(ops::slice(y, 1, 0, 2), ops::slice(v, 1, 1, 3)), ops::add(y, v)}, 1);
      },
      (V{random_tensor({2, 3, 4}, 1)}), kTol);
  // A row gathered twice gets both gradients.
  EXPECT_GRADCHECK([](const V& x) { return ops::mul(ops::gather_rows(x[0], Tensor::from_values<int64_t>({2, 0, 2})), random_tensor({3, 2, 4}, 9)); },
                   (V{random_tensor({3, 2, 4}, 1)}), kTol);
}

TEST(OpsGrad, Activations) {
  // Keep ReLU inputs away from the kink at 0, where finite differences are meaningless.
  Tensor x = random_tensor({3, 5}, 1);
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] += x.data()[i] >= 0 ? 0.1f : -0.1f;
  EXPECT_GRADCHECK([](const V& v) { return ops::relu(v[0]); }, (V{x}), kTol);
  EXPECT_GRADCHECK([](const V& v) { return ops::gelu(v[0]); }, (V{random_tensor({3, 5}, 2, -3, 3)}), kTol);
  EXPECT_GRADCHECK([](const V& v) { return ops::gelu_tanh(v[0]); }, (V{random_tensor({3, 5}, 2, -3, 3)}), kTol);
  EXPECT_GRADCHECK([](const V& v) { return ops::silu(v[0]); }, (V{random_tensor({3, 5}, 2, -3, 3)}), kTol);
  EXPECT_GRADCHECK([](const V& v) { return ops::tanh(v[0]); }, (V{random_tensor({3, 5}, 2, -3, 3)}), kTol);
}

TEST(OpsGrad, Dropout) {
  // The mask is a function of the key, so finite differences see the same mask.
  EXPECT_GRADCHECK([](const V& x) { return ops::dropout(x[0], 0.3f, 77); }, (V{random_tensor({4, 6}, 1)}), kTol);
}

// The mask is the documented hash of (key, element index) whichever kernel makes it
// (8 lanes at a time with AVX-512, one at a time otherwise): values at any offset,
// with a ragged tail, special values included.
TEST(OpsGrad, DropoutKernelIsTheHashOfKeyAndIndex) {
  Tensor x = random_tensor({1003}, 5);
  x.data()[3] = std::numeric_limits<float>::quiet_NaN(), x.data()[4] = -0.0f, x.data()[5] = std::numeric_limits<float>::infinity();
  for (const int64_t first : {int64_t{0}, int64_t{13}, int64_t{1} << 40}) {
    std::vector<float> out(1003);
    ops::cpu::dropout_row(x.data(), out.data(), 1003, 0.3f, 1234, first);
    for (int64_t i = 0; i < 1003; ++i) {
      const float expected = hash_uniform(1234, first + i) < 0.3f ? 0.0f : x.data()[i] * (1.0f / 0.7f);
      ASSERT_EQ(std::memcmp(&out[i], &expected, sizeof(float)), 0) << "element " << i << " from " << first;
    }
  }
}

// The fused feed-forward activation: the same values and gradients as its two ops,
// bit for bit, over more elements than one parallel block.
TEST(OpsGrad, ReluDropoutIsDropoutOfRelu) {
  Tensor x = random_tensor({3, 5}, 1);
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] += x.data()[i] >= 0 ? 0.1f : -0.1f;
  EXPECT_GRADCHECK([](const V& v) { return ops::relu_dropout(v[0], 0.3f, 77); }, (V{x}), kTol);
  Tensor a = random_tensor({70, 1000}, 2), b = a.clone();
  a.set_requires_grad(true), b.set_requires_grad(true);
  Tensor g = random_tensor({70, 1000}, 3);
  Tensor fused = ops::relu_dropout(a, 0.25f, 9), twice = ops::dropout(ops::relu(b), 0.25f, 9);
  ASSERT_EQ(std::memcmp(fused.data(), twice.data(), sizeof(float) * fused.numel()), 0);
  autograd::backward(ops::sum(ops::mul(fused, g)));
  autograd::backward(ops::sum(ops::mul(twice, g)));
  EXPECT_EQ(std::memcmp(a.grad().data(), b.grad().data(), sizeof(float) * a.numel()), 0);
}

TEST(OpsGrad, SoftmaxAndLogSoftmax) {
  EXPECT_GRADCHECK([](const V& x) { return ops::softmax(x[0]); }, (V{random_tensor({3, 7}, 1, -2, 2)}), kTol);
  EXPECT_GRADCHECK([](const V& x) { return ops::log_softmax(x[0]); }, (V{random_tensor({3, 7}, 1, -2, 2)}), kTol);
}

// The vectorised exp behind softmax and the losses: within 2 ulp of std::exp over the
// whole float range it is used on, and std::exp's answers for the special values.
TEST(VecMath, ExpMatchesStdExp) {
  std::vector<float> x;
  for (float v = -104.0f; v < 90.0f; v += 0.0137f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.5f, 88.8f, -87.3f, -88.5f}) x.push_back(v);
  const float inf = std::numeric_limits<float>::infinity();
  x.insert(x.end(), {inf, -inf, std::nanf("")});
  while (x.size() % 8) x.push_back(0.0f);
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); i += 8) _mm256_storeu_ps(y.data() + i, ops::cpu::vec::exp8(_mm256_loadu_ps(x.data() + i)));
  float worst_ulp = 0.0f;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = std::exp(x[i]);
    if (std::isnan(want) || std::isinf(want) || want == 0.0f) {
      EXPECT_TRUE(std::isnan(want) ? std::isnan(y[i]) : y[i] == want) << "exp(" << x[i] << ") = " << y[i] << ", not " << want;
      continue;
    }
    if (want < std::numeric_limits<float>::min()) {  // subnormal results: flushed or close to 0 is enough
      EXPECT_LE(y[i], 2 * std::numeric_limits<float>::min()) << x[i];
      continue;
    }
    worst_ulp = std::max(worst_ulp, std::abs(y[i] - want) / (std::nextafter(want, inf) - want));
  }
  std::cout << "  worst error of exp8: " << worst_ulp << " ulp\n";
  EXPECT_LE(worst_ulp, 2.0f);
}

// exp_shifted's AVX-512 path (rows of 64 or more, where the CPU has it) gives exp8's
// values element for element, over whole vectors and ragged tails, and their sum up
// to the order of adding.
TEST(VecMath, ExpShiftedGivesExp8sValuesOnEitherPath) {
  if (!ops::cpu::cpu_isa().avx512) GTEST_SKIP() << "this CPU has no AVX-512: exp_shifted always takes the AVX2 path";
  std::vector<float> x;
  for (float v = -100.0f; v < 10.0f; v += 0.0371f) x.push_back(v);
  x.insert(x.end(), {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), std::nanf("")});
  for (int64_t n : {int64_t{64}, int64_t{77}, int64_t{1000}, static_cast<int64_t>(x.size())}) {
    std::vector<float> y(static_cast<size_t>(n)), want(static_cast<size_t>(n + 8));
    const float shift = 1.5f;
    const float sum = ops::cpu::vec::exp_shifted(x.data(), y.data(), n, shift);
    double want_sum = 0.0;
    for (int64_t j = 0; j < n; j += 8) {
      alignas(32) float in[8];
      for (int c = 0; c < 8; ++c) in[c] = j + c < n ? x[j + c] - shift : 0.0f;
      _mm256_storeu_ps(want.data() + j, ops::cpu::vec::exp8(_mm256_load_ps(in)));
    }
    for (int64_t j = 0; j < n; ++j) {
      if (std::isnan(want[j])) {
        EXPECT_TRUE(std::isnan(y[j])) << "n=" << n << " x=" << x[j];
        continue;
      }
      ASSERT_EQ(y[j], want[j]) << "n=" << n << " x=" << x[j];
      want_sum += want[j];
    }
    if (n < static_cast<int64_t>(x.size())) EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum) << "n=" << n;
    EXPECT_TRUE(ops::cpu::vec::exp_shifted(x.data(), nullptr, n, shift) == sum || std::isnan(sum)) << "the sum alone, n=" << n;
  }
}

TEST(OpsGrad, LayerNorm) {
  EXPECT_GRADCHECK([](const V& x) { return ops::layer_norm(x[0], x[1], x[2]); },
                   (V{random_tensor({2, 3, 8}, 1, -2, 2), random_tensor({8}, 2, 0.5f, 1.5f), random_tensor({8}, 3)}), kTol);
}

TEST(OpsGrad, RmsNorm) {
  EXPECT_GRADCHECK([](const V& x) { return ops::rms_norm(x[0], x[1], 1e-6f); },
                   (V{random_tensor({2, 3, 8}, 1, -2, 2), random_tensor({8}, 2, 0.5f, 1.5f)}), kTol);
}

// Rotary embeddings of a slice of a fused projection, in both layouts, with llama3's
// scaled frequencies (heads of 8: pairs on each side of its bounds and between them).
TEST(OpsGrad, Rotary) {
  ops::Rope rope;
  rope.theta = 500.0, rope.scaling = {"llama3", 4.0, 1.0, 2.0, 40};
  const Tensor freq = ops::rotary_frequencies(8, rope);
  const Tensor positions = Tensor::from_values<int32_t>({2, 3}, {0, 1, 2, 7, 3, 11});
  for (const ops::RotaryLayout layout : {ops::RotaryLayout::half, ops::RotaryLayout::interleaved})
    EXPECT_GRADCHECK([&](const V& x) { return ops::rotary(ops::slice(x[0], 2, 0, 16), positions, freq, layout); },
                     (V{random_tensor({2, 3, 24}, 1)}), kTol);
}

TEST(OpsGrad, SumMean) {
  EXPECT_GRADCHECK([](const V& x) { return ops::sum(x[0]); }, (V{random_tensor({3, 4}, 1)}), kTol);
  EXPECT_GRADCHECK([](const V& x) { return ops::mean(x[0]); }, (V{random_tensor({3, 4}, 1)}), kTol);
}

TEST(OpsGrad, Embedding) {
  const Tensor ids = Tensor::from_values<int32_t>({2, 3}, {3, 0, 3, 1, 4, 4});  // repeated ids accumulate
  EXPECT_GRADCHECK([&](const V& x) { return ops::embedding(x[0], ids); }, (V{random_tensor({5, 4}, 1)}), kTol);
}

// ops::attention and ops::flash_attention (its FlashAttention-2 contract, which the GPU
// runs by default): the attention checks below take both.
using AttentionOp = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, ops::AttentionHeads, const ops::AttentionMask&, float, DropoutKey);
Tensor unfused_attention(const Tensor& q, const Tensor& k, const Tensor& v, ops::AttentionHeads heads, const ops::AttentionMask& mask,
                         float p, DropoutKey key) {
  return ops::attention(q, k, v, heads, mask, p, key);
}
const AttentionOp kAttentionOps[] = {unfused_attention, ops::flash_attention};

TEST(OpsGrad, AttentionWithMasksAndStridedInputs) {
  for (const AttentionOp attend : kAttentionOps) {
    SCOPED_TRACE(attend == ops::flash_attention ? "flash_attention" : "attention");
    ops::AttentionMask mask;
    mask.key_padding = testing::bool_tensor({2, 4}, {0, 0, 0, 1, 0, 0, 1, 1});  // batch 2, 4 keys
    for (bool causal : {false, true}) {
      mask.causal = causal;
      // q, k, v as slices of one fused projection, as in self-attention.
      EXPECT_GRADCHECK(
          [&](const V& x) {
            return attend(ops::slice(x[0], 2, 0, 6), ops::slice(x[0], 2, 6, 12), ops::slice(x[0], 2, 12, 18), 2, mask, 0.0f, {});
          },
          (V{random_tensor({2, 4, 18}, 1)}), kTol);
    }
    ops::AttentionMask pad_only;
    pad_only.key_padding = testing::bool_tensor({2, 3}, {0, 0, 1, 0, 0, 0});  // batch 2, 3 keys; 2 queries
    EXPECT_GRADCHECK([&](const V& x) { return attend(x[0], x[1], x[2], 3, pad_only, 0.25f, 99); },
                     (V{random_tensor({2, 2, 6}, 1), random_tensor({2, 3, 6}, 2), random_tensor({2, 3, 6}, 3)}), kTol);
    // Packed sequences (lengths 3, 1, 2) without padding: self-attention and, with
    // padded queries, encoder-decoder attention.
    ops::AttentionMask packed;
    packed.packed_queries = packed.packed_keys = std::make_shared<ops::PackedSequences>(std::vector<int64_t>{0, 3, 4}, std::vector<int64_t>{3, 1, 2});
    EXPECT_GRADCHECK([&](const V& x) { return attend(ops::slice(x[0], 2, 0, 6), ops::slice(x[0], 2, 6, 12), ops::slice(x[0], 2, 12, 18), 2, packed, 0.25f, 7); },
                     (V{random_tensor({1, 6, 18}, 1)}), kTol);
    packed.packed_queries = nullptr;
    EXPECT_GRADCHECK([&](const V& x) { return attend(x[0], x[1], x[2], 3, packed, 0.0f, {}); },
                     (V{random_tensor({3, 2, 6}, 1), random_tensor({1, 6, 6}, 2), random_tensor({1, 6, 6}, 3)}), kTol);
    // One query, as a decoding step has (its own forward path).
    EXPECT_GRADCHECK([&](const V& x) { return attend(x[0], x[1], x[2], 3, pad_only, 0.0f, {}); },
                     (V{random_tensor({2, 1, 6}, 1), random_tensor({2, 3, 6}, 2), random_tensor({2, 3, 6}, 3)}), kTol);
  }
}

// Grouped-query attention: 4 query heads over 2 K/V heads (and over 1: multi-query),
// as slices of one fused projection; with dropout; with packed sequences; and with more
// keys than the CPU's dot-product path takes (its GEMM path).
TEST(OpsGrad, GroupedQueryAttention) {
  for (const AttentionOp attend : kAttentionOps) {
    SCOPED_TRACE(attend == ops::flash_attention ? "flash_attention" : "attention");
    ops::AttentionMask causal;
    causal.causal = true;
    for (const int64_t kv_heads : {2, 1}) {
      const int64_t kv = 2 * kv_heads;  // K/V width: heads of 2 values
      EXPECT_GRADCHECK([&](const V& x) {
        return attend(ops::slice(x[0], 2, 0, 8), ops::slice(x[0], 2, 8, 8 + kv), ops::slice(x[0], 2, 8 + kv, 8 + 2 * kv), {4, kv_heads},
                              causal, 0.25f, 5);
      }, (V{random_tensor({2, 4, 8 + 2 * kv}, 1)}), kTol);
    }
    ops::AttentionMask packed;
    packed.packed_queries = packed.packed_keys = std::make_shared<ops::PackedSequences>(std::vector<int64_t>{0, 3}, std::vector<int64_t>{3, 2});
    EXPECT_GRADCHECK([&](const V& x) { return attend(x[0], x[1], x[2], {4, 2}, packed, 0.0f, {}); },
                     (V{random_tensor({1, 5, 8}, 1), random_tensor({1, 5, 4}, 2), random_tensor({1, 5, 4}, 3)}), kTol);
    EXPECT_GRADCHECK([&](const V& x) { return attend(x[0], x[1], x[2], {4, 2}, ops::AttentionMask(), 0.0f, {}); },
                     (V{random_tensor({1, 3, 8}, 1), random_tensor({1, 60, 4}, 2), random_tensor({1, 60, 4}, 3)}), kTol);
  }
}

TEST(OpsGrad, Losses) {
  const Tensor targets = Tensor::from_values<int32_t>({2, 0, 4, 1, 3, 0});  // 0 is padding
  EXPECT_GRADCHECK([&](const V& x) { return ops::cross_entropy(x[0], targets, 0.1f, 0); }, (V{random_tensor({6, 5}, 1, -2, 2)}), kTol);
  EXPECT_GRADCHECK([&](const V& x) { return ops::label_smoothing_kl(x[0], targets, 0.1f, 0, 4.0f); }, (V{random_tensor({6, 5}, 1, -2, 2)}),
                   kTol);
  EXPECT_GRADCHECK([&](const V& x) { return ops::linear_cross_entropy(x[0], x[1], x[2], targets, 0.1f, 0, ops::LinearProducts::f32()); },
                   (V{random_tensor({6, 4}, 1), random_tensor({5, 4}, 2), random_tensor({5}, 3)}), kTol);
  EXPECT_GRADCHECK([&](const V& x) { return ops::linear_cross_entropy(x[0], x[1], Tensor(), targets, 0.0f, -1, ops::LinearProducts::f32()); },
                   (V{random_tensor({6, 4}, 1), random_tensor({5, 4}, 2)}), kTol);
}

// The generator's fused loss equals linear + cross_entropy, loss and every gradient,
// over several row chunks (1,024 rows each), in f32 and bf16.
TEST(OpsGrad, LinearCrossEntropyEqualsLinearThenCrossEntropy) {
  std::vector<int> ids(2500);
  Rng rng(4);
  for (int& t : ids) t = static_cast<int>(rng.randint(0, 37));  // 0 is padding
  const Tensor targets = Tensor::from_values(ids);
  for (const ops::Precision precision : {ops::Precision::f32, ops::Precision::bf16}) {
    const ops::LinearProducts products(precision);
    V fused{random_tensor({2500, 24}, 1), random_tensor({37, 24}, 2), random_tensor({37}, 3)}, plain;
    for (Tensor& t : fused) plain.push_back(t.clone().set_requires_grad(true)), t.set_requires_grad(true);
    Tensor a = ops::linear_cross_entropy(fused[0], fused[1], fused[2], targets, 0.1f, 0, products);
    Tensor b = ops::cross_entropy(ops::linear(plain[0], plain[1], plain[2], products), targets, 0.1f, 0);
    // An incoming gradient other than 1 (f32 only: bf16 would round 3 g and g differently).
    const float g = precision == ops::Precision::f32 ? 3.0f : 1.0f;
    autograd::backward(ops::scale(a, g));
    autograd::backward(ops::scale(b, g));
    const std::string p = ops::to_string(precision);
    EXPECT_TENSOR_NEAR(p + " loss", a, b, 1e-6);
    for (size_t i = 0; i < fused.size(); ++i) EXPECT_TENSOR_NEAR(p + " grad " + std::to_string(i), fused[i].grad(), plain[i].grad(), 1e-5);
  }
}

}  // namespace
}  // namespace tfm
