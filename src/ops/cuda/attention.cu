// Attention on the GPU (ops/cpu/attention.cpp's counterpart), in plain kernels: one
// warp per query row and head for the scores (each dot product split across the lanes,
// so a key row is one coalesced read), mask, softmax, dropout and weighted sum of the
// values; backward one thread per gradient element, summing in a fixed order (no
// atomics, so two runs are bitwise equal). A fused FlashAttention kernel comes later.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"

namespace tfm::ops::cuda {

namespace {

// One operand as the kernels see it: [batch, time, heads * d_k] with any batch and row
// strides, or packed sequences [1, rows, heads * d_k] (row i of sequence b is row
// start[b] + i; start and length on the device).
struct Side {
  float* base;
  int64_t batch_stride, row_stride;
  const int64_t *start, *length;  // null unless packed
  int64_t time;                   // the padded length: a packed operand's longest sequence
  __device__ float* row(int64_t b, int64_t i) const {
    return base + (start ? (start[b] + i) * row_stride : b * batch_stride + i * row_stride);
  }
  __device__ int64_t size(int64_t b) const { return length ? length[b] : time; }
};

// A packing's start and length on the device ([2, batch], made once per packing:
// PackedSequences::on), or null pointers.
struct DevicePacking {
  const int64_t *start = nullptr, *length = nullptr;
};

DevicePacking device_packing(const PackedSequences* packed) {
  if (!packed) return {};
  const int64_t* both = ptr<int64_t>(packed->on(Device::CUDA));
  return {both, both + packed->batch()};
}

Side side(const Tensor& t, const PackedSequences* packed, const DevicePacking& on_gpu) {
  return {ptr<float>(t), t.strides()[0], t.strides()[1], on_gpu.start, on_gpu.length, packed ? packed->longest() : t.size(1)};
}

// The sizes of one call (tq and tk padded lengths, dk a head's width) and its dropout.
struct Geometry {
  int64_t B, heads, tq, tk, dk;
  float scale;
  float dropout_p;
  uint64_t dropout_key;
  int64_t first_row;
};

// The CPU's geometry(): with packed queries, the batch is the packing's.
Geometry geometry(const AttentionCall& c, const Side& q, const Side& k) {
  const int64_t B = c.mask->packed_queries ? c.mask->packed_queries->batch() : c.q.size(0), D = c.q.size(2);
  return {B, c.heads, q.time, k.time, D / c.heads, 1.0f / std::sqrt(static_cast<float>(D / c.heads)), c.dropout_p, c.dropout_key.key,
          c.dropout_key.first_row};
}

// Whether probability (b, h, i, j) is dropped: the CPU's dropout_row, whose element j
// takes index dropout_index(first_row + b, attention_dropout_place(h, i, 0)) + j.
__device__ bool dropped(const Geometry& s, int64_t b, int64_t h, int64_t i, int64_t j) {
  return hash_uniform(s.dropout_key, dropout_index(s.first_row + b, attention_dropout_place(h, i, 0)) + static_cast<uint64_t>(j)) <
         s.dropout_p;
}

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 4;  // warps, each a row of probs

// The warp's sum and maximum, by a fixed butterfly (the same order every run); every
// lane gets the result.
__device__ float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// a . b over n values, the lanes taking every 32nd: coalesced reads of both rows.
__device__ float warp_dot(const float* a, const float* b, int64_t n, int lane) {
  float acc = 0.0f;
  for (int64_t c = lane; c < n; c += kWarp) acc += a[c] * b[c];
  return warp_sum(acc);
}

struct Forward {
  Geometry s;
  Side q, k, v, out;
  float* probs;          // [B, heads, tq, tk]
  float* dropped_probs;  // the same after dropout, or null without it
  const bool* padding;   // [B, tk], or null
  const int32_t* key_rows;  // [B, tk], or null
  bool causal;
};

// Keys that query i of row b sees: its sequence's, up to the causal horizon (may be <= 0).
__device__ int64_t visible_keys(const Forward& f, int64_t b, int64_t i) {
  const int64_t keys = f.k.size(b);
  if (!f.causal) return keys;
  const int64_t horizon = i + keys - f.q.size(b) + 1;
  return horizon < keys ? horizon : keys;
}

// Key (or value) j of query row b: row key_rows[b, j] of k and v when indexed (decoding), else b's.
__device__ int64_t key_batch(const Forward& f, int64_t b, int64_t j) { return f.key_rows ? f.key_rows[b * f.s.tk + j] : b; }

// Query row i of batch row b, head h, by one warp: scores, mask and softmax into p
// (the row of probs), dropout into d, then the weighted sum of the visible values.
__device__ void attend(const Forward& f, int64_t b, int64_t h, int64_t i, float* p, float* d, int lane) {
  const int64_t tk = f.s.tk, dk = f.s.dk;
  if (i >= f.q.size(b)) {  // past a packed sequence's end: probabilities 0, no output row
    for (int64_t j = lane; j < tk; j += kWarp) p[j] = 0.0f;
    return;
  }
  const int64_t visible = visible_keys(f, b, i);
  const float* qi = f.q.row(b, i) + h * dk;
  for (int64_t j = 0; j < tk; ++j) {  // (j, b, i alone decide `seen`: the warp takes one branch)
    const bool seen = j < visible && !(f.padding && f.padding[b * tk + j]);
    const float score = seen ? f.s.scale * warp_dot(qi, f.k.row(key_batch(f, b, j), j) + h * dk, dk, lane) : -INFINITY;
    if (lane == 0) p[j] = score;
  }
  __syncwarp();
  float mx = -INFINITY;
  for (int64_t j = lane; j < tk; j += kWarp) mx = fmaxf(mx, p[j]);
  mx = warp_max(mx);
  const bool none = mx == -INFINITY;  // every key masked: attend nowhere (all probabilities 0)
  float sum = 0.0f;
  for (int64_t j = lane; j < tk; j += kWarp) {
    const float e = none ? 0.0f : expf(p[j] - mx);
    p[j] = e;
    sum += e;
  }
  sum = warp_sum(sum);
  const float inv = none ? 0.0f : 1.0f / sum, keep_scale = 1.0f / (1.0f - f.s.dropout_p);
  for (int64_t j = lane; j < tk; j += kWarp) {
    p[j] *= inv;
    if (d) d[j] = dropped(f.s, b, h, i, j) ? 0.0f : p[j] * keep_scale;
  }
  __syncwarp();  // the row's probabilities, written by the whole warp, are read by each lane below
  const float* w = d ? d : p;
  float* o = f.out.row(b, i) + h * dk;
  for (int64_t c = lane; c < dk; c += kWarp) {
    float acc = 0.0f;
    for (int64_t j = 0; j < visible; ++j) acc += w[j] * f.v.row(key_batch(f, b, j), j)[h * dk + c];
    o[c] = acc;
  }
}

// One warp per (b, h, i) row of probs.
__global__ void attention_kernel(Forward f) {
  const int64_t rows = f.s.B * f.s.heads * f.s.tq, warps = int64_t{gridDim.x} * kRowsPerBlock;
  const int lane = threadIdx.x % kWarp;
  for (int64_t row = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / kWarp; row < rows; row += warps) {
    const int64_t i = row % f.s.tq, bh = row / f.s.tq;
    float* d = f.dropped_probs ? f.dropped_probs + row * f.s.tk : nullptr;
    attend(f, bh / f.s.heads, bh % f.s.heads, i, f.probs + row * f.s.tk, d, lane);
  }
}

struct Backward {
  Geometry s;
  Side q, k, v, g, dq, dk, dv;
  const float* probs;  // [B, heads, tq, tk]
  float* weights;      // the dropped probabilities the values were weighted with (or probs itself without dropout)
  float* ds;           // dS [B, heads, tq, tk], the scale folded in
};

// Row (b, h, i) of dS = P * (dP - rowsum(dP * P)) * scale, dP = dO V^T (through the
// dropout mask), by one warp; with dropout also the row's dropped probabilities. Keys j < tk_b.
__device__ void score_gradient_row(const Backward& w, int64_t b, int64_t h, int64_t i, int64_t row, int lane) {
  const int64_t tk = w.s.tk, dk = w.s.dk, keys = w.k.size(b);
  if (i >= w.q.size(b)) return;  // past a packed sequence's end: never read
  const float* p = w.probs + row * tk;
  float* ds = w.ds + row * tk;
  const float* go = w.g.row(b, i) + h * dk;
  const bool dropout = w.s.dropout_p > 0.0f;
  const float keep_scale = 1.0f / (1.0f - w.s.dropout_p);
  for (int64_t j = 0; j < keys; ++j) {
    const float dp = warp_dot(go, w.v.row(b, j) + h * dk, dk, lane);
    if (lane == 0) ds[j] = dp;
  }
  __syncwarp();
  float partial = 0.0f;
  for (int64_t j = lane; j < keys; j += kWarp) {
    float dp = ds[j];
    if (dropout) {
      const bool drop = dropped(w.s, b, h, i, j);
      dp = drop ? 0.0f : dp * keep_scale;
      w.weights[row * tk + j] = drop ? 0.0f : p[j] * keep_scale;
    }
    ds[j] = dp;
    partial += dp * p[j];
  }
  const float total = warp_sum(partial);
  for (int64_t j = lane; j < keys; j += kWarp) ds[j] = p[j] * (ds[j] - total) * w.s.scale;  // each lane its own j
}

__global__ void score_gradient_kernel(Backward w) {
  const int64_t rows = w.s.B * w.s.heads * w.s.tq, warps = int64_t{gridDim.x} * kRowsPerBlock;
  const int lane = threadIdx.x % kWarp;
  for (int64_t row = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / kWarp; row < rows; row += warps) {
    const int64_t i = row % w.s.tq, bh = row / w.s.tq;
    score_gradient_row(w, bh / w.s.heads, bh % w.s.heads, i, row, lane);
  }
}

// dQ[b, i, h*dk + c] = sum over keys j (in order) of dS[b, h, i, j] K[b, j, h*dk + c]:
// one thread per element of [B, tq, D].
__global__ void query_gradient_kernel(Backward w) {
  const int64_t D = w.s.heads * w.s.dk, n = w.s.B * w.s.tq * D;
  TFM_GRID_STRIDE(e, n) {
    const int64_t col = e % D, i = (e / D) % w.s.tq, b = e / (D * w.s.tq), h = col / w.s.dk;
    if (i >= w.q.size(b)) continue;
    const float* ds = w.ds + ((b * w.s.heads + h) * w.s.tq + i) * w.s.tk;
    float acc = 0.0f;
    for (int64_t j = 0; j < w.k.size(b); ++j) acc += ds[j] * w.k.row(b, j)[col];
    w.dq.row(b, i)[col] = acc;
  }
}

// dK[b, j, col] = sum over queries i (in order) of dS[b, h, i, j] Q[b, i, col], and
// dV[b, j, col] of the dropped P[b, h, i, j] dO[b, i, col]: one thread per element of [B, tk, D].
__global__ void key_value_gradient_kernel(Backward w) {
  const int64_t D = w.s.heads * w.s.dk, n = w.s.B * w.s.tk * D;
  TFM_GRID_STRIDE(e, n) {
    const int64_t col = e % D, j = (e / D) % w.s.tk, b = e / (D * w.s.tk), h = col / w.s.dk;
    if (j >= w.k.size(b)) continue;
    const int64_t first = (b * w.s.heads + h) * w.s.tq * w.s.tk + j;  // (b, h, 0, j); query i is i * tk further
    float dk = 0.0f, dv = 0.0f;
    for (int64_t i = 0; i < w.q.size(b); ++i) {
      const int64_t at = first + i * w.s.tk;
      dk += w.ds[at] * w.q.row(b, i)[col];
      dv += w.weights[at] * w.g.row(b, i)[col];
    }
    w.dk.row(b, j)[col] = dk;
    w.dv.row(b, j)[col] = dv;
  }
}

// A clear error for probabilities the front end made in host memory.
void expect_on_gpu(const Tensor& probs) {
  TFM_CHECK(probs.device() == Device::CUDA, "attention: the probabilities must be on the GPU, got a " << to_string(probs.device()) << " tensor");
}

}  // namespace

void attention(const AttentionCall& c, Tensor& out, Tensor& probs) {
  expect_on_gpu(probs);
  const AttentionMask& mask = *c.mask;
  const PackedSequences *packed_q = mask.packed_queries.get(), *packed_k = mask.packed_keys.get();
  const DevicePacking pq = device_packing(packed_q), pk = device_packing(packed_k);
  Forward f{};
  f.q = side(c.q, packed_q, pq), f.k = side(c.k, packed_k, pk), f.v = side(c.v, packed_k, pk), f.out = side(out, packed_q, pq);
  f.s = geometry(c, f.q, f.k);
  const int64_t rows = f.s.B * f.s.heads * f.s.tq;
  if (rows == 0) return;
  // Under dropout the values are weighted with a masked copy: probs stays the softmax.
  const Tensor dropped_probs = c.dropout_p > 0.0f ? Tensor::empty(probs.shape(), DType::f32, Device::CUDA) : Tensor();
  f.probs = ptr<float>(probs);
  f.dropped_probs = dropped_probs.defined() ? ptr<float>(dropped_probs) : nullptr;
  f.padding = mask.key_padding.defined() ? ptr<bool>(mask.key_padding) : nullptr;
  f.key_rows = c.key_rows.defined() ? ptr<int32_t>(c.key_rows) : nullptr;
  f.causal = mask.causal;
  attention_kernel<<<blocks_for(rows, kRowsPerBlock), kRowsPerBlock * kWarp, 0, stream()>>>(f);
  check_launch("attention_kernel");
}

// dV = P_dropped^T dO, dP = dO V^T (through the mask), dS = P (dP - rowsum(dP P)) scale,
// dQ = dS K, dK = dS^T Q, per batch row and head, over each sequence's own lengths.
void attention_backward(const AttentionCall& c, const Tensor& probs, const Tensor& g, Tensor& dq, Tensor& dk, Tensor& dv) {
  expect_on_gpu(probs);
  const PackedSequences *packed_q = c.mask->packed_queries.get(), *packed_k = c.mask->packed_keys.get();
  const DevicePacking pq = device_packing(packed_q), pk = device_packing(packed_k);
  Backward w{};
  w.q = side(c.q, packed_q, pq), w.k = side(c.k, packed_k, pk), w.v = side(c.v, packed_k, pk), w.g = side(g, packed_q, pq);
  w.dq = side(dq, packed_q, pq), w.dk = side(dk, packed_k, pk), w.dv = side(dv, packed_k, pk);
  w.s = geometry(c, w.q, w.k);
  const int64_t rows = w.s.B * w.s.heads * w.s.tq, D = w.s.heads * w.s.dk;
  const Tensor ds = Tensor::empty(probs.shape(), DType::f32, Device::CUDA);
  const Tensor weights = c.dropout_p > 0.0f ? Tensor::empty(probs.shape(), DType::f32, Device::CUDA) : Tensor();
  w.probs = ptr<float>(probs);
  w.weights = weights.defined() ? ptr<float>(weights) : ptr<float>(probs);
  w.ds = ptr<float>(ds);
  if (rows > 0) {
    score_gradient_kernel<<<blocks_for(rows, kRowsPerBlock), kRowsPerBlock * kWarp, 0, stream()>>>(w);
    check_launch("score_gradient_kernel");
  }
  query_gradient_kernel<<<blocks_for(w.s.B * w.s.tq * D), kThreads, 0, stream()>>>(w);
  check_launch("query_gradient_kernel");
  key_value_gradient_kernel<<<blocks_for(w.s.B * w.s.tk * D), kThreads, 0, stream()>>>(w);
  check_launch("key_value_gradient_kernel");
}

}  // namespace tfm::ops::cuda
