#pragma once
// What a device implements: the kernels behind the ops' front ends. Each op's front
// end (ops/*.cpp) checks its arguments, allocates its outputs on its inputs' device,
// calls one kernel of that device's table and records autograd; the kernel computes,
// nothing else. One table per device (ops/cpu/kernels.cpp; a CUDA one next), chosen in
// one place (ops/dispatch.h). A null entry is an op the device does not implement:
// calling it is a clear error, and the backend op test (tests/test_backend_ops.cpp)
// runs every (op, dtype) a table claims against the f32 oracle.
//
// Tensors given to a kernel are on its device; inputs may be strided views where a
// comment says so, otherwise they and all outputs are contiguous.
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/attention_mask.h"
#include "ops/linear_products.h"
#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace tfm::ops {

// Element-wise functions of two tensors, a broadcast against out's shape (either may
// be a strided view); `s` is a scalar some take.
enum class Binary {
  add,            // a + b
  mul,            // a * b
  relu_backward,  // (b > 0 ? a : 0) * s: a the gradient, b relu's output
  gelu_backward,  // a * gelu'(b): a the gradient, b gelu's input
  gelu_tanh_backward,  // a * gelu_tanh'(b), b the input
  silu_backward,       // a * silu'(b), b the input
  tanh_backward,       // a * (1 - b^2): b tanh's output
};
// Element-wise functions of one tensor.
// x * s, max(x, 0), x * Phi(x), GELU's tanh approximation (GPT-2's gelu_new), x * sigmoid(x), tanh(x)
enum class Unary { scale, relu, gelu, gelu_tanh, silu, tanh };

// The most ids ops::top_log_probs leaves out of a row's candidates.
inline constexpr size_t kMaxExcluded = 8;

// One Adam step's settings (torch.optim.Adam's update order).
struct AdamUpdate {
  float beta1, beta2, eps;
  float step_size;  // lr / (1 - beta1^step)
  float bc2_sqrt;   // sqrt(1 - beta2^step)
  float l2;         // weight decay added to the gradient (Adam), or 0
  float shrink;     // 1 - lr * weight_decay, applied first to the parameters that decay (AdamW), or 1
};
// One parameter of an Adam step: its values, gradient and moments (contiguous, one
// shape), and whether AdamUpdate::shrink applies to it.
struct AdamTensors {
  Tensor param, grad, exp_avg, exp_avg_sq;
  bool decays = false;
};

// A label-smoothed loss's target distribution for one row, as (weight of the true
// class, of every other class, of the padding column); rows whose target is the
// skipped id count 0.
struct SmoothedTarget {
  float on, off, pad_column;
  bool kl;  // KL divergence (subtracts the target's entropy) rather than cross-entropy
};

// One call of attention (ops/attention.h says what each argument means). q, k and v
// may be strided views with unit stride in their last dimension.
struct AttentionCall {
  Tensor q, k, v;
  int64_t heads;
  int64_t kv_heads;  // heads of k and v: query head h reads K/V head h / (heads / kv_heads)
  const AttentionMask* mask;
  float dropout_p;
  DropoutKey dropout_key;
  Tensor key_rows;  // decoding's indexed keys (i32 [batch, tk]), or undefined
};

// Where rotary embeddings put a head's pairs (ops/rotary.h): (i, i + d_k / 2) as
// Hugging Face's rotate_half, or (2i, 2i + 1) as the paper (RoFormer) and Meta's code.
enum class RotaryLayout { half, interleaved };

// How ops::sample picks a token from a row of logits: first the penalties on the tokens
// the sequence already has (greedy too), then temperature, top_k, top_p and min_p.
struct Sampling {
  float temperature = 0.8f;  // 0: greedy (always the most likely token)
  int64_t top_k = 0;         // keep the k most likely tokens; 0: all
  float top_p = 1.0f;        // keep the smallest set whose probability reaches p; 1: all
  float min_p = 0.0f;        // keep the tokens at least min_p times as likely as the most likely; 0: all
  float repetition_penalty = 1.0f;  // transformers': each token seen (prompt or text), its logit / p if positive, * p if not
  float frequency_penalty = 0.0f;   // OpenAI's: minus this for each time a token was generated
  float presence_penalty = 0.0f;    // OpenAI's: minus this once for each token generated at all
  bool penalizes() const { return repetition_penalty != 1.0f || frequency_penalty != 0.0f || presence_penalty != 0.0f; }
};
// One row's sampling and its draw (draw `counter` of the tensor/rng.h stream), and the
// sequence so far for the penalties: `seen` (prompt and generated), of which the last
// `generated` were generated.
struct SampledRow {
  Sampling sampling;
  uint64_t counter = 0;
  std::span<const int> seen = {};
  int64_t generated = 0;
};

