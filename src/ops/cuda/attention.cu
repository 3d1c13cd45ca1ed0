// Attention on the GPU (ops/cpu/attention.cpp's counterpart). A block takes one batch
// row and head and 32 of its query rows (or, for the keys' gradients, 32 key rows), and
// walks the keys (or queries) in tiles of 32 rows held in shared memory, each lane one
// key of a tile: every row of K and V is read from memory once a block rather than once
// a query, and a dot product is one lane's sum rather than a warp's butterfly (window 4
// of scripts/gpu/NOTES.md: the one-warp-a-row kernels took 36 ms of a 92 ms bf16 step of
// the base model). The first kernels write the probabilities [batch, heads, tq, tk]
// whole, for callers that show them (and for decoding's indexed keys); the flash kernels
// further down keep them on chip, which is what ops::attention runs here otherwise (on
// the tensor cores where their tiles fit shared memory, at the end of the file). Every
// sum runs in a fixed order (no atomics), so two runs are bitwise equal; the weighted sums
// of the first kernels add their terms in the CPU's order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <mma.h>

#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"
#include "tensor/environment.h"

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

// The sizes of one call (tq and tk padded lengths, dk a head's width; `group` query
// heads share each K/V head) and its dropout.
struct Geometry {
  int64_t B, heads, tq, tk, dk, group;
  float scale;
  float dropout_p;
  uint64_t dropout_key;
  int64_t first_row;
};

// The CPU's geometry(): with packed queries, the batch is the packing's.
Geometry geometry(const AttentionCall& c, const Side& q, const Side& k) {
  const int64_t B = c.mask->packed_queries ? c.mask->packed_queries->batch() : c.q.size(0), D = c.q.size(2);
  return {B, c.heads, q.time, k.time, D / c.heads, c.heads / c.kv_heads, 1.0f / std::sqrt(static_cast<float>(D / c.heads)), c.dropout_p,
          c.dropout_key.key, c.dropout_key.first_row};
}

// Where query head h's keys and values start in a row of k and v.
__device__ int64_t kv_column(const Geometry& s, int64_t h) { return h / s.group * s.dk; }

// Whether probability (b, h, i, j) is dropped: the CPU's dropout_row, whose element j
// takes index dropout_index(first_row + b, attention_dropout_place(h, i, 0)) + j.
__device__ bool dropped(const Geometry& s, int64_t b, int64_t h, int64_t i, int64_t j) {
  return hash_uniform(s.dropout_key, dropout_index(s.first_row + b, attention_dropout_place(h, i, 0)) + static_cast<uint64_t>(j)) <
         s.dropout_p;
}

constexpr int kWarp = 32;
constexpr unsigned kAllLanes = 0xffffffffu;
constexpr int kWarps = 4;      // a block's warps
constexpr int kTile = kWarp;   // rows a tile of shared memory holds (one a lane), and rows a block takes
constexpr int64_t kMaxHeadWidth = 512;  // (shared memory: a tile of 32 x 513 floats and more)

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

// A block's share of a call: batch row b, head h, and its rows [first, first + per)
// of `rows` (queries, or keys for their gradients), from the block's index.
struct Share {
  int64_t b, h, first;
};
__device__ Share share_of(int64_t block, int64_t heads, int64_t rows, int64_t per = kTile) {
  const int64_t chunks = (rows + per - 1) / per, bh = block / chunks;
  return {bh / heads, bh % heads, (block % chunks) * per};
}
__host__ __device__ int64_t shares(int64_t B, int64_t heads, int64_t rows, int64_t per = kTile) { return B * heads * ((rows + per - 1) / per); }

// tile[r][c] (row stride dk + 1, which puts lane r's row in banks of its own) = row_of(r)[c]
// for r < n, c < dk: the block's threads over every element, coalesced along c.
template <class RowOf>
__device__ void load_tile(float* tile, int64_t n, int64_t dk, RowOf row_of) {
  for (int64_t e = threadIdx.x; e < n * dk; e += blockDim.x) tile[(e / dk) * (dk + 1) + e % dk] = row_of(e / dk)[e % dk];
}

// a . b over dk values, in order: one lane's dot product (a from shared memory, read by
// every lane alike; b a row of a tile).
__device__ float dot(const float* a, const float* b, int64_t dk) {
  float acc = 0.0f;
  for (int64_t c = 0; c < dk; ++c) acc += a[c] * b[c];
  return acc;
}

