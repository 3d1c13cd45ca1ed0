// GEMM paths and the opt-in reduced precisions (ops/cpu/gemm.h, ops/linear_products.h)
// against double-precision references.
#include <omp.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "autograd/autograd.h"
#include "models/gpt.h"
#include "ops/cpu/gemm.h"
#include "ops/matmul.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/linear_products.h"
#include "support/compare.h"
#include "support/gradcheck.h"
#include "support/process.h"
#include "tensor/float_formats.h"

namespace tfm {
namespace {

using testing::random_tensor;

// C = alpha * op(A) op(B) + beta * C in double, row-major with leading dimensions.
std::vector<double> reference_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const std::vector<float>& a,
                                   int64_t lda, const std::vector<float>& b, int64_t ldb, float beta, const std::vector<float>& c,
                                   int64_t ldc) {
  std::vector<double> out(c.begin(), c.end());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += static_cast<double>(ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      out[i * ldc + j] = alpha * s + beta * c[i * ldc + j];
    }
  return out;
}

std::vector<float> random_values(size_t n, uint64_t seed) {
  Tensor t = random_tensor({static_cast<int64_t>(n)}, seed);
  return {t.data(), t.data() + n};
}

// Worst |x - ref| / (max |ref| over the matrix).
double worst_relative(const std::vector<float>& x, const std::vector<double>& ref) {
  double scale = 1e-30, worst = 0;
  for (double r : ref) scale = std::max(scale, std::fabs(r));
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - ref[i]));
  return worst / scale;
}

// Row counts on both sides of the sgemm / matmul-primitive boundaries, every
// transposition, padded leading dimensions, alpha and beta.
TEST(Gemm, EveryPathMatchesTheReference) {
  for (int64_t m : {1, 7, 16, 33, 100, 300})
    for (int64_t k : {5, 256, 600})
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
          const int64_t n = 24, lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
          const std::vector<float> a = random_values(static_cast<size_t>((ta ? k : m) * lda), 1),
                                   b = random_values(static_cast<size_t>((tb ? n : k) * ldb), 2);
          std::vector<float> c = random_values(static_cast<size_t>(m * ldc), 3);
          for (float beta : {0.0f, 1.0f}) {
            std::vector<float> out = c;
            ops::cpu::gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, beta, out.data(), ldc);
            const double err = worst_relative(out, reference_gemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, beta, c, ldc));
            EXPECT_LT(err, 1e-5) << "m=" << m << " k=" << k << " ta=" << ta << " tb=" << tb << " beta=" << beta;
          }
        }
}

// A packed weight gives the same products as the plain layout for any number of rows
// (one packed copy serves every batch size), with and without a bias, and its ReLU
// epilogue cuts exactly the negative outputs.
TEST(PackedWeight, MatchesTheReferenceForAnyRowCount) {
  const int64_t out = 100, in = 72;  // out not a multiple of the layout's block
  const std::vector<float> w = random_values(static_cast<size_t>(out * in), 7), bias = random_values(static_cast<size_t>(out), 8);
  const ops::cpu::PackedWeight packed(w.data(), out, in);
  if (!packed.valid()) GTEST_SKIP() << "this CPU's oneDNN kernels have no packed layout";
  for (int64_t rows : {1, 3, 32, 129}) {
    const std::vector<float> x = random_values(static_cast<size_t>(rows * in), 9);
    std::vector<float> with_bias(static_cast<size_t>(rows * out)), plain(with_bias.size()), c(with_bias.size());
    for (int64_t r = 0; r < rows; ++r) std::copy(bias.begin(), bias.end(), c.begin() + r * out);
    packed.linear(x.data(), rows, bias.data(), with_bias.data());
    packed.linear(x.data(), rows, nullptr, plain.data());
    EXPECT_LT(worst_relative(with_bias, reference_gemm(false, true, rows, out, in, 1.0f, x, in, w, in, 1.0f, c, out)), 1e-6)
        << rows << " rows";
    EXPECT_LT(worst_relative(plain, reference_gemm(false, true, rows, out, in, 1.0f, x, in, w, in, 0.0f, c, out)), 1e-6)
        << rows << " rows";
    std::vector<float> rectified(with_bias.size());
    packed.linear(x.data(), rows, bias.data(), rectified.data(), true);
    size_t cut = 0;
    for (size_t i = 0; i < rectified.size(); ++i) {
      ASSERT_EQ(rectified[i], std::max(with_bias[i], 0.0f)) << rows << " rows, element " << i;
      cut += with_bias[i] < 0.0f;
    }
    EXPECT_GT(cut, 0u) << "the test needs negative outputs to cut";
  }
}