// The columns of a sinusoid position table (ops::sinusoids): the paper's interleaved
// (sin, cos, sin, ...); Marian's split (the sines, then the cosines); or fairseq's (split,
// the frequencies 10000^(-c / (d/2 - 1)), computed in single precision as fairseq and
// transformers' M2M100 compute them, row p holding position first + p).
enum class SinusoidLayout { interleaved, split, fairseq };

// What ops::uniform_ and ops::normal_ fill a tensor with.
enum class Distribution { uniform, normal };  // U(a, b); N(0, 1) * a

// An (op, dtype) a device implements.
struct Claim {
  std::string op;
  DType dtype;
};

// What a complete device claims: everything in f32; the products also in bf16 (and in
// int8 where `int8_products`); conversions between every dtype; integer ids and indices.
inline std::vector<Claim> complete_claims(bool int8_products) {
  std::vector<Claim> out;
  for (const char* op : {"add", "mul", "scale", "relu", "gelu", "gelu_tanh", "silu", "tanh", "dropout", "relu_dropout", "softmax",
                         "log_softmax", "layer_norm", "rms_norm", "rotary", "attention", "flash_attention", "cross_entropy", "label_smoothing_kl", "linear_cross_entropy",
                         "matmul", "linear", "linear_relu", "embedding", "gather_rows", "patchify", "sum", "mean", "sum_of_squares",
                         "clip_grad_norm", "adam_update", "top_log_probs", "uniform_", "normal_", "sample", "sinusoids"})
    out.push_back({op, DType::f32});
  for (const char* op : {"linear", "linear_relu", "linear_cross_entropy"}) out.push_back({op, DType::bf16});
  if (int8_products)
    for (const char* op : {"linear", "linear_relu"}) out.push_back({op, DType::i8});
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i64, DType::i32, DType::i8, DType::u8, DType::boolean})
    out.push_back({"to", t});
  out.push_back({"from_pixels", DType::u8});
  out.push_back({"arange", DType::i32});
  out.push_back({"equal", DType::i32});
  for (DType t : {DType::i32, DType::boolean}) out.push_back({"gather_rows", t});
  return out;
}

struct Kernels {
  Device device;
  std::vector<Claim> claims;
  std::string (*describe)();  // what runs the kernels, for `tfm --version`
  // Whether ops::attention runs flash_attention where no caller asks for the
  // probabilities: on the GPU, writing [batch, heads, tq, tk] and reading it back is most
  // of attention's time; the CPU's kernels keep each row's block in cache anyway.
  bool flash_attention_by_default = false;

  // Element-wise (ops/elementwise.h).
  void (*binary)(Binary op, const Tensor& a, const Tensor& b, float s, Tensor& out);
  void (*unary)(Unary op, const Tensor& x, float s, Tensor& out);
  // Inverted dropout of x (relu(x) first where `relu`), whose samples are its rows
  // (x.size(0)) or, with `packed`, the sequences packed in x [1, tokens, features]: the
  // mask tensor/rng.h's DropoutKey describes, on every device alike.
  void (*dropout)(const Tensor& x, float p, DropoutKey key, const PackedSequences* packed, bool relu, Tensor& out);
  void (*sum_to)(const Tensor& g, Tensor& out);  // g summed over its broadcast dims into out
  void (*scale_in_place)(Tensor& x, float s);