// out[c] = out[c] * kept (out unread where kept is 0: the first tile) + the sum over j < n,
// in order, of weight_j tile[j][c], where lane j holds weight_j: the lanes over c, the
// weights passed round the warp.
__device__ void add_weighted_rows(float* out, float kept, float weight, const float* tile, int64_t n, int64_t dk, int lane) {
  for (int64_t c0 = 0; c0 < dk; c0 += kWarp) {  // (every lane takes each turn: the shuffles need the whole warp)
    const int64_t c = c0 + lane;
    float acc = c < dk && kept != 0.0f ? out[c] * kept : 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      const float w = __shfl_sync(kAllLanes, weight, static_cast<int>(j));
      if (c < dk) acc += w * tile[j * (dk + 1) + c];
    }
    if (c < dk) out[c] = acc;
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

// Rows [i0, i0 + kTile) of (b, h): scores (lane j of a tile its key) into the rows of
// probs, mask, softmax and dropout (each lane the keys it scored), then the weighted sum
// of the values, tile by tile. Rows past the sequence's end get probabilities 0.
__global__ void attention_kernel(Forward f) {
  extern __shared__ float smem[];
  const int64_t dk = f.s.dk, tk = f.s.tk, ld = dk + 1;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  float *tile = smem, *query = smem + kTile * ld + warp * dk;  // (tile: the keys, then the values)
  const float keep_scale = 1.0f / (1.0f - f.s.dropout_p);
  for (int64_t block = blockIdx.x; block < shares(f.s.B, f.s.heads, f.s.tq); block += gridDim.x) {
    const Share sh = share_of(block, f.s.heads, f.s.tq);
    const int64_t b = sh.b, h = sh.h, nq = f.q.size(b), keys = f.k.size(b);
    const int64_t end = std::min(sh.first + kTile, f.s.tq), q_end = std::min(end, nq);
    auto row = [&](int64_t i) { return ((b * f.s.heads + h) * f.s.tq + i) * tk; };
    for (int64_t i = std::max(sh.first, nq) + warp; i < end; i += kWarps)
      for (int64_t j = lane; j < tk; j += kWarp) f.probs[row(i) + j] = 0.0f;
    const int64_t horizon = q_end > sh.first ? visible_keys(keys, nq, f.causal, q_end - 1) : 0;  // the most keys a row sees
    for (int64_t t0 = 0; t0 < horizon; t0 += kTile) {  // 1. scores
      const int64_t n = std::min(int64_t{kTile}, horizon - t0);
      __syncthreads();  // the last tile's readers are done
      load_tile(tile, n, dk, [&](int64_t r) { return f.k.row(key_batch(f, b, t0 + r), t0 + r) + kv_column(f.s, h); });
      __syncthreads();
      for (int64_t i = sh.first + warp; i < q_end; i += kWarps) {
        for (int64_t c = lane; c < dk; c += kWarp) query[c] = f.q.row(b, i)[h * dk + c];
        __syncwarp();
        const int64_t j = t0 + lane;
        if (lane < n) {
          const bool seen = j < visible_keys(keys, nq, f.causal, i) && !(f.padding && f.padding[b * tk + j]);
          f.probs[row(i) + j] = seen ? f.s.scale * dot(query, tile + lane * ld, dk) : -INFINITY;
        }
        __syncwarp();  // read before the next row overwrites it
      }
    }
    for (int64_t i = sh.first + warp; i < q_end; i += kWarps) {  // 2. softmax and dropout
      float *p = f.probs + row(i), *d = f.dropped_probs ? f.dropped_probs + row(i) : nullptr;
      const int64_t visible = visible_keys(keys, nq, f.causal, i);
      float mx = -INFINITY;
      for (int64_t j = lane; j < visible; j += kWarp) mx = fmaxf(mx, p[j]);
      mx = warp_max(mx);
      const bool none = mx == -INFINITY;  // every key masked: attend nowhere (all probabilities 0)
      float sum = 0.0f;
      for (int64_t j = lane; j < tk; j += kWarp) {
        const float e = none || j >= visible ? 0.0f : expf(p[j] - mx);
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
    for (int64_t t0 = 0; t0 == 0 || t0 < horizon; t0 += kTile) {  // 3. the weighted sum of the values
      const int64_t n = std::max(int64_t{0}, std::min(int64_t{kTile}, horizon - t0));
      __syncthreads();
      load_tile(tile, n, dk, [&](int64_t r) { return f.v.row(key_batch(f, b, t0 + r), t0 + r) + kv_column(f.s, h); });
      __syncthreads();
      for (int64_t i = sh.first + warp; i < q_end; i += kWarps) {
        const float* w = (f.dropped_probs ? f.dropped_probs : f.probs) + row(i);
        const int64_t used = std::max(int64_t{0}, std::min(n, visible_keys(keys, nq, f.causal, i) - t0));
        add_weighted_rows(f.out.row(b, i) + h * dk, t0 == 0 ? 0.0f : 1.0f, lane < used ? w[t0 + lane] : 0.0f, tile, used, dk, lane);
      }
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

// Rows [i0, i0 + kTile) of (b, h): dP = dO V^T tile by tile (lane j of a tile its key),
// then each row's dS = P * (dP - rowsum(dP * P)) * scale through the dropout mask (with
// the row's dropped probabilities), then dQ = dS K tile by tile. Keys j < tk_b.
__global__ void score_query_gradient_kernel(Backward w) {
  extern __shared__ float smem[];
  const int64_t dk = w.s.dk, tk = w.s.tk, ld = dk + 1;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  float *tile = smem, *grad_row = smem + kTile * ld + warp * dk;
  const bool dropout = w.s.dropout_p > 0.0f;
  const float keep_scale = 1.0f / (1.0f - w.s.dropout_p);
  for (int64_t block = blockIdx.x; block < shares(w.s.B, w.s.heads, w.s.tq); block += gridDim.x) {
    const Share sh = share_of(block, w.s.heads, w.s.tq);
    const int64_t b = sh.b, h = sh.h, nq = w.q.size(b), keys = w.k.size(b), q_end = std::min(sh.first + kTile, nq);
    auto row = [&](int64_t i) { return ((b * w.s.heads + h) * w.s.tq + i) * tk; };
    const int64_t horizon = q_end > sh.first ? visible_keys(keys, nq, w.causal, q_end - 1) : 0;
    for (int64_t t0 = 0; t0 < horizon; t0 += kTile) {  // dP, into ds
      const int64_t n = std::min(int64_t{kTile}, horizon - t0);
      __syncthreads();
      load_tile(tile, n, dk, [&](int64_t r) { return w.v.row(b, t0 + r) + kv_column(w.s, h); });
      __syncthreads();
      for (int64_t i = sh.first + warp; i < q_end; i += kWarps) {
        for (int64_t c = lane; c < dk; c += kWarp) grad_row[c] = w.g.row(b, i)[h * dk + c];
        __syncwarp();
        if (lane < n) w.ds[row(i) + t0 + lane] = dot(grad_row, tile + lane * ld, dk);
        __syncwarp();
      }
    }
    for (int64_t i = sh.first + warp; i < q_end; i += kWarps) {  // dS (keys past the row's horizon: dP 0, and P 0)
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
      const int64_t n = std::max(int64_t{0}, std::min(int64_t{kTile}, horizon - t0));
      __syncthreads();
      load_tile(tile, n, dk, [&](int64_t r) { return w.k.row(b, t0 + r) + kv_column(w.s, h); });
      __syncthreads();
      for (int64_t i = sh.first + warp; i < q_end; i += kWarps)
        add_weighted_rows(w.dq.row(b, i) + h * dk, t0 == 0 ? 0.0f : 1.0f, lane < n ? w.ds[row(i) + t0 + lane] : 0.0f, tile, n, dk, lane);
    }
  }
}

// Key rows [j0, j0 + kTile) of (b, K/V head kvh): dK[j] = sum over the query heads h that
// share kvh and their queries i (in that order) of dS[h, i, j] Q[i, h] and dV[j] = the same
// of the dropped P[h, i, j] dO[i, h], the queries in tiles of Q, dO and their dS and P
// columns; queries that see none of the block's keys (causal) add zeros and are skipped.
__global__ void key_value_gradient_kernel(Backward w) {
  extern __shared__ float smem[];
  const int64_t dk = w.s.dk, tk = w.s.tk, ld = dk + 1, lds = kTile + 1;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  float *queries = smem, *grads = queries + kTile * ld, *ds = grads + kTile * ld, *weights = ds + kTile * lds;
  const int64_t kv_heads = w.s.heads / w.s.group;
  for (int64_t block = blockIdx.x; block < shares(w.s.B, kv_heads, w.s.tk); block += gridDim.x) {
    const Share sh = share_of(block, kv_heads, w.s.tk);
    const int64_t b = sh.b, kvh = sh.h, nq = w.q.size(b), keys = w.k.size(b), j0 = sh.first, j_end = std::min(j0 + kTile, keys);
    if (j0 >= keys) continue;  // (the same for the whole block)
    const int64_t start = w.causal ? std::max(int64_t{0}, j0 + nq - keys) : 0;  // the first query that sees key j0
    for (int64_t h = kvh * w.s.group; h < (kvh + 1) * w.s.group; ++h) {
      for (int64_t t0 = start; t0 == start || t0 < nq; t0 += kTile) {
        auto at = [&](int64_t i, int64_t j) { return ((b * w.s.heads + h) * w.s.tq + i) * tk + j; };
        const bool first = h == kvh * w.s.group && t0 == start;  // the first terms write, the rest add
        const int64_t n = std::max(int64_t{0}, std::min(int64_t{kTile}, nq - t0)), cols = j_end - j0;
        __syncthreads();
        load_tile(queries, n, dk, [&](int64_t r) { return w.q.row(b, t0 + r) + h * dk; });
        load_tile(grads, n, dk, [&](int64_t r) { return w.g.row(b, t0 + r) + h * dk; });
        for (int64_t e = threadIdx.x; e < n * cols; e += blockDim.x) {
          const int64_t r = e / cols, jj = e % cols;
          ds[r * lds + jj] = w.ds[at(t0 + r, j0 + jj)], weights[r * lds + jj] = w.weights[at(t0 + r, j0 + jj)];
        }
        __syncthreads();
        for (int64_t j = j0 + warp; j < j_end; j += kWarps) {
          float *dk_row = w.dk.row(b, j) + kvh * dk, *dv_row = w.dv.row(b, j) + kvh * dk;
          for (int64_t c = lane; c < dk; c += kWarp) {
            float acc_k = first ? 0.0f : dk_row[c], acc_v = first ? 0.0f : dv_row[c];
            for (int64_t r = 0; r < n; ++r) {
              acc_k += ds[r * lds + (j - j0)] * queries[r * ld + c];
              acc_v += weights[r * lds + (j - j0)] * grads[r * ld + c];
            }
            dk_row[c] = acc_k, dv_row[c] = acc_v;
          }
        }
      }
    }
  }
}

// --- FlashAttention-2 (ops/kernels.h's flash_attention): the probabilities never leave
// the block. Written on 2026-11-27 without a GPU and not yet run on one: the ops stage's
// flash_attention rows (and every attention row, which takes this path on the GPU) check
// it against the CPU's reference. Single precision on the CUDA cores, as the kernels
// above; the same tiles, a block's 32 query rows (or key rows) walking the keys (or
// queries) 32 at a time, each sum in a fixed order. They take the calls the tensor
// cores' kernels below cannot (heads too wide for their tiles, a GPU before sm_80).

struct Flash {
  Geometry s;
  Side q, k, v, out, g, dq, dk, dv;  // (g and the gradients: the backward's)
  float* lse;                        // [B, heads, tq]
  float* row_dot;                    // [B, heads, tq]: dO . O (the backward's)
  const bool* padding;               // [B, tk], or null
  bool causal;
  __device__ int64_t stat(int64_t b, int64_t h, int64_t i) const { return (b * s.heads + h) * s.tq + i; }
  // Whether query i of (b) sees key j (of its sequence): before its horizon, not padding.
  __device__ bool sees(int64_t b, int64_t i, int64_t j) const {
    return j < visible_keys(k.size(b), q.size(b), causal, i) && !(padding && padding[b * s.tk + j]);
  }
  // What dropout multiplies probability (b, h, i, j) by: 0 or 1 / (1 - p).
  __device__ float keep(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return s.dropout_p == 0.0f ? 1.0f : dropped(s, b, h, i, j) ? 0.0f : 1.0f / (1.0f - s.dropout_p);
  }
};

// Keys and values [t0, t0 + n) of row b, as query head h reads them, into two tiles of
// shared memory, between barriers (the last tiles' readers are done first).
__device__ void load_key_value_tiles(const Flash& f, int64_t b, int64_t h, int64_t t0, int64_t n, float* keys, float* values) {
  __syncthreads();
  load_tile(keys, n, f.s.dk, [&](int64_t r) { return f.k.row(b, t0 + r) + kv_column(f.s, h); });
  load_tile(values, n, f.s.dk, [&](int64_t r) { return f.v.row(b, t0 + r) + kv_column(f.s, h); });
  __syncthreads();
}

// Query rows [i0, i0 + kTile) of (b, h): for each tile of keys and values (both in shared
// memory), each row's scores (lane j its key), the running maximum m and sum l of
// exp(score - m), the row's output so far rescaled by exp(m_old - m_new) and the tile's
// exp(score - m_new) V added; then out = acc / l and lse = m + log l.
__global__ void flash_forward_kernel(Flash f) {
  extern __shared__ float smem[];
  const int64_t dk = f.s.dk, ld = dk + 1;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  float *keys = smem, *values = keys + kTile * ld, *acc = values + kTile * ld, *m = acc + kTile * dk, *l = m + kTile;
  float* query = l + kTile + warp * dk;
  for (int64_t block = blockIdx.x; block < shares(f.s.B, f.s.heads, f.s.tq); block += gridDim.x) {
    const Share sh = share_of(block, f.s.heads, f.s.tq);
    const int64_t b = sh.b, h = sh.h, nq = f.q.size(b), nk = f.k.size(b);
    const int64_t end = std::min(sh.first + kTile, f.s.tq), q_end = std::min(end, nq);
    for (int64_t i = std::max(sh.first, nq) + threadIdx.x; i < end; i += blockDim.x) f.lse[f.stat(b, h, i)] = -INFINITY;  // no row
    __syncthreads();  // (the last share's readers of m and l are done)
    for (int64_t r = threadIdx.x; r < kTile; r += blockDim.x) m[r] = -INFINITY, l[r] = 0.0f;
    const int64_t horizon = q_end > sh.first ? visible_keys(nk, nq, f.causal, q_end - 1) : 0;
    for (int64_t t0 = 0; t0 == 0 || t0 < horizon; t0 += kTile) {
      const int64_t n = std::max(int64_t{0}, std::min(int64_t{kTile}, horizon - t0));
      load_key_value_tiles(f, b, h, t0, n, keys, values);
      for (int64_t i = sh.first + warp; i < q_end; i += kWarps) {
        const int64_t r = i - sh.first, j = t0 + lane;
        for (int64_t c = lane; c < dk; c += kWarp) query[c] = f.q.row(b, i)[h * dk + c];
        __syncwarp();
        const float score = lane < n && f.sees(b, i, j) ? f.s.scale * dot(query, keys + lane * ld, dk) : -INFINITY;
        const float m_old = m[r], l_old = l[r], m_new = fmaxf(m_old, warp_max(score));
        const float p = score == -INFINITY ? 0.0f : expf(score - m_new);
        const float kept = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);  // (0: nothing seen before)
        const float sum = warp_sum(p);
        __syncwarp();  // every lane has read m and l
        if (lane == 0) m[r] = m_new, l[r] = l_old * kept + sum;
        add_weighted_rows(acc + r * dk, kept, lane < n ? p * f.keep(b, h, i, j) : 0.0f, values, n, dk, lane);
        __syncwarp();  // before the next row's query overwrites this one
      }
    }
    __syncthreads();
    for (int64_t i = sh.first + warp; i < q_end; i += kWarps) {
      const int64_t r = i - sh.first;
      const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;  // a row that saw no key: out 0
      for (int64_t c = lane; c < dk; c += kWarp) f.out.row(b, i)[h * dk + c] = l[r] > 0.0f ? acc[r * dk + c] * inv : 0.0f;
      if (lane == 0) f.lse[f.stat(b, h, i)] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
    }
  }
}

// row_dot[b, h, i] = dO . O over the head's dk values: a warp a row, a fixed butterfly.
__global__ void flash_row_dot_kernel(Flash f) {
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  for (int64_t row = blockIdx.x * int64_t{kWarps} + warp; row < f.s.B * f.s.heads * f.s.tq; row += int64_t{gridDim.x} * kWarps) {
    const int64_t b = row / (f.s.heads * f.s.tq), h = row / f.s.tq % f.s.heads, i = row % f.s.tq;
    if (i >= f.q.size(b)) continue;  // (the same for the whole warp)
    float partial = 0.0f;
    for (int64_t c = lane; c < f.s.dk; c += kWarp) partial += f.g.row(b, i)[h * f.s.dk + c] * f.out.row(b, i)[h * f.s.dk + c];
    const float total = warp_sum(partial);
    if (lane == 0) f.row_dot[row] = total;
  }
}

// dS of query i (lane: key j = t0 + lane, of tiles `keys` and `values`) with its query and
// output-gradient rows: P (dP - dO . O) scale, P = exp(S - lse) recomputed and dP = dO V^T
// through the dropout mask; 0 for a key it does not see. *weight gets P after dropout.
__device__ float score_gradient(const Flash& f, int64_t b, int64_t h, int64_t i, int64_t j, bool in_tile, const float* query,
                                const float* key, const float* grad, const float* value, float* weight) {
  *weight = 0.0f;
  if (!in_tile) return 0.0f;  // (a lane past the tile: its i may lie past [B, heads, tq])
  const float lse = f.lse[f.stat(b, h, i)];
  if (lse == -INFINITY || !f.sees(b, i, j)) return 0.0f;
  const float p = expf(f.s.scale * dot(query, key, f.s.dk) - lse), keep = f.keep(b, h, i, j);
  *weight = p * keep;
  return p * (dot(grad, value, f.s.dk) * keep - f.row_dot[f.stat(b, h, i)]) * f.s.scale;
}

// Query rows [i0, i0 + kTile) of (b, h): dQ = dS K, tile by tile of keys and values.
__global__ void flash_query_gradient_kernel(Flash f) {
  extern __shared__ float smem[];
  const int64_t dk = f.s.dk, ld = dk + 1;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  float *keys = smem, *values = keys + kTile * ld, *query = values + kTile * ld + warp * 2 * dk, *grad = query + dk;
  for (int64_t block = blockIdx.x; block < shares(f.s.B, f.s.heads, f.s.tq); block += gridDim.x) {
    const Share sh = share_of(block, f.s.heads, f.s.tq);
    const int64_t b = sh.b, h = sh.h, nq = f.q.size(b), q_end = std::min(sh.first + kTile, nq);
    const int64_t horizon = q_end > sh.first ? visible_keys(f.k.size(b), nq, f.causal, q_end - 1) : 0;
    for (int64_t t0 = 0; t0 == 0 || t0 < horizon; t0 += kTile) {
      const int64_t n = std::max(int64_t{0}, std::min(int64_t{kTile}, horizon - t0));
      load_key_value_tiles(f, b, h, t0, n, keys, values);
      for (int64_t i = sh.first + warp; i < q_end; i += kWarps) {
        for (int64_t c = lane; c < dk; c += kWarp) query[c] = f.q.row(b, i)[h * dk + c], grad[c] = f.g.row(b, i)[h * dk + c];
        __syncwarp();
        float unused;
        const float ds = score_gradient(f, b, h, i, t0 + lane, lane < n, query, keys + lane * ld, grad, values + lane * ld, &unused);
        add_weighted_rows(f.dq.row(b, i) + h * dk, t0 == 0 ? 0.0f : 1.0f, ds, keys, n, dk, lane);
        __syncwarp();
      }
    }
  }
}

// Key rows [j0, j0 + kTile) of (b, K/V head kvh): dK = dS^T Q and dV = P_dropped^T dO over
// the query heads that share kvh and their queries (in that order), tile by tile of
// queries and output gradients; lane r of a tile its query.
__global__ void flash_key_value_gradient_kernel(Flash f) {
  extern __shared__ float smem[];
  const int64_t dk = f.s.dk, ld = dk + 1, kv_heads = f.s.heads / f.s.group;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  float *queries = smem, *grads = queries + kTile * ld, *key = grads + kTile * ld + warp * 2 * dk, *value = key + dk;
  for (int64_t block = blockIdx.x; block < shares(f.s.B, kv_heads, f.s.tk); block += gridDim.x) {
    const Share sh = share_of(block, kv_heads, f.s.tk);
    const int64_t b = sh.b, kvh = sh.h, nq = f.q.size(b), nk = f.k.size(b), j0 = sh.first, j_end = std::min(j0 + kTile, nk);
    if (j0 >= nk) continue;  // (the same for the whole block)
    const int64_t start = f.causal ? std::max(int64_t{0}, j0 + nq - nk) : 0;  // the first query that sees key j0
    for (int64_t h = kvh * f.s.group; h < (kvh + 1) * f.s.group; ++h)
      for (int64_t t0 = start; t0 == start || t0 < nq; t0 += kTile) {
        const int64_t n = std::max(int64_t{0}, std::min(int64_t{kTile}, nq - t0));
        const float kept = h == kvh * f.s.group && t0 == start ? 0.0f : 1.0f;  // the first terms write, the rest add
        __syncthreads();
        load_tile(queries, n, dk, [&](int64_t r) { return f.q.row(b, t0 + r) + h * dk; });
        load_tile(grads, n, dk, [&](int64_t r) { return f.g.row(b, t0 + r) + h * dk; });
        __syncthreads();
        for (int64_t j = j0 + warp; j < j_end; j += kWarps) {
          for (int64_t c = lane; c < dk; c += kWarp) key[c] = f.k.row(b, j)[kvh * dk + c], value[c] = f.v.row(b, j)[kvh * dk + c];
          __syncwarp();
          float weight;
          const float ds = score_gradient(f, b, h, t0 + lane, j, lane < n, queries + lane * ld, key, grads + lane * ld, value, &weight);
          add_weighted_rows(f.dk.row(b, j) + kvh * dk, kept, ds, queries, n, dk, lane);
          add_weighted_rows(f.dv.row(b, j) + kvh * dk, kept, weight, grads, n, dk, lane);
          __syncwarp();
        }
      }
  }
}

// --- The flash kernels on the tensor cores (sm_80 and later), where a block's tiles fit
// shared memory (heads up to 128 or so; wider ones take the kernels above). Written on
// 2026-11-27 without a GPU and not yet run on one. The same contract, masks and dropout,
// but each warp owns 16 rows (of queries, or of keys for their gradients) and the
// products S = Q K^T, dP = dO V^T, O += P V, dQ += dS K, dK += dS^T Q and dV += P^T dO
// run as 16 x 16 x 8 tensor-core products over tiles of 64 walked rows. A product's
// operands are each split into a TF32 part and the TF32 rounding of the rest, and the
// three products that matter are added ("3xTF32", as CUTLASS's f32-exact GEMMs do): the
// result keeps single precision's accuracy (the op table's 1e-5), not TF32's 10 bits,
// at a third of the tensor cores' TF32 rate (window 23: the CUDA cores' attention was
// most of the GPT context-1024 step). The softmax between the products stays on the CUDA
// cores, on rows the warp stored to shared memory. The fixed order of every sum holds:
// two runs are bitwise equal.

namespace wmma = nvcuda::wmma;

constexpr int kMmaRows = 16;            // a warp's rows, and the side of one product block
constexpr int kWalk = 64;               // walked rows (keys, or queries) a tile holds
constexpr int kWalkLd = kWalk + 8;      // a row of scores in shared memory (multiples of 8 floats keep 32-byte alignment)
constexpr int kTensorCoreWarps = 4;     // a block's warps where its tiles fit (fewer where not)

// Shared memory rows hold a head's dk values padded with zeros to `width`, a multiple of
// 16 (the products' depth and width), in rows of width + 8 floats.
__host__ __device__ int padded_width(int64_t dk) { return static_cast<int>((dk + 15) / 16 * 16); }
__host__ __device__ int padded_ld(int64_t dk) { return padded_width(dk) + 8; }

// tile[r][c] = row_of(r)[c] for r < n, c < dk, and 0 elsewhere in `rows` rows of `width`
// (zeros: a padded key's P is 0, and 0 times a stale value could be NaN).
template <class RowOf>
__device__ void load_padded_tile(float* tile, int rows, int64_t n, int64_t dk, RowOf row_of) {
  const int width = padded_width(dk), ld = padded_ld(dk);
  for (int e = threadIdx.x; e < rows * width; e += blockDim.x) {
    const int r = e / width, c = e % width;
    tile[r * ld + c] = r < n && c < dk ? row_of(r)[c] : 0.0f;
  }
}

// Keys and values [t0, t0 + n) of row b, as query head h reads them (n: what is left of
// the horizon, up to a tile), into two padded tiles between barriers (the last tiles'
// readers are done first); returns n.
__device__ int64_t load_padded_key_value_tiles(const Flash& f, int64_t b, int64_t h, int64_t t0, int64_t horizon, float* keys, float* values) {
  const int64_t n = std::max(int64_t{0}, std::min(int64_t{kWalk}, horizon - t0));
  __syncthreads();
  load_padded_tile(keys, kWalk, n, f.s.dk, [&](int64_t r) { return f.k.row(b, t0 + r) + kv_column(f.s, h); });
  load_padded_tile(values, kWalk, n, f.s.dk, [&](int64_t r) { return f.v.row(b, t0 + r) + kv_column(f.s, h); });
  __syncthreads();
  return n;
}

__device__ void fill_rows(float* x, int rows, int ld, float value) {
  for (int e = threadIdx.x; e < rows * ld; e += blockDim.x) x[e] = value;
}

// x as a TF32 part and the TF32 rounding of what that leaves (element-wise: the same for
// every element, whatever the fragment's layout).
template <class Fragment>
__device__ void split_tf32(const Fragment& x, Fragment& big, Fragment& small) {
  for (int t = 0; t < x.num_elements; ++t) {
    big.x[t] = wmma::__float_to_tf32(x.x[t]);
    small.x[t] = wmma::__float_to_tf32(x.x[t] - big.x[t]);
  }
}

// c[16 x n] = (accumulate ? c : 0) + a[16 x depth] b[depth x n] on one warp's tensor cores,
// 3xTF32; a row-major (lda); b row-major (b[k * ldb + col]) or, with `b_rows_are_columns`,
// the rows of a tile (b[col * ldb + k]: K^T from K); c row-major (ldc). n and depth are
// multiples of 16 and 8, every pointer 32-byte aligned and every ld a multiple of 8.
// Each step of 8 is added to the sum on the CUDA cores (rounding to nearest): the tensor
// cores' own accumulator is reported to round toward zero (measured on the A100), which
// over 1,024 keys would drift to 1e-5 of the output (an emulation of these kernels:
// 3.5e-7 at 2,048 keys this way).
template <bool b_rows_are_columns>
__device__ void warp_product(const float* a, int lda, const float* b, int ldb, float* c, int ldc, int n, int depth, bool accumulate) {
  using Layout = std::conditional_t<b_rows_are_columns, wmma::col_major, wmma::row_major>;
  using A = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
  using B = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, Layout>;
  using Sum = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;
  for (int col = 0; col < n; col += 16) {
    Sum acc, step;
    if (accumulate) wmma::load_matrix_sync(acc, c + col, ldc, wmma::mem_row_major);
    else wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < depth; k += 8) {
      A a_raw, a_big, a_small;
      B b_raw, b_big, b_small;
      wmma::load_matrix_sync(a_raw, a + k, lda);
      wmma::load_matrix_sync(b_raw, b_rows_are_columns ? b + col * ldb + k : b + k * ldb + col, ldb);
      split_tf32(a_raw, a_big, a_small);
      split_tf32(b_raw, b_big, b_small);
      wmma::fill_fragment(step, 0.0f);
      wmma::mma_sync(step, a_small, b_big, step);  // (the small terms first, as CUTLASS's 3xTF32)
      wmma::mma_sync(step, a_big, b_small, step);
      wmma::mma_sync(step, a_big, b_big, step);
      for (int t = 0; t < acc.num_elements; ++t) acc.x[t] += step.x[t];  // (the same layout: element t of each is one c)
    }
    wmma::store_matrix_sync(c + col, acc, ldc, wmma::mem_row_major);
  }
}

// The tensor cores' kernels compile for sm_80 and later only (TF32); the host never
// launches them on an older GPU.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define TFM_TENSOR_CORES 1
#else
#define TFM_TENSOR_CORES 0
#endif

// Query rows [first, first + R) of (b, h), R = 16 a warp: for each tile of 64 keys and
// values, the warp's rows' scores S = Q K^T (tensor cores), then on the CUDA cores each
// row's running maximum m and sum l, its output so far rescaled by exp(m_old - m_new)
// and its weights exp(S - m_new) (through dropout) in place of S; then O += P V (tensor
// cores). At the end out = O / l and lse = m + log l.
__global__ void flash_forward_tc_kernel(Flash f) {
#if TFM_TENSOR_CORES
  extern __shared__ __align__(128) float tc_smem[];
  const int64_t dk = f.s.dk;
  const int ld = padded_ld(dk), width = padded_width(dk), R = static_cast<int>(blockDim.x) / kWarp * kMmaRows;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp, r0 = warp * kMmaRows;
  float *query = tc_smem, *acc = query + R * ld, *keys = acc + R * ld, *values = keys + kWalk * ld, *scores = values + kWalk * ld;
  float *m = scores + R * kWalkLd, *l = m + R;
  for (int64_t block = blockIdx.x; block < shares(f.s.B, f.s.heads, f.s.tq, R); block += gridDim.x) {
    const Share sh = share_of(block, f.s.heads, f.s.tq, R);
    const int64_t b = sh.b, h = sh.h, nq = f.q.size(b), nk = f.k.size(b);
    const int64_t end = std::min(sh.first + R, f.s.tq), q_end = std::min(end, nq);
    for (int64_t i = std::max(sh.first, nq) + threadIdx.x; i < end; i += blockDim.x) f.lse[f.stat(b, h, i)] = -INFINITY;  // no row
    if (sh.first >= nq) continue;  // (the same for the whole block)
    __syncthreads();  // (the last share's readers are done)
    load_padded_tile(query, R, q_end - sh.first, dk, [&](int64_t r) { return f.q.row(b, sh.first + r) + h * dk; });
    fill_rows(acc, R, ld, 0.0f);
    for (int r = threadIdx.x; r < R; r += blockDim.x) m[r] = -INFINITY, l[r] = 0.0f;
    const int64_t horizon = visible_keys(nk, nq, f.causal, q_end - 1);
    for (int64_t t0 = 0; t0 == 0 || t0 < horizon; t0 += kWalk) {
      const int64_t n = load_padded_key_value_tiles(f, b, h, t0, horizon, keys, values);
      float* s = scores + r0 * kWalkLd;
      warp_product<true>(query + r0 * ld, ld, keys, ld, s, kWalkLd, kWalk, width, false);
      __syncwarp();
      for (int r = r0; r < r0 + kMmaRows; ++r) {
        const int64_t i = sh.first + r;
        float score[2], p[2];
        for (int u = 0; u < 2; ++u) {
          const int64_t jl = lane + u * kWarp;
          score[u] = i < q_end && jl < n && f.sees(b, i, t0 + jl) ? f.s.scale * scores[r * kWalkLd + jl] : -INFINITY;
        }
        const float m_old = m[r], l_old = l[r], m_new = fmaxf(m_old, warp_max(fmaxf(score[0], score[1])));
        for (int u = 0; u < 2; ++u) p[u] = score[u] == -INFINITY ? 0.0f : expf(score[u] - m_new);
        const float kept = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);  // (0: nothing seen before, and acc is 0)
        const float sum = warp_sum(p[0] + p[1]);
        __syncwarp();  // every lane has read m and l
        if (lane == 0) m[r] = m_new, l[r] = l_old * kept + sum;
        for (int u = 0; u < 2; ++u) {
          const int64_t jl = lane + u * kWarp;
          scores[r * kWalkLd + jl] = p[u] == 0.0f ? 0.0f : p[u] * f.keep(b, h, i, t0 + jl);
        }
        for (int c = lane; c < width; c += kWarp) acc[r * ld + c] *= kept;
      }
      __syncwarp();
      warp_product<false>(s, kWalkLd, values, ld, acc + r0 * ld, ld, width, kWalk, true);
      __syncwarp();
    }
    for (int r = r0; r < r0 + kMmaRows && sh.first + r < q_end; ++r) {
      const int64_t i = sh.first + r;
      const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;  // a row that saw no key: out 0
      for (int64_t c = lane; c < dk; c += kWarp) f.out.row(b, i)[h * dk + c] = l[r] > 0.0f ? acc[r * ld + c] * inv : 0.0f;
      if (lane == 0) f.lse[f.stat(b, h, i)] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
    }
  }
#else
  __trap();
#endif
}

// dS (or, with `weight`, P after dropout) of query i and key j from their score S and
// dP = dO . V: P (dP keep - dO . O) scale with P = exp(S scale - lse); 0 where i does
// not see j.
__device__ float tc_score_gradient(const Flash& f, int64_t b, int64_t h, int64_t i, int64_t j, bool in_tiles, float lse, float row_dot,
                                   float score, float dp, float* weight) {
  *weight = 0.0f;
  if (!in_tiles || lse == -INFINITY || !f.sees(b, i, j)) return 0.0f;
  const float p = expf(f.s.scale * score - lse), keep = f.keep(b, h, i, j);
  *weight = p * keep;
  return p * (dp * keep - row_dot) * f.s.scale;
}

// Query rows [first, first + R) of (b, h): for each tile of 64 keys and values, the warp's
// rows' S = Q K^T and dP = dO V^T (tensor cores), dS in place of dP (CUDA cores), then
// dQ += dS K (tensor cores).
__global__ void flash_query_gradient_tc_kernel(Flash f) {
#if TFM_TENSOR_CORES
  extern __shared__ __align__(128) float tc_smem[];
  const int64_t dk = f.s.dk;
  const int ld = padded_ld(dk), width = padded_width(dk), R = static_cast<int>(blockDim.x) / kWarp * kMmaRows;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp, r0 = warp * kMmaRows;
  float *query = tc_smem, *grad = query + R * ld, *acc = grad + R * ld, *keys = acc + R * ld, *values = keys + kWalk * ld;
  float *scores = values + kWalk * ld, *dscores = scores + R * kWalkLd, *lse = dscores + R * kWalkLd, *row_dot = lse + R;
  for (int64_t block = blockIdx.x; block < shares(f.s.B, f.s.heads, f.s.tq, R); block += gridDim.x) {
    const Share sh = share_of(block, f.s.heads, f.s.tq, R);
    const int64_t b = sh.b, h = sh.h, nq = f.q.size(b), q_end = std::min(sh.first + R, nq);
    if (sh.first >= nq) continue;  // (the same for the whole block)
    __syncthreads();  // (the last share's readers are done)
    load_padded_tile(query, R, q_end - sh.first, dk, [&](int64_t r) { return f.q.row(b, sh.first + r) + h * dk; });
    load_padded_tile(grad, R, q_end - sh.first, dk, [&](int64_t r) { return f.g.row(b, sh.first + r) + h * dk; });
    fill_rows(acc, R, ld, 0.0f);
    for (int r = threadIdx.x; r < R; r += blockDim.x) {
      const bool row = sh.first + r < q_end;
      lse[r] = row ? f.lse[f.stat(b, h, sh.first + r)] : -INFINITY;
      row_dot[r] = row ? f.row_dot[f.stat(b, h, sh.first + r)] : 0.0f;
    }
    const int64_t horizon = visible_keys(f.k.size(b), nq, f.causal, q_end - 1);
    for (int64_t t0 = 0; t0 == 0 || t0 < horizon; t0 += kWalk) {
      const int64_t n = load_padded_key_value_tiles(f, b, h, t0, horizon, keys, values);
      float *s = scores + r0 * kWalkLd, *ds = dscores + r0 * kWalkLd;
      warp_product<true>(query + r0 * ld, ld, keys, ld, s, kWalkLd, kWalk, width, false);
      warp_product<true>(grad + r0 * ld, ld, values, ld, ds, kWalkLd, kWalk, width, false);
      __syncwarp();
      for (int r = r0; r < r0 + kMmaRows; ++r)
        for (int u = 0; u < 2; ++u) {
          const int64_t jl = lane + u * kWarp, e = r * kWalkLd + jl;
          float unused;
          dscores[e] = tc_score_gradient(f, b, h, sh.first + r, t0 + jl, sh.first + r < q_end && jl < n, lse[r], row_dot[r],
                                         scores[e], dscores[e], &unused);
        }
      __syncwarp();
      warp_product<false>(ds, kWalkLd, keys, ld, acc + r0 * ld, ld, width, kWalk, true);
      __syncwarp();
    }
    for (int r = r0; r < r0 + kMmaRows && sh.first + r < q_end; ++r)
      for (int64_t c = lane; c < dk; c += kWarp) f.dq.row(b, sh.first + r)[h * dk + c] = acc[r * ld + c];
  }
#else
  __trap();
#endif
}

// Key rows [first, first + R) of (b, K/V head kvh): over the query heads that share kvh
// and their queries (in that order) in tiles of 64, the warp's rows' S^T = K Q^T and
// dP^T = V dO^T (tensor cores), P after dropout and dS in their place (CUDA cores), then
// dV += P^T dO and dK += dS^T Q (tensor cores).
__global__ void flash_key_value_gradient_tc_kernel(Flash f) {
#if TFM_TENSOR_CORES
  extern __shared__ __align__(128) float tc_smem[];
  const int64_t dk = f.s.dk, kv_heads = f.s.heads / f.s.group;
  const int ld = padded_ld(dk), width = padded_width(dk), R = static_cast<int>(blockDim.x) / kWarp * kMmaRows;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp, r0 = warp * kMmaRows;
  float *key = tc_smem, *value = key + R * ld, *dk_acc = value + R * ld, *dv_acc = dk_acc + R * ld, *queries = dv_acc + R * ld;
  float *grads = queries + kWalk * ld, *scores = grads + kWalk * ld, *dscores = scores + R * kWalkLd, *lse = dscores + R * kWalkLd;
  float* row_dot = lse + kWalk;
  for (int64_t block = blockIdx.x; block < shares(f.s.B, kv_heads, f.s.tk, R); block += gridDim.x) {
    const Share sh = share_of(block, kv_heads, f.s.tk, R);
    const int64_t b = sh.b, kvh = sh.h, nq = f.q.size(b), nk = f.k.size(b), j0 = sh.first, j_end = std::min(j0 + R, nk);
    if (j0 >= nk) continue;  // (the same for the whole block)
    __syncthreads();  // (the last share's readers are done)
    load_padded_tile(key, R, j_end - j0, dk, [&](int64_t r) { return f.k.row(b, j0 + r) + kvh * dk; });
    load_padded_tile(value, R, j_end - j0, dk, [&](int64_t r) { return f.v.row(b, j0 + r) + kvh * dk; });
    fill_rows(dk_acc, 2 * R, ld, 0.0f);  // (dk_acc and dv_acc)
    const int64_t start = f.causal ? std::max(int64_t{0}, j0 + nq - nk) : 0;  // the first query that sees key j0
    for (int64_t h = kvh * f.s.group; h < (kvh + 1) * f.s.group; ++h)
      for (int64_t t0 = start; t0 == start || t0 < nq; t0 += kWalk) {
        const int64_t n = std::max(int64_t{0}, std::min(int64_t{kWalk}, nq - t0));
        __syncthreads();
        load_padded_tile(queries, kWalk, n, dk, [&](int64_t r) { return f.q.row(b, t0 + r) + h * dk; });
        load_padded_tile(grads, kWalk, n, dk, [&](int64_t r) { return f.g.row(b, t0 + r) + h * dk; });
        for (int c = threadIdx.x; c < kWalk; c += blockDim.x) {
          lse[c] = c < n ? f.lse[f.stat(b, h, t0 + c)] : -INFINITY;
          row_dot[c] = c < n ? f.row_dot[f.stat(b, h, t0 + c)] : 0.0f;
        }
        __syncthreads();
        float *s = scores + r0 * kWalkLd, *ds = dscores + r0 * kWalkLd;
        warp_product<true>(key + r0 * ld, ld, queries, ld, s, kWalkLd, kWalk, width, false);
        warp_product<true>(value + r0 * ld, ld, grads, ld, ds, kWalkLd, kWalk, width, false);
        __syncwarp();
        for (int r = r0; r < r0 + kMmaRows; ++r)
          for (int u = 0; u < 2; ++u) {
            const int64_t cl = lane + u * kWarp, e = r * kWalkLd + cl;
            float weight;
            dscores[e] = tc_score_gradient(f, b, h, t0 + cl, j0 + r, j0 + r < j_end && cl < n, lse[cl], row_dot[cl], scores[e],
                                           dscores[e], &weight);
            scores[e] = weight;
          }
        __syncwarp();
        warp_product<false>(s, kWalkLd, grads, ld, dv_acc + r0 * ld, ld, width, kWalk, true);
        warp_product<false>(ds, kWalkLd, queries, ld, dk_acc + r0 * ld, ld, width, kWalk, true);
        __syncwarp();
      }
    for (int r = r0; r < r0 + kMmaRows && j0 + r < j_end; ++r)
      for (int64_t c = lane; c < dk; c += kWarp) {
        f.dk.row(b, j0 + r)[kvh * dk + c] = dk_acc[r * ld + c];
        f.dv.row(b, j0 + r)[kvh * dk + c] = dv_acc[r * ld + c];
      }
  }
#else
  __trap();
#endif
}

// Shared memory of each kernel, in bytes, for heads dk wide: the forward and the score
// gradients one tile and a row for each warp (9 KiB for heads of 64, so that 16 blocks of
// 128 threads fit an SM: a second tile in the forward, or the scores kept in shared
// memory, let fewer fit and ran slower, windows 20-22 of scripts/gpu/NOTES.md); the keys'
// gradients two tiles and two blocks of columns (with one of each, taken in turn, they
// ran slower: 3.8 against 3.2 ms a step, window 23).
size_t row_kernel_smem(int64_t dk) { return sizeof(float) * static_cast<size_t>(kTile * (dk + 1) + kWarps * dk); }
size_t key_value_smem(int64_t dk) { return sizeof(float) * static_cast<size_t>(2 * kTile * (dk + 1) + 2 * kTile * (kTile + 1)); }
// The flash kernels: two tiles, and the forward's rows of output so far, maxima and sums
// and a query a warp (25 KiB for heads of 64), or the backward's two rows a warp.
size_t flash_forward_smem(int64_t dk) { return sizeof(float) * static_cast<size_t>(2 * kTile * (dk + 1) + kTile * dk + 2 * kTile + kWarps * dk); }
size_t flash_backward_smem(int64_t dk) { return sizeof(float) * static_cast<size_t>(2 * kTile * (dk + 1) + kWarps * 2 * dk); }

// The tensor-core kernels' shared memory, in bytes, for blocks of `warps` warps (16 rows
// each) and heads dk wide: the forward its rows of queries and output so far, a tile of
// keys and of values, its rows' scores, maxima and sums (91 KiB for 4 warps and heads of
// 64); the queries' gradients their rows of queries, output gradients and dQ, the tiles,
// scores and dP, lse and dO . O (127 KiB); the keys' their rows of keys, values, dK and
// dV, a tile of queries and of output gradients, scores and dP, lse and dO . O (145 KiB).
// Untuned: one or two blocks an SM (the next window measures).
size_t tc_floats(int rows_tiles, int walk_tiles, int score_rows, int stats, int64_t dk) {
  return sizeof(float) * static_cast<size_t>((rows_tiles + walk_tiles * kWalk) * padded_ld(dk) + score_rows * kWalkLd + stats);
}
size_t flash_forward_tc_smem(int warps, int64_t dk) {
  const int R = warps * kMmaRows;
  return tc_floats(2 * R, 2, R, 2 * R, dk);
}
size_t flash_query_gradient_tc_smem(int warps, int64_t dk) {
  const int R = warps * kMmaRows;
  return tc_floats(3 * R, 2, 2 * R, 2 * R, dk);
}
size_t flash_key_value_gradient_tc_smem(int warps, int64_t dk) {
  const int R = warps * kMmaRows;
  return tc_floats(4 * R, 2, 2 * R, 2 * kWalk, dk);
}

// The warps a block of a tensor-core kernel gets: the most (4, 2 or 1) whose shared
// memory fits the GPU's limit a block; 0 where the GPU has no TF32 tensor cores (before
// sm_80), no block fits (heads too wide) or TFM_TENSOR_CORE_ATTENTION=0 is set (to check
// or time the two against each other): the CUDA cores' flash kernels take the call.
int tensor_core_warps(size_t (*smem)(int, int64_t), int64_t dk) {
  static const bool allowed = env_switch("TFM_TENSOR_CORE_ATTENTION", true);
  if (!allowed) return 0;
  thread_local int known = -1, major = 0, limit = 0;  // (this thread's device, as last asked)
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  if (device != known) {
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "cudaDeviceGetAttribute");
    known = device;
  }
  if (major < 8) return 0;
  for (int warps = kTensorCoreWarps; warps >= 1; warps /= 2)
    if (smem(warps, dk) <= static_cast<size_t>(limit)) return warps;
  return 0;
}

// Launches `kernel` over `count` shares with `smem` bytes of shared memory (beyond 48 KiB
// once allowed for the kernel: the default limit).
template <class Args>
void launch(void (*kernel)(Args), const Args& args, int64_t count, size_t smem, const char* name, int warps = kWarps) {
  if (count == 0) return;
  if (smem > 48 * 1024) check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)), name);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(count, int64_t{1} << 20));
  kernel<<<blocks, warps * kWarp, smem, stream()>>>(args);
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
  launch(attention_kernel, f, shares(f.s.B, f.s.heads, f.s.tq), row_kernel_smem(f.s.dk), "attention_kernel");
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
  launch(score_query_gradient_kernel, w, shares(w.s.B, w.s.heads, w.s.tq), row_kernel_smem(w.s.dk), "score_query_gradient_kernel");
  launch(key_value_gradient_kernel, w, shares(w.s.B, w.s.heads / w.s.group, w.s.tk), key_value_smem(w.s.dk), "key_value_gradient_kernel");
}

