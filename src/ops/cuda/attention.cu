// Attention on the GPU (ops/cpu/attention.cpp's counterpart). A block takes one batch
// row and head and 32 of its query rows (or, for the keys' gradients, 32 key rows), and
// walks the keys (or queries) in tiles of 32 rows held in shared memory: every row of K
// and V is read from memory once a block rather than once a query (window 4 of
// scripts/gpu/NOTES.md: the one-warp-a-row kernels took 36 ms of a 92 ms bf16 step of
// the base model), and each thread keeps a small block of outputs in registers
// (tile_dots, add_weighted_tile). The probabilities [batch, heads, tq, tk] are still
// written whole, for the backward and for callers that show them; a fused FlashAttention
// kernel that keeps them on chip comes later. Every sum runs in a fixed order (no
// atomics), so two runs are bitwise equal; the dot products and weighted sums add their
// terms in the CPU's order.
#include <algorithm>
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
constexpr unsigned kAllLanes = 0xffffffffu;
constexpr int kWarps = 4;      // a block's warps
constexpr int kTile = kWarp;   // rows a tile of shared memory holds, and rows a block takes
constexpr int kBlocksPerSm = 5;  // (at most 64 registers a thread: enough blocks in flight to hide the loads)
constexpr int64_t kMaxHeadWidth = 512;  // (shared memory: two tiles of 32 x 513 floats and more)

// The warp's sum and maximum, by a fixed butterfly (the same order every run); every
// lane gets the result.
__device__ float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kAllLanes, v, o);
  return v;
}
__device__ float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kAllLanes, v, o));
  return v;
}

// A block's share of a call: batch row b, head h, and its rows [first, first + kTile)
// of `rows` (queries, or keys for their gradients), from the block's index.
struct Share {
  int64_t b, h, first;
};
__device__ Share share_of(int64_t block, int64_t heads, int64_t rows) {
  const int64_t chunks = (rows + kTile - 1) / kTile, bh = block / chunks;
  return {bh / heads, bh % heads, (block % chunks) * kTile};
}
__host__ __device__ int64_t shares(int64_t B, int64_t heads, int64_t rows) { return B * heads * ((rows + kTile - 1) / kTile); }

// tile[r][c] (row stride dk + 1, which puts neighbouring rows in different banks) =
// row_of(r)[c] for r < n, c < dk: a warp a row, coalesced along c (no division per
// element: 64-bit divisions cost tens of instructions).
template <class RowOf>
__device__ void load_tile(float* tile, int n, int dk, RowOf row_of) {
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  for (int r = warp; r < n; r += kWarps) {
    const float* from = row_of(r);
    for (int c = lane; c < dk; c += kWarp) tile[r * (dk + 1) + c] = from[c];
  }
}

// tile[r][c] (row stride kTile + 1) = at(r, c) for r < rows, c < cols <= kTile: a tile of
// probabilities or score gradients, for add_weighted_tile.
template <class At>
__device__ void load_weights(float* tile, int rows, int cols, At at) {
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  for (int r = warp; r < rows; r += kWarps)
    if (lane < cols) tile[r * (kTile + 1) + lane] = at(r, lane);
}

// The block's 128 threads as a grid over a tile's outputs. A thread takes several
// outputs and keeps their sums in registers, so each value it reads from shared memory
// serves 2 or 4 products (with a lane a dot product, a value read for every product and
// a broadcast besides, the kernels were bound by shared memory: 14.6 ms of a 58 ms bf16
// step of the base model, window 19). A thread whose outputs all lie past a short
// sequence's rows returns at once (Multi30k's sentences fill half a tile: computing the
// whole tile made the kernels slower, 21.9 ms a step, window 20). Every sum still runs
// over its terms in order, as the CPU's do.
static_assert(kWarps * kWarp == 128 && kTile == 32, "the tile functions' thread grids");

// emit(a, b, A[a] . B[b]) for a < na, b < nb: dot products of the rows of two tiles (row
// stride dk + 1), each over dk values in order. A thread takes rows a0, a0 + 1 of A by
// b0, b0 + 8, b0 + 16, b0 + 24 of B (neighbouring threads neighbouring rows of B: their
// reads fall in different banks).
template <class Emit>
__device__ void tile_dots(const float* A, int na, const float* B, int nb, int dk, Emit emit) {
  const int ld = dk + 1, a0 = static_cast<int>(threadIdx.x) / 8 * 2, b0 = static_cast<int>(threadIdx.x) % 8;
  if (a0 >= na || b0 >= nb) return;
  const float *a_rows = A + a0 * ld, *b_rows = B + b0 * ld;
  float acc[2][4] = {};
  for (int c = 0; c < dk; ++c) {
    float a[2], b[4];
#pragma unroll
    for (int r = 0; r < 2; ++r) a[r] = a_rows[r * ld + c];
#pragma unroll
    for (int m = 0; m < 4; ++m) b[m] = b_rows[8 * m * ld + c];
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int m = 0; m < 4; ++m) acc[r][m] = fmaf(a[r], b[m], acc[r][m]);
  }
  for (int r = 0; r < 2; ++r)
    for (int m = 0; m < 4; ++m)
      if (a0 + r < na && b0 + 8 * m < nb) emit(a0 + r, b0 + 8 * m, acc[r][m]);
}

