// The backend op table's cases and oracle (tests/support/op_cases.h).
#include "support/op_cases.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/autograd.h"
#include "ops/attention.h"
#include "ops/convert.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/layer_norm.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/optimizer.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/rotary.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "tensor/error.h"
#include "tensor/rng.h"

namespace tfm::op_cases {

// Uniform values in [lo, hi) from a fixed seed, each a float (what the op sees).
Values uniform(int64_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Values v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(lo + (hi - lo) * hash_uniform(seed, static_cast<uint64_t>(i)));
  return v;
}

Input f32(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0) { return {shape, uniform(shape_numel(shape), seed, lo, hi)}; }

Input ints(const Shape& shape, Values values, DType dtype = DType::i32) { return {shape, std::move(values), dtype, false}; }

// An input of a case on `device`; floating-point inputs in `dtype`.
Tensor make(const Input& in, Device device, DType dtype) {
  Tensor t;
  switch (in.dtype) {
    case DType::f32: t = Tensor::from_values<float>(in.shape, std::vector<float>(in.values.begin(), in.values.end())); break;
    case DType::i32: t = Tensor::from_values<int32_t>(in.shape, std::vector<int32_t>(in.values.begin(), in.values.end())); break;
    case DType::i64: t = Tensor::from_values<int64_t>(in.shape, std::vector<int64_t>(in.values.begin(), in.values.end())); break;
    case DType::u8: t = Tensor::from_values<uint8_t>(in.shape, std::vector<uint8_t>(in.values.begin(), in.values.end())); break;
    default: throw Error("no test inputs of dtype " + to_string(in.dtype));
  }
  return ops::to(in.dtype == DType::f32 ? ops::to(t, dtype) : t, device);
}

// A tensor's values as doubles, from any device and dtype.
Values values_of(const Tensor& t) {
  const std::vector<float> v = ops::to(ops::to(t, Device::CPU).detach(), DType::f32).values<float>();
  return Values(v.begin(), v.end());
}

double dot(const Values& a, const Values& b) { return std::inner_product(a.begin(), a.end(), b.begin(), 0.0); }

// --- the oracle's building blocks, in double ---

double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double silu(double x) { return x / (1.0 + std::exp(-x)); }

// Broadcasts b's values onto out's shape (NumPy rules), returning out-shaped values.
Values broadcast(const Values& b, const Shape& bs, const Shape& out) {
  Values r(static_cast<size_t>(shape_numel(out)));
  for (int64_t i = 0; i < shape_numel(out); ++i) {
    int64_t rest = i, offset = 0, stride = 1;
    for (int64_t d = static_cast<int64_t>(out.size()) - 1, e = static_cast<int64_t>(bs.size()) - 1; d >= 0; --d, --e) {
      const int64_t idx = rest % out[d];
      rest /= out[d];
      if (e >= 0) {
        if (bs[e] != 1) offset += idx * stride;
        stride *= bs[e];
      }
    }
    r[i] = b[offset];
  }
  return r;
}

Values log_softmax_row(const double* x, int64_t n) {
  const double mx = *std::max_element(x, x + n);
  double s = 0.0;
  for (int64_t j = 0; j < n; ++j) s += std::exp(x[j] - mx);
  Values out(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) out[j] = x[j] - mx - std::log(s);
  return out;
}

// y [rows, out] = x [rows, in] w [out, in]^T + b
Values linear(const Values& x, const Values& w, const Values* b, int64_t rows, int64_t in, int64_t out) {
  Values y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b ? (*b)[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) acc += x[r * in + i] * w[o * in + i];
      y[r * out + o] = acc;
    }
  return y;
}

// The label-smoothed losses: sum over rows whose target is not skip of
// sum_j q_j (log q_j [kl only] - log p_j), q = on at the target, pad at the skip column
// (where it is a column), off elsewhere.
double smoothed(const Values& logits, const Values& targets, int64_t vocab, int skip, double on, double off, double pad, bool kl) {
  double total = 0.0;
  for (size_t r = 0; r < targets.size(); ++r) {
    const int t = static_cast<int>(targets[r]);
    if (t == skip) continue;
    const Values lp = log_softmax_row(logits.data() + r * vocab, vocab);
    for (int64_t j = 0; j < vocab; ++j) {
      const double q = j == t ? on : (j == skip ? pad : off);
      if (q > 0.0) total += q * ((kl ? std::log(q) : 0.0) - lp[j]);
    }
  }
  return total;
}

double cross_entropy(const Values& logits, const Values& targets, int64_t vocab, double smoothing, int ignore) {
  const double off = smoothing / static_cast<double>(vocab);
  const double valid = static_cast<double>(std::count_if(targets.begin(), targets.end(), [&](double t) { return t != ignore; }));
  return smoothed(logits, targets, vocab, ignore, 1.0 - smoothing + off, off, off, false) / std::max(valid, 1.0);
}

// Round to `bits` significant bits, nearest even (for a normal result of that format).
double round_to_bits(double x, int bits) {
  if (x == 0.0 || !std::isfinite(x)) return x;
  int e;
  const double m = std::frexp(x, &e);
  return std::ldexp(std::nearbyint(std::ldexp(m, bits)), e - bits);
}