  // Softmax (ops/softmax.h): over the last dim, or its logarithm.
  void (*softmax)(const Tensor& x, bool log, Tensor& y);
  void (*softmax_backward)(const Tensor& y, const Tensor& g, bool log, Tensor& dx);
  // Beam search's candidates (ops::top_log_probs): row r of out [rows, 2 count + 1 + E]
  // (E = excluded.size(), at most kMaxExcluded) holds, for row r of logits [rows, V], the
  // `count` largest logits but the excluded ids', largest first (ties: the lower id first;
  // NaN and -inf never; missing ones -inf), their ids (as floats, exact: vocabularies are
  // below 2^24; missing ones -1), the row's log-sum-exp, and the excluded ids' logits (NaN
  // for an id outside the row). One copy of it back is a decoding step's one wait.
  void (*top_log_probs)(const Tensor& logits, int64_t count, const std::vector<int>& excluded, Tensor& out);

  // Layer norm over the last dim; mean and rstd [rows] are kept for backward.
  void (*layer_norm)(const Tensor& x, const Tensor& w, const Tensor& b, float eps, Tensor& y, Tensor& mean, Tensor& rstd);
  void (*layer_norm_backward)(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd, const Tensor& g, Tensor& dx,
                              Tensor& dw, Tensor& db);

  // RMS norm over the last dim (Llama's): y = x rstd w, rstd [rows] = 1 / sqrt(mean(x^2) + eps) kept for backward.
  void (*rms_norm)(const Tensor& x, const Tensor& w, float eps, Tensor& y, Tensor& rstd);
  void (*rms_norm_backward)(const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& g, Tensor& dx, Tensor& dw);

  // Rotary embeddings (ops/rotary.h): out [batch, time, heads * d_k] = x (a view with unit
  // last stride) with pair i of each head turned by the angle sign * position * freq[i];
  // positions i32 [batch or 1, time], freq f32 [d_k / 2]. sign -1 turns back (backward).
  void (*rotary)(const Tensor& x, const Tensor& positions, const Tensor& freq, RotaryLayout layout, float sign, Tensor& out);

  // Fused attention; probs [batch, heads, tq, tk] is the softmax before dropout.
  void (*attention)(const AttentionCall& call, Tensor& out, Tensor& probs);
  void (*attention_backward)(const AttentionCall& call, const Tensor& probs, const Tensor& g, Tensor& dq, Tensor& dk, Tensor& dv);
  // The same attention without its probabilities (FlashAttention-2's contract): lse
  // [batch, heads, tq] gets each query row's log-sum-exp of its scaled, masked scores
  // (-inf for a row that sees no key, and for rows past a packed sequence's end), from
  // which the backward recomputes P = exp(S - lse) tile by tile; dO . O gives its
  // rowsum(dP P) (through dropout too). call.key_rows is undefined; the backward's mask
  // is the forward's whole (padding and causality, not only the packing).
  void (*flash_attention)(const AttentionCall& call, Tensor& out, Tensor& lse);
  void (*flash_attention_backward)(const AttentionCall& call, const Tensor& out, const Tensor& lse, const Tensor& g, Tensor& dq,
                                   Tensor& dk, Tensor& dv);

  // The label-smoothed losses (ops/loss.h): total (f32, one element) = the sum over
  // rows of logits [rows, vocab] (targets i32 [rows]) of each row's loss, in double in
  // row order, divided by `divisor`; with `grad`, the rows' gradients (p - q) * inv_n go
  // there. The total stays on the device: nothing waits for it.
  void (*smoothed_loss)(const Tensor& logits, const Tensor& targets, int skip_id, const SmoothedTarget& q, float inv_n, Tensor* grad,
                        double divisor, Tensor& total);

  // Products (ops/matmul.h). matmul: out = op(a) op(b) + beta out over equal leading
  // dims, op transposing the last two where asked.
  void (*matmul)(bool trans_a, bool trans_b, const Tensor& a, const Tensor& b, float beta, Tensor& out);
  // y [rows, out] = x [rows, in] w [out, in]^T + bias, then max(y, 0) where `relu`, in
  // the products' precision (through their frozen copies once frozen).
  void (*linear)(const LinearProducts& products, const Tensor& x, const Tensor& w, const Tensor& bias, bool relu, Tensor& y);
  // dx = g w and dw = g^T x + dw_beta dw, g [rows, out], in the forward's precision; an
  // undefined dx or dw is not computed (a frozen weight, an input that needs no gradient).
  void (*linear_backward)(Precision precision, const Tensor& g, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                          float dw_beta);