namespace {

// The flash kernels' view of a call: the operands, the mask, and the gradients' tensors
// where given.
Flash flash_call(const AttentionCall& c, const Tensor& out, const Tensor& lse, const Tensor* g = nullptr, const Tensor* dq = nullptr,
                 const Tensor* dk = nullptr, const Tensor* dv = nullptr) {
  const PackedSequences *packed_q = c.mask->packed_queries.get(), *packed_k = c.mask->packed_keys.get();
  const DevicePacking pq = device_packing(packed_q), pk = device_packing(packed_k);
  Flash f{};
  f.q = side(c.q, packed_q, pq), f.k = side(c.k, packed_k, pk), f.v = side(c.v, packed_k, pk), f.out = side(out, packed_q, pq);
  if (g) f.g = side(*g, packed_q, pq), f.dq = side(*dq, packed_q, pq), f.dk = side(*dk, packed_k, pk), f.dv = side(*dv, packed_k, pk);
  f.s = geometry(c, f.q, f.k);
  expect_head_width(f.s.dk);
  f.lse = ptr<float>(lse);
  f.padding = c.mask->key_padding.defined() ? ptr<bool>(c.mask->key_padding) : nullptr;
  f.causal = c.mask->causal;
  return f;
}

}  // namespace

void flash_attention(const AttentionCall& c, Tensor& out, Tensor& lse) {
  const Flash f = flash_call(c, out, lse);
  if (const int warps = tensor_core_warps(flash_forward_tc_smem, f.s.dk))
    launch(flash_forward_tc_kernel, f, shares(f.s.B, f.s.heads, f.s.tq, warps * kMmaRows), flash_forward_tc_smem(warps, f.s.dk),
           "flash_forward_tc_kernel", warps);
  else
    launch(flash_forward_kernel, f, shares(f.s.B, f.s.heads, f.s.tq), flash_forward_smem(f.s.dk), "flash_forward_kernel");
}