// x converted to `dtype` and read back (ops/convert.h's rules).
double converted(double x, DType dtype) {
  auto saturate = [&](double lo, double hi) { return std::isnan(x) ? 0.0 : std::clamp(std::trunc(x), lo, hi); };
  switch (dtype) {
    case DType::f32: return static_cast<float>(x);
    case DType::bf16: return round_to_bits(x, 8);
    case DType::f16:
      if (std::fabs(x) < std::ldexp(1.0, -14)) return std::nearbyint(std::ldexp(x, 24)) / std::ldexp(1.0, 24);  // subnormal
      return std::fabs(round_to_bits(x, 11)) > 65504.0 ? std::copysign(INFINITY, x) : round_to_bits(x, 11);
    case DType::i64: return saturate(-std::ldexp(1.0, 63), std::ldexp(1.0, 63));
    case DType::i32: return saturate(-2147483648.0, 2147483647.0);
    case DType::i8: return saturate(-128, 127);
    case DType::u8: return saturate(0, 255);
    case DType::boolean: return x != 0.0 ? 1.0 : 0.0;
  }
  return NAN;
}

// Dropout's probability and stream in the cases that drop.
constexpr float kP = 0.3f;
constexpr uint64_t kKey = 99;

// How the attention oracle finds and masks keys: key padding [B, tk] (empty: none), the
// causal horizon, dropout of the probabilities (kP, kKey), and decoding's key rows (key
// j of query row b is key j of row key_rows[b tk + j] of k and v; empty: of row b), and
// the K/V heads (0: H; query head h reads K/V head h / (H / kv_heads)).
struct AttentionSetup {
  std::vector<uint8_t> padding;
  bool causal = false, dropout = false;
  std::vector<int> key_rows;
  int64_t kv_heads = 0;
};

// Attention over q [B, tq, H*dk], k and v [B, tk, KV*dk] (or [any, tk, KV*dk] with key
// rows): [B, tq, H*dk].
Values attention(const Values& q, const Values& k, const Values& v, int64_t B, int64_t tq, int64_t tk, int64_t H, int64_t dk,
                 const AttentionSetup& setup) {
  const int64_t D = H * dk, KV = setup.kv_heads ? setup.kv_heads : H, Dkv = KV * dk;
  Values out(static_cast<size_t>(B * tq * D), 0.0);
  auto key_row = [&](int64_t b, int64_t j) { return (setup.key_rows.empty() ? b : setup.key_rows[b * tk + j]) * tk + j; };
  auto kv_at = [&](int64_t b, int64_t j, int64_t h, int64_t c) { return key_row(b, j) * Dkv + h / (H / KV) * dk + c; };
  auto keep = [&](int64_t b, int64_t h, int64_t i, int64_t j) {
    if (!setup.dropout) return 1.0;
    const bool drop = hash_uniform(kKey, dropout_index(b, attention_dropout_place(h, i, j))) < kP;
    return drop ? 0.0 : 1.0 / (1.0 - static_cast<double>(kP));
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < tq; ++i) {
        Values s(static_cast<size_t>(tk), -INFINITY);
        for (int64_t j = 0; j < tk; ++j) {
          if ((setup.causal && j > i + tk - tq) || (!setup.padding.empty() && setup.padding[b * tk + j])) continue;
          double acc = 0.0;
          for (int64_t c = 0; c < dk; ++c) acc += q[(b * tq + i) * D + h * dk + c] * k[kv_at(b, j, h, c)];
          s[j] = acc / std::sqrt(static_cast<double>(dk));
        }
        const Values lp = log_softmax_row(s.data(), tk);
        for (int64_t j = 0; j < tk; ++j)
          for (int64_t c = 0; c < dk; ++c)
            if (std::isfinite(lp[j])) out[(b * tq + i) * D + h * dk + c] += std::exp(lp[j]) * keep(b, h, i, j) * v[kv_at(b, j, h, c)];
      }
  return out;
}

// Columns [first, first + n) of each row of `rows` values of width `width`.
Values columns(const Values& x, int64_t width, int64_t first, int64_t n) {
  Values out;
  for (size_t r = 0; r < x.size(); r += static_cast<size_t>(width))
    out.insert(out.end(), x.begin() + static_cast<int64_t>(r) + first, x.begin() + static_cast<int64_t>(r) + first + n);
  return out;
}

// The rotary cases' frequencies on `device`: heads of 4 values, 2 pairs (a wide and a narrow angle).
const std::vector<float> kRotaryFreq{0.9f, 0.15f};
Tensor rotary_freq(Device device) { return ops::to(Tensor::from_values<float>({2}, kRotaryFreq), device); }

// x [B, T, D] turned at positions [B * T] by kRotaryFreq, pairs as `layout` places them.
Values rotated(const Values& x, const Values& positions, int64_t B, int64_t T, int64_t D, ops::RotaryLayout layout) {
  const int64_t pairs = 2, dk = 4;
  Values out(x.size());
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t h = 0; h < D / dk; ++h)
      for (int64_t i = 0; i < pairs; ++i) {
        const int64_t u = r * D + h * dk + (layout == ops::RotaryLayout::half ? i : 2 * i), w = u + (layout == ops::RotaryLayout::half ? pairs : 1);
        const double angle = static_cast<double>(static_cast<float>(positions[r]) * kRotaryFreq[i]);
        out[u] = x[u] * std::cos(angle) - x[w] * std::sin(angle);
        out[w] = x[w] * std::cos(angle) + x[u] * std::sin(angle);
      }
  return out;
}