// The packed layout is fixed when the weight is packed, whatever the thread count
// then or at each product (the review's W1: packed under 3+ threads, a small product
// run on one thread read another blocking and gave garbage).
TEST(PackedWeight, AnyThreadCountReadsTheLayoutItWasPackedIn) {
  const std::vector<float> probe = random_values(64 * 64, 1);
  if (!ops::cpu::PackedWeight(probe.data(), 64, 64).valid()) GTEST_SKIP() << "this CPU's oneDNN kernels have no packed layout";
  const int saved = omp_get_max_threads();
  for (const auto& [out, in] : {std::pair<int64_t, int64_t>{100, 72}, {512, 64}, {64, 1000}, {1000, 64}}) {
    const std::vector<float> w = random_values(static_cast<size_t>(out * in), 7);
    for (int pack_threads : {1, 2, 3, 4, 5, 8, 16}) {
      omp_set_num_threads(pack_threads);
      const ops::cpu::PackedWeight packed(w.data(), out, in);
      for (int run_threads : {1, 3, 16})
        for (int64_t rows : {1, 7, 32, 300}) {
          omp_set_num_threads(run_threads);
          const std::vector<float> x = random_values(static_cast<size_t>(rows * in), 9);
          std::vector<float> y(static_cast<size_t>(rows * out)), zero(y.size(), 0.0f);
          packed.linear(x.data(), rows, nullptr, y.data());
          // 1e-5, not the plain test's 1e-6: inner dimensions up to 1,000 summed in another order than the reference's.
          EXPECT_LT(worst_relative(y, reference_gemm(false, true, rows, out, in, 1.0f, x, in, w, in, 0.0f, zero, out)), 1e-5)
              << out << " x " << in << " packed on " << pack_threads << " threads, " << rows << " rows on " << run_threads;
        }
    }
  }
  omp_set_num_threads(saved);
}

// In f32, frozen weights go through packed copies: the same linear layer (and with
// the ReLU fused) up to rounding.
TEST(FrozenWeights, F32LinearMatchesTheUnfrozenOne) {
  const Tensor x = random_tensor({5, 7, 64}, 1), w = random_tensor({48, 64}, 2), b = random_tensor({48}, 3);
  autograd::NoGradGuard no_grad;
  const ops::LinearProducts& plain_products = ops::LinearProducts::f32();
  const Tensor plain = ops::linear(x, w, b, plain_products), plain_no_bias = ops::linear(x, w, Tensor(), plain_products);
  ops::LinearProducts frozen;
  frozen.freeze();
  ASSERT_EQ(frozen.copies(), 0u);
  for (int pass = 0; pass < 2; ++pass) {  // the copy is made once, then reused
    EXPECT_EQ(frozen.copies(), static_cast<size_t>(pass));
    const Tensor y = ops::linear(x, w, b, frozen), y_no_bias = ops::linear(x, w, Tensor(), frozen),
                 y_relu = ops::linear_relu(x, w, b, frozen);
    ASSERT_EQ(y.shape(), plain.shape());
    ASSERT_EQ(y_relu.shape(), plain.shape());
    for (int64_t i = 0; i < plain.numel(); ++i) {
      EXPECT_NEAR(y.data()[i], plain.data()[i], 1e-5f * (1.0f + std::fabs(plain.data()[i])));
      EXPECT_NEAR(y_no_bias.data()[i], plain_no_bias.data()[i], 1e-5f * (1.0f + std::fabs(plain.data()[i])));
      EXPECT_NEAR(y_relu.data()[i], std::max(plain.data()[i], 0.0f), 1e-5f * (1.0f + std::fabs(plain.data()[i])));
    }
  }
}