void flash_attention_backward(const AttentionCall& c, const Tensor& out, const Tensor& lse, const Tensor& g, Tensor& dq, Tensor& dk,
                              Tensor& dv) {
  Flash f = flash_call(c, out, lse, &g, &dq, &dk, &dv);
  const Tensor row_dot = Tensor::empty(lse.shape(), DType::f32, Device::CUDA);
  f.row_dot = ptr<float>(row_dot);
  const int64_t rows = f.s.B * f.s.heads * f.s.tq;
  launch(flash_row_dot_kernel, f, (rows + kWarps - 1) / kWarps, 0, "flash_row_dot_kernel");
  if (const int warps = tensor_core_warps(flash_query_gradient_tc_smem, f.s.dk))
    launch(flash_query_gradient_tc_kernel, f, shares(f.s.B, f.s.heads, f.s.tq, warps * kMmaRows),
           flash_query_gradient_tc_smem(warps, f.s.dk), "flash_query_gradient_tc_kernel", warps);
  else
    launch(flash_query_gradient_kernel, f, shares(f.s.B, f.s.heads, f.s.tq), flash_backward_smem(f.s.dk), "flash_query_gradient_kernel");
  const int64_t kv_heads = f.s.heads / f.s.group;
  if (const int warps = tensor_core_warps(flash_key_value_gradient_tc_smem, f.s.dk))
    launch(flash_key_value_gradient_tc_kernel, f, shares(f.s.B, kv_heads, f.s.tk, warps * kMmaRows),
           flash_key_value_gradient_tc_smem(warps, f.s.dk), "flash_key_value_gradient_tc_kernel", warps);
  else
    launch(flash_key_value_gradient_kernel, f, shares(f.s.B, kv_heads, f.s.tk), flash_backward_smem(f.s.dk),
           "flash_key_value_gradient_kernel");
}

}  // namespace tfm::ops::cuda