// For rows r < rows and c < dk: out_row(r)[c] = (first ? 0 : out_row(r)[c]) + the sum over
// j < used(r), in order, of W[r * wr + j * wc] V[j][c] (W a tile of weights in shared
// memory, kTile x kTile at most; V a tile of rows, row stride dk + 1). A thread takes
// rows r0..r0 + 3 by columns c0 + lane16 + 16m (m < 4) of each 64: a warp's reads of V
// are 16 neighbouring values, read by its two halves alike.
template <class OutRow, class Used>
__device__ void add_weighted_tile(OutRow out_row, int rows, bool first, const float* W, int wr, int wc, Used used, const float* V, int dk) {
  const int ld = dk + 1, r0 = static_cast<int>(threadIdx.x) / 16 * 4, lane16 = static_cast<int>(threadIdx.x) % 16;
  if (r0 >= rows) return;
  int n[4], most = 0;
  for (int k = 0; k < 4; ++k) most = max(most, n[k] = r0 + k < rows ? used(r0 + k) : 0);
  for (int c0 = 0; c0 < dk; c0 += 64) {
    float acc[4][4];
    for (int k = 0; k < 4; ++k)
      for (int m = 0; m < 4; ++m) {
        const int c = c0 + lane16 + 16 * m;
        acc[k][m] = !first && r0 + k < rows && c < dk ? out_row(r0 + k)[c] : 0.0f;
      }
    for (int j = 0; j < most; ++j) {
      float w[4], v[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) w[k] = W[(r0 + k) * wr + j * wc];
#pragma unroll
      for (int m = 0; m < 4; ++m) v[m] = V[j * ld + min(c0 + lane16 + 16 * m, dk - 1)];  // (columns past dk: unused)
#pragma unroll
      for (int k = 0; k < 4; ++k)
#pragma unroll
        for (int m = 0; m < 4; ++m)
          if (j < n[k]) acc[k][m] = fmaf(w[k], v[m], acc[k][m]);
    }
    for (int k = 0; k < 4; ++k)
      for (int m = 0; m < 4; ++m) {
        const int c = c0 + lane16 + 16 * m;
        if (r0 + k < rows && c < dk) out_row(r0 + k)[c] = acc[k][m];
      }
  }
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

// Keys that query i of row b sees: its sequence's, up to the causal horizon (0 or more).
__device__ int64_t visible_keys(int64_t keys, int64_t queries, bool causal, int64_t i) {
  if (!causal) return keys;
  const int64_t horizon = i + keys - queries + 1;
  return horizon < 0 ? 0 : (horizon < keys ? horizon : keys);
}

// Key (or value) j of query row b: row key_rows[b, j] of k and v when indexed (decoding), else b's.
__device__ int64_t key_batch(const Forward& f, int64_t b, int64_t j) { return f.key_rows ? f.key_rows[b * f.s.tk + j] : b; }

// Rows [first, first + kTile) of (b, h): scores (the block's queries against a tile of
// keys at a time) into the rows of probs, then mask, softmax and dropout (a warp a row),
// then the weighted sum of the values, tile by tile. Rows past the sequence's end get
// probabilities 0.
__global__ void __launch_bounds__(kWarps * kWarp, kBlocksPerSm) attention_kernel(Forward f) {
  extern __shared__ float smem[];
  const int dk = static_cast<int>(f.s.dk), ld = dk + 1;
  const int64_t tk = f.s.tk;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  float *queries = smem, *tile = smem + kTile * ld, *weights = smem + 2 * kTile * ld;
  const float keep_scale = 1.0f / (1.0f - f.s.dropout_p);
  for (int64_t block = blockIdx.x; block < shares(f.s.B, f.s.heads, f.s.tq); block += gridDim.x) {
    const Share sh = share_of(block, f.s.heads, f.s.tq);
    const int64_t b = sh.b, h = sh.h, first = sh.first, nq = f.q.size(b), keys = f.k.size(b);
    const int64_t end = std::min(first + kTile, f.s.tq), q_end = std::min(end, nq);
    const int rows = static_cast<int>(std::max(int64_t{0}, q_end - first));
    auto row = [&](int64_t i) { return ((b * f.s.heads + h) * f.s.tq + i) * tk; };
    auto visible = [&](int64_t i) { return visible_keys(keys, nq, f.causal, i); };
    for (int64_t i = std::max(first, nq) + warp; i < end; i += kWarps)
      for (int64_t j = lane; j < tk; j += kWarp) f.probs[row(i) + j] = 0.0f;
    const int64_t horizon = rows > 0 ? visible(q_end - 1) : 0;  // the most keys a row sees
    __syncthreads();  // the last share's readers of the tiles are done
    load_tile(queries, rows, dk, [&](int r) { return f.q.row(b, first + r) + h * dk; });
    for (int64_t t0 = 0; t0 < horizon; t0 += kTile) {  // 1. scores
      const int n = static_cast<int>(std::min(int64_t{kTile}, horizon - t0));
      __syncthreads();  // the last tile's readers are done
      load_tile(tile, n, dk, [&](int r) { return f.k.row(key_batch(f, b, t0 + r), t0 + r) + h * dk; });
      __syncthreads();
      tile_dots(queries, rows, tile, n, dk, [&](int r, int jj, float dot) {
        const int64_t i = first + r, j = t0 + jj;
        const bool seen = j < visible(i) && !(f.padding && f.padding[b * tk + j]);
        f.probs[row(i) + j] = seen ? f.s.scale * dot : -INFINITY;
      });
    }
    __syncthreads();  // every score written
    for (int64_t i = first + warp; i < q_end; i += kWarps) {  // 2. softmax and dropout
      float *p = f.probs + row(i), *d = f.dropped_probs ? f.dropped_probs + row(i) : nullptr;
      float mx = -INFINITY;
      for (int64_t j = lane; j < visible(i); j += kWarp) mx = fmaxf(mx, p[j]);
      mx = warp_max(mx);
      const bool none = mx == -INFINITY;  // every key masked: attend nowhere (all probabilities 0)
      float sum = 0.0f;
      for (int64_t j = lane; j < tk; j += kWarp) {
        const float e = none || j >= visible(i) ? 0.0f : expf(p[j] - mx);
        p[j] = e;
        sum += e;
      }
      sum = warp_sum(sum);
      const float inv = none ? 0.0f : 1.0f / sum;
      for (int64_t j = lane; j < tk; j += kWarp) {
        p[j] *= inv;
        if (d) d[j] = dropped(f.s, b, h, i, j) ? 0.0f : p[j] * keep_scale;
      }
    }
    const float* w = f.dropped_probs ? f.dropped_probs : f.probs;
    for (int64_t t0 = 0; t0 == 0 || t0 < horizon; t0 += kTile) {  // 3. the weighted sum of the values
      const int n = static_cast<int>(std::max(int64_t{0}, std::min(int64_t{kTile}, horizon - t0)));
      __syncthreads();  // (the first time: every probability written)
      load_tile(tile, n, dk, [&](int r) { return f.v.row(key_batch(f, b, t0 + r), t0 + r) + h * dk; });
      load_weights(weights, rows, n, [&](int r, int jj) { return w[row(first + r) + t0 + jj]; });
      __syncthreads();
      add_weighted_tile([&](int r) { return f.out.row(b, first + r) + h * dk; }, rows, t0 == 0, weights, kTile + 1, 1,
                        [&](int r) { return static_cast<int>(std::max(int64_t{0}, std::min(int64_t{n}, visible(first + r) - t0))); }, tile, dk);
    }
  }
}

struct Backward {
  Geometry s;
  Side q, k, v, g, dq, dk, dv;
  const float* probs;  // [B, heads, tq, tk]
  float* weights;      // the dropped probabilities the values were weighted with (or probs itself without dropout)
  float* ds;           // dS [B, heads, tq, tk], the scale folded in
  bool causal;
};

// Rows [first, first + kTile) of (b, h): dP = dO V^T tile by tile, then each row's
// dS = P * (dP - rowsum(dP * P)) * scale through the dropout mask (with the row's dropped
// probabilities; a warp a row), then dQ = dS K tile by tile. Keys j < tk_b.
__global__ void __launch_bounds__(kWarps * kWarp, kBlocksPerSm) score_query_gradient_kernel(Backward w) {
  extern __shared__ float smem[];
  const int dk = static_cast<int>(w.s.dk), ld = dk + 1;
  const int64_t tk = w.s.tk;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  float *grads = smem, *tile = smem + kTile * ld, *weights = smem + 2 * kTile * ld;
  const bool dropout = w.s.dropout_p > 0.0f;
  const float keep_scale = 1.0f / (1.0f - w.s.dropout_p);
  for (int64_t block = blockIdx.x; block < shares(w.s.B, w.s.heads, w.s.tq); block += gridDim.x) {
    const Share sh = share_of(block, w.s.heads, w.s.tq);
    const int64_t b = sh.b, h = sh.h, first = sh.first, nq = w.q.size(b), keys = w.k.size(b);
    const int64_t q_end = std::min(first + kTile, nq);
    const int rows = static_cast<int>(std::max(int64_t{0}, q_end - first));
    auto row = [&](int64_t i) { return ((b * w.s.heads + h) * w.s.tq + i) * tk; };
    const int64_t horizon = rows > 0 ? visible_keys(keys, nq, w.causal, q_end - 1) : 0;
    __syncthreads();  // the last share's readers of the tiles are done
    load_tile(grads, rows, dk, [&](int r) { return w.g.row(b, first + r) + h * dk; });
    for (int64_t t0 = 0; t0 < horizon; t0 += kTile) {  // dP, into ds
      const int n = static_cast<int>(std::min(int64_t{kTile}, horizon - t0));
      __syncthreads();
      load_tile(tile, n, dk, [&](int r) { return w.v.row(b, t0 + r) + h * dk; });
      __syncthreads();
      tile_dots(grads, rows, tile, n, dk, [&](int r, int jj, float dot) { w.ds[row(first + r) + t0 + jj] = dot; });
    }
    __syncthreads();  // every dP written
    for (int64_t i = first + warp; i < q_end; i += kWarps) {  // dS (keys past the row's horizon: dP 0, and P 0)
      const float* p = w.probs + row(i);
      float* ds = w.ds + row(i);
      const int64_t visible = visible_keys(keys, nq, w.causal, i);
      float partial = 0.0f;
      for (int64_t j = lane; j < keys; j += kWarp) {
        float dp = j < visible ? ds[j] : 0.0f;
        if (dropout) {
          const bool drop = dropped(w.s, b, h, i, j);
          dp = drop ? 0.0f : dp * keep_scale;
          w.weights[row(i) + j] = drop ? 0.0f : p[j] * keep_scale;
        }
        ds[j] = dp;
        partial += dp * p[j];
      }
      const float total = warp_sum(partial);
      for (int64_t j = lane; j < keys; j += kWarp) ds[j] = p[j] * (ds[j] - total) * w.s.scale;  // each lane its own j
    }
    for (int64_t t0 = 0; t0 == 0 || t0 < horizon; t0 += kTile) {  // dQ = dS K (dS is 0 past the horizon)
      const int n = static_cast<int>(std::max(int64_t{0}, std::min(int64_t{kTile}, horizon - t0)));
      __syncthreads();  // (the first time: every dS written)
      load_tile(tile, n, dk, [&](int r) { return w.k.row(b, t0 + r) + h * dk; });
      load_weights(weights, rows, n, [&](int r, int jj) { return w.ds[row(first + r) + t0 + jj]; });
      __syncthreads();
      add_weighted_tile([&](int r) { return w.dq.row(b, first + r) + h * dk; }, rows, t0 == 0, weights, kTile + 1, 1,
                        [&](int) { return n; }, tile, dk);
    }
  }
}

// Key rows [j0, j0 + kTile) of (b, h): dK[j] = sum over queries i (in order) of dS[i, j] Q[i]
// and dV[j] = the same of the dropped P[i, j] dO[i], the queries in tiles of Q, dO and
// their dS and P columns; queries that see none of the block's keys (causal) add zeros
// and are skipped.
__global__ void __launch_bounds__(kWarps * kWarp, kBlocksPerSm) key_value_gradient_kernel(Backward w) {
  extern __shared__ float smem[];
  const int dk = static_cast<int>(w.s.dk), ld = dk + 1, lds = kTile + 1;
  const int64_t tk = w.s.tk;
  float *queries = smem, *grads = queries + kTile * ld, *ds = grads + kTile * ld, *weights = ds + kTile * lds;
  for (int64_t block = blockIdx.x; block < shares(w.s.B, w.s.heads, w.s.tk); block += gridDim.x) {
    const Share sh = share_of(block, w.s.heads, w.s.tk);
    const int64_t b = sh.b, h = sh.h, nq = w.q.size(b), keys = w.k.size(b), j0 = sh.first, j_end = std::min(j0 + kTile, keys);
    if (j0 >= keys) continue;  // (the same for the whole block)
    auto at = [&](int64_t i, int64_t j) { return ((b * w.s.heads + h) * w.s.tq + i) * tk + j; };
    const int64_t start = w.causal ? std::max(int64_t{0}, j0 + nq - keys) : 0;  // the first query that sees key j0
    for (int64_t t0 = start; t0 == start || t0 < nq; t0 += kTile) {
      const int n = static_cast<int>(std::max(int64_t{0}, std::min(int64_t{kTile}, nq - t0))), cols = static_cast<int>(j_end - j0);
      __syncthreads();
      load_tile(queries, n, dk, [&](int r) { return w.q.row(b, t0 + r) + h * dk; });
      load_tile(grads, n, dk, [&](int r) { return w.g.row(b, t0 + r) + h * dk; });
      load_weights(ds, n, cols, [&](int r, int jj) { return w.ds[at(t0 + r, j0 + jj)]; });
      load_weights(weights, n, cols, [&](int r, int jj) { return w.weights[at(t0 + r, j0 + jj)]; });
      __syncthreads();
      // Key row jj's weight of query r is column jj of row r: W[jj * 1 + r * lds].
      add_weighted_tile([&](int jj) { return w.dk.row(b, j0 + jj) + h * dk; }, cols, t0 == start, ds, 1, lds, [&](int) { return n; },
                        queries, dk);
      add_weighted_tile([&](int jj) { return w.dv.row(b, j0 + jj) + h * dk; }, cols, t0 == start, weights, 1, lds,
                        [&](int) { return n; }, grads, dk);
    }
  }
}

// Shared memory of each kernel, in bytes, for heads dk wide.
// (two tiles of rows and one or two of weights; the forward and the score gradients
// take the same)
size_t forward_smem(int64_t dk) { return sizeof(float) * static_cast<size_t>(2 * kTile * (dk + 1) + kTile * (kTile + 1)); }
size_t key_value_smem(int64_t dk) { return sizeof(float) * static_cast<size_t>(2 * kTile * (dk + 1) + 2 * kTile * (kTile + 1)); }

// Launches `kernel` over `count` shares with `smem` bytes of shared memory (beyond 48 KiB
// once allowed for the kernel: the default limit).
template <class Args>
void launch(void (*kernel)(Args), const Args& args, int64_t count, size_t smem, const char* name) {
  if (count == 0) return;
  if (smem > 48 * 1024) check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)), name);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(count, int64_t{1} << 20));
  kernel<<<blocks, kWarps * kWarp, smem, stream()>>>(args);
  check_launch(name);
}