TEST(Bf16, RoundsToNearestEvenAndKeepsSpecialValues) {
  EXPECT_EQ(to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f), 0x3f80) << "a tie rounds to the even mantissa";
  EXPECT_EQ(to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82) << "a tie rounds to the even mantissa";
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81) << "above the tie rounds up";
  EXPECT_EQ(to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(from_bf16(to_bf16(std::numeric_limits<float>::infinity())), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(from_bf16(to_bf16(std::numeric_limits<float>::max())))) << "as PyTorch: rounds up to inf";
  // Every float within 2^-8 relative (half a unit in the last of 7 stored mantissa bits).
  for (float x : random_values(1000, 4)) EXPECT_LE(std::fabs(from_bf16(to_bf16(x)) - x), std::fabs(x) * 0x1p-8f);
}

TEST(Bf16, GemmIsExactOnBf16InputsUpToF32Accumulation) {
  for (int64_t m : {1, 32, 130})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        const int64_t n = 40, k = 300;
        std::vector<float> a = random_values(static_cast<size_t>(m * k), 5), b = random_values(static_cast<size_t>(k * n), 6);
        for (float& v : a) v = from_bf16(to_bf16(v));  // the reference sees the rounded inputs
        for (float& v : b) v = from_bf16(to_bf16(v));
        std::vector<ops::cpu::bf16> ab(a.size()), bb(b.size());
        std::transform(a.begin(), a.end(), ab.begin(), [](float v) { return to_bf16(v); });
        std::transform(b.begin(), b.end(), bb.begin(), [](float v) { return to_bf16(v); });
        const int64_t lda = ta ? m : k, ldb = tb ? k : n;
        std::vector<float> c = random_values(static_cast<size_t>(m * n), 7), out = c;
        ops::cpu::gemm_bf16(ta, tb, m, n, k, 2.0f, ab.data(), lda, bb.data(), ldb, 1.0f, out.data(), n);
        EXPECT_LT(worst_relative(out, reference_gemm(ta, tb, m, n, k, 2.0f, a, lda, b, ldb, 1.0f, c, n)), 1e-5)
            << "m=" << m << " ta=" << ta << " tb=" << tb;
      }
}

// Relative Frobenius distance of a from b.
double relative_distance(const Tensor& a, const Tensor& b) {
  double d = 0, s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) d += std::pow(a.data()[i] - b.data()[i], 2), s += std::pow(b.data()[i], 2);
  return std::sqrt(d / s);
}

struct LinearRun {
  Tensor y, dx, dw, db;
};

LinearRun run_linear(const ops::LinearProducts& products, const Tensor& x0, const Tensor& w0, const Tensor& b0, bool backward = true) {
  Tensor x = x0.clone(), w = w0.clone(), b = b0.clone();
  for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(backward);
  Tensor y = ops::linear(x, w, b, products);
  if (backward) autograd::backward(ops::sum(ops::mul(y, random_tensor(y.shape(), 99))));
  return {y.detach(), backward ? x.grad() : Tensor(), backward ? w.grad() : Tensor(), backward ? b.grad() : Tensor()};
}

TEST(Bf16, LinearForwardAndBackwardStayCloseToF32) {
  const Tensor x = random_tensor({3, 40, 96}, 1), w = random_tensor({72, 96}, 2), b = random_tensor({72}, 3);
  const LinearRun f = run_linear(ops::LinearProducts(ops::Precision::f32), x, w, b),
                  h = run_linear(ops::LinearProducts(ops::Precision::bf16), x, w, b);
  // bf16 keeps 8 significant bits: each input is off by up to 2^-8, sums of many average out.
  EXPECT_LT(relative_distance(h.y, f.y), 1e-2);
  EXPECT_LT(relative_distance(h.dx, f.dx), 1e-2);
  EXPECT_LT(relative_distance(h.dw, f.dw), 1e-2);
  EXPECT_LT(relative_distance(h.db, f.db), 1e-6) << "the bias gradient is a plain sum";
  EXPECT_GT(relative_distance(h.y, f.y), 0.0) << "the bf16 path was not taken";
}