ops::AttentionMask padding_mask(const std::vector<uint8_t>& padding, bool causal, Device device) {
  ops::AttentionMask m;
  if (!padding.empty()) m.key_padding = ops::to(ops::to(Tensor::from_values<uint8_t>({2, 4}, padding), DType::boolean), device);
  m.causal = causal;
  return m;
}

// --- the cases ---

// The products' precision for a claimed dtype.
const ops::LinearProducts& products_for(DType dtype) {
  static const ops::LinearProducts f32(ops::Precision::f32), bf16(ops::Precision::bf16), int8(ops::Precision::int8);
  return dtype == DType::bf16 ? bf16 : dtype == DType::i8 ? int8 : f32;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> c;
  const Shape s234{2, 3, 4};
  c.push_back({"add", {f32(s234, 1), f32({4}, 2)}, [](const auto& x, DType) { return ops::add(x[0], x[1]); },
               [](const auto& v) {
                 Values b = broadcast(v[1], {4}, {2, 3, 4}), r(v[0].size());
                 for (size_t i = 0; i < r.size(); ++i) r[i] = v[0][i] + b[i];
                 return r;
               }});
  c.push_back({"mul", {f32(s234, 3), f32({3, 1}, 4)}, [](const auto& x, DType) { return ops::mul(x[0], x[1]); },
               [](const auto& v) {
                 Values b = broadcast(v[1], {3, 1}, {2, 3, 4}), r(v[0].size());
                 for (size_t i = 0; i < r.size(); ++i) r[i] = v[0][i] * b[i];
                 return r;
               }});
  auto elementwise = [](std::function<double(double)> f) {
    return [f](const std::vector<Values>& v) {
      Values r(v[0].size());
      std::transform(v[0].begin(), v[0].end(), r.begin(), f);
      return r;
    };
  };
  c.push_back({"scale", {f32(s234, 5)}, [](const auto& x, DType) { return ops::scale(x[0], -2.5f); }, elementwise([](double x) { return -2.5 * x; })});
  // relu and its fusion with dropout at inputs away from 0, where the kink would spoil the differences
  Input away = f32({40}, 6);
  for (double& x : away.values) x += x < 0 ? -0.1 : 0.1;
  c.push_back({"relu", {away}, [](const auto& x, DType) { return ops::relu(x[0]); }, elementwise([](double x) { return std::max(x, 0.0); })});
  c.push_back({"gelu", {f32({40}, 7, -3, 3)}, [](const auto& x, DType) { return ops::gelu(x[0]); }, elementwise(gelu)});
  c.push_back({"gelu_tanh", {f32({40}, 7, -3, 3)}, [](const auto& x, DType) { return ops::gelu_tanh(x[0]); }, elementwise(gelu_tanh)});
  c.push_back({"silu", {f32({40}, 7, -3, 3)}, [](const auto& x, DType) { return ops::silu(x[0]); }, elementwise(silu)});
  c.push_back({"tanh", {f32({40}, 7, -3, 3)}, [](const auto& x, DType) { return ops::tanh(x[0]); },
               elementwise([](double x) { return std::tanh(x); })});
  auto dropped = [](bool relu, size_t per_row) {  // element i: sample i / per_row, place i % per_row
    return [relu, per_row](const std::vector<Values>& v) {
      Values r(v[0].size());
      for (size_t i = 0; i < r.size(); ++i) {
        const bool drop = hash_uniform(kKey, dropout_index(static_cast<int64_t>(i / per_row), static_cast<int64_t>(i % per_row))) < kP;
        r[i] = drop ? 0.0 : (relu ? std::max(v[0][i], 0.0) : v[0][i]) / (1.0 - static_cast<double>(kP));
      }
      return r;
    };
  };
  c.push_back({"dropout", {f32({50, 100}, 8)}, [](const auto& x, DType) { return ops::dropout(x[0], kP, kKey); }, dropped(false, 100)});
  c.push_back({"relu_dropout", {away}, [](const auto& x, DType) { return ops::relu_dropout(x[0], kP, kKey); }, dropped(true, 1)});
  auto softmax_oracle = [](bool log) {
    return [log](const std::vector<Values>& v) {
      Values r;
      for (size_t row = 0; row < v[0].size(); row += 7) {
        Values lp = log_softmax_row(v[0].data() + row, 7);
        for (double x : lp) r.push_back(log ? x : std::exp(x));
      }
      return r;
    };
  };
  c.push_back({"softmax", {f32({3, 7}, 9, -4, 4)}, [](const auto& x, DType) { return ops::softmax(x[0]); }, softmax_oracle(false)});
  c.push_back({"log_softmax", {f32({3, 7}, 10, -4, 4)}, [](const auto& x, DType) { return ops::log_softmax(x[0]); }, softmax_oracle(true)});
  c.push_back({"layer_norm", {f32({4, 6}, 11, -2, 2), f32({6}, 12), f32({6}, 13)},
               [](const auto& x, DType) { return ops::layer_norm(x[0], x[1], x[2]); },
               [](const auto& v) {
                 Values r;
                 for (size_t row = 0; row < v[0].size(); row += 6) {
                   double mean = 0.0, var = 0.0;
                   for (int j = 0; j < 6; ++j) mean += v[0][row + j] / 6.0;
                   for (int j = 0; j < 6; ++j) var += (v[0][row + j] - mean) * (v[0][row + j] - mean) / 6.0;
                   for (int j = 0; j < 6; ++j) r.push_back((v[0][row + j] - mean) / std::sqrt(var + 1e-5) * v[1][j] + v[2][j]);
                 }
                 return r;
               }});
  c.push_back({"rms_norm", {f32({4, 6}, 52, -2, 2), f32({6}, 53)}, [](const auto& x, DType) { return ops::rms_norm(x[0], x[1], 1e-6f); },
               [](const auto& v) {
                 Values r;
                 for (size_t row = 0; row < v[0].size(); row += 6) {
                   double squares = 0.0;
                   for (int j = 0; j < 6; ++j) squares += v[0][row + j] * v[0][row + j] / 6.0;
                   for (int j = 0; j < 6; ++j) r.push_back(v[0][row + j] / std::sqrt(squares + 1e-6) * v[1][j]);
                 }
                 return r;
               }});
  // rotary: both layouts, each row its own positions or all rows one's, and x a slice
  // of a wider projection (the queries of a fused QKV)
  const Values positions{0, 3, 7, 2, 5, 1};
  for (const ops::RotaryLayout layout : {ops::RotaryLayout::half, ops::RotaryLayout::interleaved}) {
    c.push_back({"rotary", {f32({2, 3, 8}, 54), ints({2, 3}, positions)},
                 [layout](const auto& x, DType) { return ops::rotary(x[0], x[1], rotary_freq(x[0].device()), layout); },
                 [layout, positions](const auto& v) { return rotated(v[0], positions, 2, 3, 8, layout); }});
    c.push_back({"rotary", {f32({2, 3, 12}, 55), ints({1, 3}, {4, 0, 9})},
                 [layout](const auto& x, DType) { return ops::rotary(ops::slice(x[0], 2, 0, 8), x[1], rotary_freq(x[0].device()), layout); },
                 [layout](const auto& v) { return rotated(columns(v[0], 12, 0, 8), {4, 0, 9, 4, 0, 9}, 2, 3, 8, layout); }});
  }
  // attention and flash_attention alike: key padding; the causal mask with more keys than
  // queries; q, k and v slices of one projection [2, 3, 12]; dropout of the probabilities;
  // grouped-query attention (4 query heads over 2 K/V heads; causal, with more keys than
  // queries) and multi-query (one K/V head, padded keys)
  const std::vector<uint8_t> padding{0, 0, 0, 1, 0, 0, 1, 1};
  using Attend = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&, ops::AttentionHeads, const ops::AttentionMask&, float, DropoutKey)>;
  const std::pair<const char*, Attend> attentions[] = {
      {"attention", [](const auto& q, const auto& k, const auto& v, auto heads, const auto& mask, float p, DropoutKey key) {
         Tensor weights;  // (asked for: the kernels that write them, not flash_attention, run on every device)
         return ops::attention(q, k, v, heads, mask, p, key, &weights);
       }},
      {"flash_attention", [](const auto&... a) { return ops::flash_attention(a...); }}};
  for (const auto& entry : attentions) {  // (no structured binding: clang 14 lets no lambda capture one)
    const char* op = entry.first;
    const Attend& attend = entry.second;
    c.push_back({op, {f32({2, 3, 4}, 14), f32({2, 4, 4}, 15), f32({2, 4, 4}, 16)},
                 [padding, attend](const auto& x, DType) { return attend(x[0], x[1], x[2], 2, padding_mask(padding, false, x[0].device()), 0.0f, {}); },
                 [padding](const auto& v) { return attention(v[0], v[1], v[2], 2, 3, 4, 2, 2, {padding}); }});
    c.push_back({op, {f32({2, 3, 4}, 17), f32({2, 5, 4}, 18), f32({2, 5, 4}, 19)},
                 [attend](const auto& x, DType) { return attend(x[0], x[1], x[2], 2, padding_mask({}, true, x[0].device()), 0.0f, {}); },
                 [](const auto& v) { return attention(v[0], v[1], v[2], 2, 3, 5, 2, 2, {{}, true}); }});
    c.push_back({op, {f32({2, 3, 12}, 45)},
                 [attend](const auto& x, DType) {
                   auto part = [&](int64_t i) { return ops::slice(x[0], 2, 4 * i, 4 * i + 4); };
                   return attend(part(0), part(1), part(2), 2, padding_mask({}, true, x[0].device()), 0.0f, {});
                 },
                 [](const auto& v) { return attention(columns(v[0], 12, 0, 4), columns(v[0], 12, 4, 4), columns(v[0], 12, 8, 4), 2, 3, 3, 2, 2, {{}, true}); }});
    c.push_back({op, {f32({2, 3, 4}, 46), f32({2, 4, 4}, 47), f32({2, 4, 4}, 48)},
                 [padding, attend](const auto& x, DType) { return attend(x[0], x[1], x[2], 2, padding_mask(padding, false, x[0].device()), kP, kKey); },
                 [padding](const auto& v) { return attention(v[0], v[1], v[2], 2, 3, 4, 2, 2, {padding, false, true}); }});
    c.push_back({op, {f32({2, 3, 8}, 56), f32({2, 4, 4}, 57), f32({2, 4, 4}, 58)},
                 [attend](const auto& x, DType) { return attend(x[0], x[1], x[2], {4, 2}, padding_mask({}, true, x[0].device()), 0.0f, {}); },
                 [](const auto& v) { return attention(v[0], v[1], v[2], 2, 3, 4, 4, 2, {{}, true, false, {}, 2}); }});
    c.push_back({op, {f32({2, 3, 8}, 59), f32({2, 4, 2}, 60), f32({2, 4, 2}, 61)},
                 [padding, attend](const auto& x, DType) { return attend(x[0], x[1], x[2], {4, 1}, padding_mask(padding, false, x[0].device()), 0.0f, {}); },
                 [padding](const auto& v) { return attention(v[0], v[1], v[2], 2, 3, 4, 4, 2, {padding, false, false, {}, 1}); }});
  }
  // decoding's key rows (attention only: one query a row, keys in any rows of k and v, no
  // gradient), with as many K/V heads as query heads and with two for four
  const std::vector<int> key_rows{2, 0, 1, 1, 2, 0};  // query row 0's keys 0, 1, 2 in rows 2, 0, 1 of the cache; row 1's in 1, 2, 0
  c.push_back({"attention", {f32({2, 1, 4}, 49), f32({3, 3, 4}, 50), f32({3, 3, 4}, 51)},
               [key_rows](const auto& x, DType) {
                 autograd::NoGradGuard no_grad;
                 const Tensor rows = ops::to(Tensor::from_values<int32_t>({2, 3}, key_rows), x[0].device());
                 return ops::attention(x[0], x[1], x[2], 2, padding_mask({}, false, x[0].device()), 0.0f, {}, nullptr, rows);
               },
               [key_rows](const auto& v) { return attention(v[0], v[1], v[2], 2, 1, 3, 2, 2, {{}, false, false, key_rows}); }, false});
  c.push_back({"attention", {f32({2, 1, 8}, 62), f32({3, 3, 4}, 63), f32({3, 3, 4}, 64)},
               [key_rows](const auto& x, DType) {
                 autograd::NoGradGuard no_grad;
                 const Tensor rows = ops::to(Tensor::from_values<int32_t>({2, 3}, key_rows), x[0].device());
                 return ops::attention(x[0], x[1], x[2], {4, 2}, padding_mask({}, false, x[0].device()), 0.0f, {}, nullptr, rows);
               },
               [key_rows](const auto& v) { return attention(v[0], v[1], v[2], 2, 1, 3, 4, 2, {{}, false, false, key_rows, 2}); }, false});
  const Input targets = ints({5}, {2, 0, 6, 1, 3});  // 0 is the ignored (padding) id
  c.push_back({"cross_entropy", {f32({5, 7}, 20, -3, 3), targets},
               [](const auto& x, DType) { return ops::cross_entropy(x[0], x[1], 0.1f, 0); },
               [](const auto& v) { return Values{cross_entropy(v[0], v[1], 7, 0.1, 0)}; }});
  c.push_back({"label_smoothing_kl", {f32({5, 7}, 21, -3, 3), targets},
               [](const auto& x, DType) { return ops::label_smoothing_kl(x[0], x[1], 0.2f, 0, 3.0f); },
               [](const auto& v) { return Values{smoothed(v[0], v[1], 7, 0, 0.8, 0.2 / 5.0, 0.0, true) / 3.0}; }});
  c.push_back({"linear_cross_entropy", {f32({5, 4}, 22), f32({7, 4}, 23), f32({7}, 24), targets},
               [](const auto& x, DType d) { return ops::linear_cross_entropy(x[0], x[1], x[2], x[3], 0.1f, 0, products_for(d)); },
               [](const auto& v) { return Values{cross_entropy(linear(v[0], v[1], &v[2], 5, 4, 7), v[3], 7, 0.1, 0)}; }, true,
               DTypeIs::precision});
  c.push_back({"matmul", {f32({2, 3, 4}, 25), f32({2, 4, 5}, 26)}, [](const auto& x, DType) { return ops::matmul(x[0], x[1]); },
               [](const auto& v) {
                 Values r;
                 for (int b = 0; b < 2; ++b)
                   for (int i = 0; i < 3; ++i)
                     for (int j = 0; j < 5; ++j) {
                       double acc = 0.0;
                       for (int k = 0; k < 4; ++k) acc += v[0][(b * 3 + i) * 4 + k] * v[1][(b * 4 + k) * 5 + j];
                       r.push_back(acc);
                     }
                 return r;
               }});
  // Products wide enough for int8's per-row scales to be the story, not a corner.
  c.push_back({"linear", {f32({2, 3, 16}, 27), f32({6, 16}, 28), f32({6}, 29)},
               [](const auto& x, DType d) { return ops::linear(x[0], x[1], x[2], products_for(d)); },
               [](const auto& v) { return linear(v[0], v[1], &v[2], 6, 16, 6); }, true, DTypeIs::precision});
  c.push_back({"linear_relu", {f32({6, 16}, 30), f32({6, 16}, 31), f32({6}, 32)},
               [](const auto& x, DType d) { return ops::linear_relu(x[0], x[1], x[2], products_for(d)); },
               [](const auto& v) {
                 Values y = linear(v[0], v[1], &v[2], 6, 16, 6);
                 for (double& e : y) e = std::max(e, 0.0);
                 return y;
               },
               true, DTypeIs::precision});
  c.push_back({"embedding", {f32({5, 3}, 33), ints({2, 3}, {4, 0, 4, 2, 1, 3})},
               [](const auto& x, DType) { return ops::embedding(x[0], x[1]); },
               [](const auto& v) {
                 Values r;
                 for (double id : v[1])
                   for (int j = 0; j < 3; ++j) r.push_back(v[0][static_cast<int>(id) * 3 + j]);
                 return r;
               }});
  c.push_back({"gather_rows", {f32({3, 2, 2}, 34, -50, 50), ints({4}, {2, 0, 2, 1}, DType::i64)},
               [](const auto& x, DType) { return ops::gather_rows(x[0], x[1]); },
               [](const auto& v) {
                 Values r;
                 for (double row : v[1])
                   for (int j = 0; j < 4; ++j) r.push_back(v[0][static_cast<int>(row) * 4 + j]);
                 return r;
               }});
  c.push_back({"equal", {ints({2, 3}, {0, 3, 3, -1, 0, 7})}, [](const auto& x, DType) { return ops::equal(x[0], 3); },
               [](const auto& v) {
                 Values r;
                 for (double id : v[0]) r.push_back(id == 3 ? 1.0 : 0.0);
                 return r;
               },
               false});
  c.push_back({"patchify", {f32({2, 2, 4, 6}, 35)}, [](const auto& x, DType) { return ops::patchify(x[0], 2); },
               [](const auto& v) {  // [2, 6 patches, 2 channels * 2 * 2]
                 Values r;
                 for (int b = 0; b < 2; ++b)
                   for (int py = 0; py < 2; ++py)
                     for (int px = 0; px < 3; ++px)
                       for (int ch = 0; ch < 2; ++ch)
                         for (int dy = 0; dy < 2; ++dy)
                           for (int dx = 0; dx < 2; ++dx) r.push_back(v[0][((b * 2 + ch) * 4 + py * 2 + dy) * 6 + px * 2 + dx]);
                 return r;
               },
               false});
  c.push_back({"sum", {f32({5000}, 36)}, [](const auto& x, DType) { return ops::sum(x[0]); },
               [](const auto& v) { return Values{std::accumulate(v[0].begin(), v[0].end(), 0.0)}; }});
  c.push_back({"mean", {f32({3, 5}, 37)}, [](const auto& x, DType) { return ops::mean(x[0]); },
               [](const auto& v) { return Values{std::accumulate(v[0].begin(), v[0].end(), 0.0) / 15.0}; }});
  c.push_back({"sum_of_squares", {f32({5000}, 38)}, [](const auto& x, DType) { return ops::slice(ops::sum_of_squares(x[0]), 0, 0, 1); },
               [](const auto& v) { return Values{dot(v[0], v[0])}; }, false});
  // Gradients (scaled by 3 to exceed the bound) clipped to norm 2 against their sum of squares.
  c.push_back({"clip_grad_norm", {f32({40}, 44)},
               [](const auto& x, DType) {
                 Tensor g = ops::scale(x[0], 3.0f).detach();
                 ops::clip_to_norm(g, ops::sum_of_squares(g), 2.0f);
                 return g;
               },
               [](const auto& v) {
                 const double coef = 2.0 / (3.0 * std::sqrt(dot(v[0], v[0])) + 1e-6);
                 Values out;
                 for (double x : v[0]) out.push_back(3.0 * x * coef);
                 return out;
               },
               false});
  // One pass over two parameters: elements [0, 20) a matrix that decays (shrink 0.999), [20, 30) a vector that does not.
  c.push_back({"adam_update", {f32({30}, 39), f32({30}, 40), f32({30}, 41), f32({30}, 42, 0.0, 1.0)},
               [](const auto& x, DType) {
                 Tensor p = x[0].clone(), m = x[2].clone(), v = x[3].clone();
                 auto part = [](const Tensor& t, int64_t a, int64_t b, const Shape& shape) { return ops::reshape(ops::slice(t, 0, a, b), shape); };
                 ops::adam_update({{part(p, 0, 20, {4, 5}), part(x[1], 0, 20, {4, 5}), part(m, 0, 20, {4, 5}), part(v, 0, 20, {4, 5}), true},
                                   {part(p, 20, 30, {10}), part(x[1], 20, 30, {10}), part(m, 20, 30, {10}), part(v, 20, 30, {10}), false}},
                                  {0.9f, 0.98f, 1e-9f, 0.01f, 0.5f, 0.001f, 0.999f});
                 return ops::concat({p, m, v}, 0);
               },
               [](const auto& v) {
                 Values p, m, s;
                 for (size_t i = 0; i < v[0].size(); ++i) {
                   const double g = v[1][i] + 0.001 * v[0][i];
                   m.push_back(0.9 * v[2][i] + 0.1 * g);
                   s.push_back(0.98 * v[3][i] + 0.02 * g * g);
                   p.push_back((i < 20 ? 0.999 : 1.0) * v[0][i] - 0.01 * m.back() / (std::sqrt(s.back()) / 0.5 + 1e-9));
                 }
                 p.insert(p.end(), m.begin(), m.end());
                 p.insert(p.end(), s.begin(), s.end());
                 return p;
               },
               false});
  // top_log_probs: rows 0 and 2 wanted, id 1 excluded, renormalised over the others or not;
  // (log-probability, id) pairs
  for (bool renormalize : {false, true})
    c.push_back({"top_log_probs", {f32({3, 9}, 43, -3, 3)},
               [renormalize](const auto& x, DType) {
                 std::vector<std::vector<std::pair<double, int64_t>>> best;
                 TFM_CHECK(ops::top_log_probs(x[0], 3, {1}, renormalize, {1, 0, 1}, best), "not finite");
                 std::vector<float> flat;
                 for (const auto& row : best)
                   for (const auto& [lp, id] : row) flat.push_back(static_cast<float>(lp)), flat.push_back(static_cast<float>(id));
                 return ops::to(Tensor::from_vector({static_cast<int64_t>(flat.size())}, flat), x[0].device());
               },
               [renormalize](const auto& v) {
                 Values r;
                 for (int row : {0, 2}) {
                   Values logits(v[0].begin() + row * 9, v[0].begin() + row * 9 + 9);
                   if (renormalize) logits[1] = -std::numeric_limits<double>::infinity();
                   const Values lp = log_softmax_row(logits.data(), 9);
                   std::vector<int> ids{0, 2, 3, 4, 5, 6, 7, 8};
                   std::sort(ids.begin(), ids.end(), [&](int a, int b) { return lp[a] > lp[b]; });
                   for (int k = 0; k < 3; ++k) r.push_back(lp[ids[k]]), r.push_back(ids[k]);
                 }
                 return r;
               },
               false});
  // to(dtype) and back to f32: values across each type's range, ties, specials
  Input mixed = f32({64}, 44, -300.0, 300.0);
  for (double x : {0.0, -0.0, 0.5, -0.5, 1.5, 2.5, 1.0 + std::ldexp(1.0, -8), 1e-6, 70000.0, -3e9, 1e20})
    mixed.values.push_back(static_cast<float>(x));
  mixed.shape = {static_cast<int64_t>(mixed.values.size())};
  c.push_back({"to", {mixed}, [](const auto& x, DType d) { return ops::to(ops::to(x[0], d), DType::f32); },
               [](const auto& v) { return v[0]; }, false, DTypeIs::result});  // rounded to the claim's dtype in check_forward
  c.push_back({"from_pixels", {ints({2, 3}, {0, 1, 127, 128, 254, 255}, DType::u8)}, [](const auto& x, DType) { return ops::from_pixels(x[0]); },
               [](const auto& v) {
                 Values r;
                 for (double p : v[0]) r.push_back(p / 127.5 - 1.0);
                 return r;
               },
               false});
  // Random fills: the values a sequential generator's draws give (its input only says
  // on which device, and which shape).
  auto drawn = [](bool normal) {
    return [normal](const std::vector<Values>& v) {
      Rng rng(77);
      Values r;
      for (size_t i = 0; i < v[0].size(); ++i)
        r.push_back(normal ? static_cast<float>(rng.normal()) * 0.5f : static_cast<float>(rng.uniform(-0.5, 2.0)));
      r.push_back(static_cast<double>(rng.state()));  // where the generator went on from
      return r;
    };
  };
  auto fill = [](bool normal) {
    return [normal](const std::vector<Tensor>& x, DType) {
      Tensor t = x[0].clone();
      Rng rng(77);
      normal ? ops::normal_(t, 0.5f, rng) : ops::uniform_(t, -0.5f, 2.0f, rng);
      return ops::concat({t, ops::to(Tensor::full({1}, static_cast<float>(rng.state())), t.device())}, 0);
    };
  };
  c.push_back({"uniform_", {f32({5000}, 46)}, fill(false), drawn(false), false});
  c.push_back({"normal_", {f32({5000}, 47)}, fill(true), drawn(true), false});
  // sampling: greedy rows, then sampled rows at a temperature with top-k and top-p
  c.push_back({"sample", {f32({4, 6}, 48, -2, 2)},
               [](const auto& x, DType) {
                 Rng rng(5);
                 Tensor greedy = ops::sample(x[0], {0.0f, 0, 1.0f}, rng), drawn = ops::sample(x[0], {0.7f, 4, 0.9f}, rng);
                 return ops::concat({greedy, drawn}, 0);
               },
               [](const auto& v) {
                 Values r;
                 for (int row = 0; row < 4; ++row) r.push_back(std::max_element(v[0].begin() + row * 6, v[0].begin() + row * 6 + 6) - (v[0].begin() + row * 6));
                 Rng rng(5);
                 for (int row = 0; row < 4; ++row) {
                   std::vector<int> ids(6);
                   std::iota(ids.begin(), ids.end(), 0);
                   const double* l = v[0].data() + row * 6;
                   std::sort(ids.begin(), ids.end(), [&](int a, int b) { return l[a] > l[b]; });
                   Values p;
                   for (int k = 0; k < 4; ++k) p.push_back(std::exp((l[ids[k]] - l[ids[0]]) / 0.7));
                   const double z = std::accumulate(p.begin(), p.end(), 0.0);
                   size_t keep = 0;
                   for (double mass = 0.0; keep < p.size() && mass < 0.9;) mass += p[keep++] / z;
                   double u = rng.uniform() * std::accumulate(p.begin(), p.begin() + keep, 0.0);
                   size_t pick = 0;
                   while (pick + 1 < keep && u >= p[pick]) u -= p[pick++];
                   r.push_back(ids[pick]);
                 }
                 return r;
               },
               false});
  // interleaved sin, cos, sin, ...; split: the sines, then the cosines; fairseq's: split,
  // the frequencies 10000^(-pair / (half - 1)), from position 2 (M2M100's pad + 1).
  using ops::SinusoidLayout;
  for (SinusoidLayout layout : {SinusoidLayout::interleaved, SinusoidLayout::split, SinusoidLayout::fairseq}) {
    const bool split = layout != SinusoidLayout::interleaved, fairseq = layout == SinusoidLayout::fairseq;
    c.push_back({"sinusoids", {f32({1}, 49)},
                 [layout, fairseq](const auto& x, DType) { return ops::sinusoids(7, 6, layout, fairseq ? 2 : 0, x[0].device()); },
                 [split, fairseq](const auto&) {
                   Values r;
                   for (int pos = 0; pos < 7; ++pos)
                     for (int i = 0; i < 6; ++i) {
                       const int pair = split ? i % 3 : i / 2;
                       const bool cosine = split ? i >= 3 : i % 2 == 1;
                       const double angle = fairseq ? (pos + 2) / std::pow(10000.0, pair / 2.0) : pos / std::pow(10000.0, 2 * pair / 6.0);
                       r.push_back(cosine ? std::cos(angle) : std::sin(angle));
                     }
                   return r;
                 },
                 false, DTypeIs::result});
  }
  // (its input only says on which device)
  c.push_back({"arange", {f32({1}, 45)}, [](const auto& x, DType) { return ops::arange(3, 9, x[0].device()); },
               [](const auto&) { return Values{3, 4, 5, 6, 7, 8}; }, false, DTypeIs::result});
  return c;
}