  // Embeddings (ops/embedding.h): rows of w by i32 ids, and their scatter-add back. The
  // front ends check every index (ids here, rows in gather_rows) before a kernel sees it
  // (ops::checked_indices): kernels take valid indices only.
  void (*embedding)(const Tensor& w, const Tensor& ids, Tensor& out);
  void (*embedding_backward)(const Tensor& ids, const Tensor& g, Tensor& dw);
  void (*arange)(int64_t start, Tensor& out);  // i32 start, start + 1, ...

  // Layout (ops/shape.h): rows of x of any dtype (i64 indices, repeats allowed), their
  // scatter-add back (f32), and images [batch, C, H, W] cut into patches
  // [batch, patches, C * P * P]. equal: bool out = (i32 x == value).
  void (*gather_rows)(const Tensor& x, const Tensor& rows, Tensor& out);
  void (*gather_rows_backward)(const Tensor& rows, const Tensor& g, Tensor& dx);
  void (*patchify)(const Tensor& images, int64_t patch, Tensor& out);
  void (*equal)(const Tensor& x, int64_t value, Tensor& out);

  // Reductions (ops/reduce.h): the sum of x's elements, or of their squares, in double in
  // an order that does not depend on the thread count, divided by `divisor`, into out
  // (f32, one or two elements): out[0] is its float rounding, out[1] (where there) the
  // rest, so that out[0] + out[1] in double keeps 48 bits of it. The result stays on the
  // device: nothing waits for it.
  void (*sum)(const Tensor& x, bool squares, double divisor, Tensor& out);

  // Optimiser (ops/optimizer.h). x *= min(1, max_norm / (sqrt(s) + 1e-6)) with s =
  // squares[0] + squares[1] (f32 [2], sum's two-float form) in double, read on the
  // device: torch.nn.utils.clip_grad_norm_'s scaling.
  void (*clip_to_norm)(Tensor& x, const Tensor& squares, float max_norm);
  // One Adam step of every parameter listed, in one pass: params and moments in place.
  void (*adam)(const std::vector<AdamTensors>& params, const AdamUpdate& u);

  // Random numbers (ops/random.h). Element i of a fill takes draw `counter + i` of the
  // tensor/rng.h stream (two, counter + 2i and + 2i + 1, for a normal): the values a
  // sequential Rng gives. Row r of `sample` picks ids[r] from logits [rows, vocab] as
  // rows[r] says (each row its own settings and draw).
  void (*random_fill)(Tensor& t, Distribution d, float a, float b, uint64_t counter);
  void (*sample)(const Tensor& logits, const std::vector<SampledRow>& rows, Tensor& ids);
  // The sinusoid position table [max_len, d_model] (ops/random.h says which).
  void (*sinusoids)(Tensor& table, SinusoidLayout layout, int64_t first);

  // Conversions (ops/convert.h): every dtype to every dtype, and u8 pixels to [-1, 1].
  void (*convert)(const Tensor& src, Tensor& dst);
  void (*from_pixels)(const Tensor& pixels, Tensor& out);
};

}  // namespace tfm::ops

// Every entry of the table in its order, for each device's declarations and table:
// TFM_KERNEL_ENTRIES(X) is X(binary) X(unary) ... X(from_pixels).
#define TFM_KERNEL_ENTRIES(X)                                                                                          \
  X(binary) X(unary) X(dropout) X(sum_to) X(scale_in_place) X(softmax) X(softmax_backward) X(top_log_probs)         \
  X(layer_norm) X(layer_norm_backward) X(rms_norm) X(rms_norm_backward) X(rotary) X(attention) X(attention_backward) \
  X(flash_attention) X(flash_attention_backward) X(smoothed_loss) X(matmul) X(linear)                                \
  X(linear_backward) X(embedding) X(embedding_backward) X(arange) X(gather_rows) X(gather_rows_backward) X(patchify) \
  X(equal) X(sum) X(clip_to_norm) X(adam) X(random_fill) X(sample) X(sinusoids) X(convert) X(from_pixels)
// A device's kernel `entry`, declared with the table's signature (in the device's namespace).
#define TFM_DECLARE_KERNEL(entry) std::remove_pointer_t<decltype(::tfm::ops::Kernels::entry)> entry;
// `.entry = entry,` in a device's table.
#define TFM_KERNEL_ENTRY(entry) .entry = entry,