TEST(Int8, LinearIsWithinQuantisationErrorAndInferenceOnly) {
  const Tensor x = random_tensor({50, 128}, 1), w = random_tensor({64, 128}, 2), b = random_tensor({64}, 3);
  autograd::NoGradGuard no_grad;
  const ops::LinearProducts int8(ops::Precision::int8);
  const Tensor f = run_linear(ops::LinearProducts::f32(), x, w, b, false).y, q = run_linear(int8, x, w, b, false).y;
  // Rounding both operands to 1/127 of their row's range: ~0.5% per product, averaged over 128 terms.
  const double d = relative_distance(q, f);
  EXPECT_LT(d, 1e-2);
  EXPECT_GT(d, 0.0) << "the int8 path was not taken";
  ops::LinearProducts frozen(ops::Precision::int8);
  frozen.freeze();
  const Tensor first = run_linear(frozen, x, w, b, false).y, again = run_linear(frozen, x, w, b, false).y;
  for (int64_t i = 0; i < q.numel(); ++i) EXPECT_EQ(first.data()[i], again.data()[i]);
}

TEST(Int8, TrainingThroughInt8IsRefusedClearly) {
  const Tensor x = random_tensor({4, 8}, 1), w = random_tensor({3, 8}, 2), b = random_tensor({3}, 3);
  EXPECT_NE(testing::error_of([&] { run_linear(ops::LinearProducts(ops::Precision::int8), x, w, b); }).find("int8 precision is for inference only"),
            std::string::npos);
}

TEST(FrozenWeights, CopiesAreMadeOnceAndGiveTheSameResults) {
  const Tensor x = random_tensor({20, 64}, 1), w = random_tensor({48, 64}, 2), b = random_tensor({48}, 3);
  autograd::NoGradGuard no_grad;
  const Tensor plain = run_linear(ops::LinearProducts(ops::Precision::bf16), x, w, b, false).y;
  ops::LinearProducts frozen(ops::Precision::bf16);
  frozen.freeze();
  const Tensor y1 = ops::linear(x, w, b, frozen), y2 = ops::linear(x, w, b, frozen);
  EXPECT_EQ(frozen.copies(), 1u);
  for (int64_t i = 0; i < plain.numel(); ++i) {
    EXPECT_EQ(y1.data()[i], plain.data()[i]);
    EXPECT_EQ(y2.data()[i], plain.data()[i]);
  }
}

// Precision and converted weights belong to a model: a bf16 model with frozen weights
// and an f32 one in the same process each compute what they compute alone.
TEST(FrozenWeights, ModelsOfDifferentPrecisionsLiveSideBySide) {
  models::StackConfig c;
  c.family = "gpt", c.vocab = 50, c.d_model = 32, c.heads = 2, c.d_ff = 64, c.layers = 2;
  auto make = [&] {
    auto m = std::make_unique<models::GPT>(c);
    Rng rng(3);
    m->init_parameters(rng);
    m->eval();
    return m;
  };
  const models::Tokens ids{{4, 9, 17, 30, 2, 11}, 2, 3};
  autograd::NoGradGuard no_grad;
  const auto alone_f32 = make(), alone_bf16 = make(), f32 = make(), bf16 = make();
  alone_bf16->products().set_precision(ops::Precision::bf16);
  const Tensor expected_f32 = alone_f32->forward(ids), expected_bf16 = alone_bf16->forward(ids);
  ASSERT_GT(relative_distance(expected_bf16, expected_f32), 0.0) << "the bf16 model computed in f32";
  bf16->products().set_precision(ops::Precision::bf16);
  bf16->products().freeze();
  for (int round = 0; round < 2; ++round) {  // alternately, with the copies made in the first round
    EXPECT_TENSOR_NEAR("f32 beside bf16", f32->forward(ids), expected_f32, 0.0);
    EXPECT_TENSOR_NEAR("bf16 beside f32", bf16->forward(ids), expected_bf16, 0.0);
  }
  EXPECT_GT(bf16->products().copies(), 0u);
  EXPECT_EQ(f32->products().copies(), 0u);
}

TEST(PrecisionCli, UnknownPrecisionAndInt8TrainingAreRefused) {
  testing::CliResult bad = testing::run_tfm("--precision fp8 info /dev/null");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.output.find("fp8"), std::string::npos) << bad.output;
  testing::TempDir dir;
  testing::write_file(dir.path("text.txt"), std::string(4000, 'a'));
  testing::CliResult train = testing::run_tfm("lm train --precision int8 --text " + dir.path("text.txt") + " --steps 1 --out " + dir.path("run"));
  EXPECT_EQ(train.code, 1);
  EXPECT_NE(train.output.find("--precision int8 is for inference"), std::string::npos) << train.output;
}

}  // namespace
}  // namespace tfm