// Tolerances: |got - want| <= tol * max(1, |want|).
double forward_tolerance(DType dtype) {
  switch (dtype) {
    case DType::bf16: return 2e-2;  // 8 bits of mantissa per input, sums in f32
    case DType::i8: return 3e-2;    // per-row scales to [-127, 127]
    default: return 1e-5;
  }
}
double backward_tolerance(DType dtype) { return dtype == DType::bf16 ? 5e-2 : 2e-4; }

// The worst |got - want| / max(1, |want|), and where.
std::pair<double, size_t> worst(const Values& got, const Values& want) {
  std::pair<double, size_t> w{0.0, 0};
  for (size_t i = 0; i < want.size(); ++i) {
    const bool both_inf = std::isinf(got[i]) && got[i] == want[i];
    const double err = both_inf ? 0.0 : std::fabs(got[i] - want[i]) / std::max(1.0, std::fabs(want[i]));
    if (!(err <= w.first)) w = {std::isnan(err) ? INFINITY : err, i};
  }
  return w;
}

DType input_dtype(const OpCase& c, DType claimed) { return c.dtype_is == DTypeIs::inputs ? claimed : DType::f32; }

Outcome run_forward(const OpCase& c, Device device, DType dtype) {
  std::vector<Tensor> x;
  std::vector<Values> v;
  for (const Input& in : c.inputs) {
    const DType as = in.dtype == DType::f32 ? input_dtype(c, dtype) : in.dtype;
    x.push_back(make(in, device, as));
    v.push_back(in.values);  // the oracle sees what the op sees: the values in the dtype they were given in
    for (double& e : v.back()) e = converted(e, as);
  }
  autograd::NoGradGuard no_grad;
  const Tensor out = c.run(x, dtype);
  TFM_CHECK(out.device() == device, c.op << ": the result left the device");
  Outcome o{values_of(out), c.oracle(v)};
  if (c.op == "to")
    for (double& w : o.want) w = converted(w, dtype);
  TFM_CHECK(o.got.size() == o.want.size(), c.op << ": " << o.got.size() << " values where the oracle has " << o.want.size());
  std::tie(o.error, o.at) = worst(o.got, o.want);
  return o;
}