// A clear error for heads too wide for the kernels' shared memory.
void expect_head_width(int64_t dk) {
  TFM_CHECK(dk <= kMaxHeadWidth, "attention: heads of " << dk << " values; the GPU's kernels take at most " << kMaxHeadWidth);
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
  expect_head_width(f.s.dk);
  // Under dropout the values are weighted with a masked copy: probs stays the softmax.
  const Tensor dropped_probs = c.dropout_p > 0.0f ? Tensor::empty(probs.shape(), DType::f32, Device::CUDA) : Tensor();
  f.probs = ptr<float>(probs);
  f.dropped_probs = dropped_probs.defined() ? ptr<float>(dropped_probs) : nullptr;
  f.padding = mask.key_padding.defined() ? ptr<bool>(mask.key_padding) : nullptr;
  f.key_rows = c.key_rows.defined() ? ptr<int32_t>(c.key_rows) : nullptr;
  f.causal = mask.causal;
  launch(attention_kernel, f, shares(f.s.B, f.s.heads, f.s.tq), forward_smem(f.s.dk), "attention_kernel");
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
  expect_head_width(w.s.dk);
  const Tensor ds = Tensor::empty(probs.shape(), DType::f32, Device::CUDA);
  const Tensor weights = c.dropout_p > 0.0f ? Tensor::empty(probs.shape(), DType::f32, Device::CUDA) : Tensor();
  w.probs = ptr<float>(probs);
  w.weights = weights.defined() ? ptr<float>(weights) : ptr<float>(probs);
  w.ds = ptr<float>(ds);
  w.causal = c.mask->causal;
  launch(score_query_gradient_kernel, w, shares(w.s.B, w.s.heads, w.s.tq), forward_smem(w.s.dk), "score_query_gradient_kernel");
  launch(key_value_gradient_kernel, w, shares(w.s.B, w.s.heads, w.s.tk), key_value_smem(w.s.dk), "key_value_gradient_kernel");
}

}  // namespace tfm::ops::cuda