// Autograd's gradients of sum(out * g) against central differences of the oracle's.
std::vector<Outcome> run_backward(const OpCase& c, Device device, DType dtype) {
  std::vector<Tensor> x;
  std::vector<Values> v;
  for (const Input& in : c.inputs) {
    x.push_back(make(in, device, input_dtype(c, dtype)));
    if (in.dtype == DType::f32 && in.differentiable) x.back().set_requires_grad(true);
    v.push_back(in.values);
  }
  const Tensor out = c.run(x, dtype);
  const Values g = uniform(out.numel(), 1000);
  autograd::backward(ops::sum(ops::mul(out, make({out.shape(), g}, device))));
  std::vector<Outcome> outcomes;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!x[i].requires_grad()) continue;
    TFM_CHECK(x[i].grad().defined(), c.op << ": no gradient reached input " << i);
    Outcome o{values_of(x[i].grad()), Values(v[i].size())};
    constexpr double h = 1e-6;
    for (size_t j = 0; j < v[i].size(); ++j) {
      std::vector<Values> plus = v, minus = v;
      plus[i][j] += h, minus[i][j] -= h;
      o.want[j] = (dot(c.oracle(plus), g) - dot(c.oracle(minus), g)) / (2 * h);
    }
    std::tie(o.error, o.at) = worst(o.got, o.want);
    o.input = static_cast<int>(i);
    outcomes.push_back(std::move(o));
  }
  return outcomes;
}

bool has_backward(const OpCase& c, DType dtype) {
  // Gradients are for floating-point dtypes; int8 products are for inference only.
  const bool floating = dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16;
  return c.differentiable && floating;
}

// Whether `device` can run here: its kernels are built and a device is present.
bool usable(Device device, std::string& why) {
  try {
    (void)ops::kernels(device);
    (void)Tensor::empty({1}, DType::f32, device);
    return true;
  } catch (const Error& e) {
    why = e.what();
    return false;
  }
}

}  // namespace tfm::op_cases
