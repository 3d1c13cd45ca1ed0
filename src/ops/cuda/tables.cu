// Indexing kernels on the GPU (ops/cpu/tables.cpp's counterparts): embedding lookups
// and their scatter-add, row gathers and theirs, comparisons, image patches, position
// ranges. The scatter-adds give each output element to one thread, which adds its rows'
// gradients in index order from 0: the CPU's serial sums, bitwise, and no atomics.
//
// Index checks copy the indices to the host (a wait for the queued work) for now; the
// scatter-adds sort them into per-row lists on the device.
#include <cub/device/device_radix_sort.cuh>

#include <cstdint>

#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"

namespace tfm::ops::cuda {

namespace {

// Which indices point at each of `count` rows, in index order: row r's are
// order[offsets[r], offsets[r + 1]).
struct RowLists {
  Tensor offsets, order;  // i64 [count + 1], i64 [n], on the device
};

__global__ void positions_kernel(int64_t* out, int64_t n) {
  TFM_GRID_STRIDE(i, n) out[i] = i;
}

// offsets[r] = the first k with sorted[k] >= r, for r in [0, count]: where row r's list
// starts (indices outside [0, count) fall before offsets[0] or from offsets[count] on).
template <class Index>
__global__ void list_offsets_kernel(const Index* sorted, int64_t n, int64_t* offsets, int64_t count) {
  TFM_GRID_STRIDE(r, count + 1) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (static_cast<int64_t>(sorted[mid]) < r) lo = mid + 1;
      else hi = mid;
    }
    offsets[r] = lo;
  }
}

// The lists, made on the device: the positions 0..n-1 sorted by their index with CUB's
// radix sort, which is stable (so each list is in index order, and the same every run),
// then each row's start by a binary search. (Made on the host, the lists cost a copy of
// the indices back, a wait for the step's queued work, about 2 ms of a base
// Transformer's bf16 step on an H200 with the GPU idle, window 17.) The indices were
// checked by the forward that took them (embedding, gather_rows).
template <class Index>
RowLists row_lists(const Tensor& index, int64_t count) {
  const int64_t n = index.numel();
  TFM_CHECK(n <= INT32_MAX, "scatter-add: " << n << " indices");
  const DType index_type = index.dtype();
  Tensor positions = Tensor::empty({n}, DType::i64, Device::CUDA), sorted = Tensor::empty({n}, index_type, Device::CUDA);
  RowLists lists{Tensor::empty({count + 1}, DType::i64, Device::CUDA), Tensor::empty({n}, DType::i64, Device::CUDA)};
  if (n > 0) {
    positions_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(ptr<int64_t>(positions), n);
    check_launch("scatter-add lists");
    const Index* keys = ptr<Index>(index);
    size_t bytes = 0;
    check(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, ptr<Index>(sorted), ptr<int64_t>(positions), ptr<int64_t>(lists.order),
                                          static_cast<int>(n), 0, static_cast<int>(8 * sizeof(Index)), stream()),
          "scatter-add lists (sort)");
    Tensor scratch = Tensor::empty({static_cast<int64_t>(bytes)}, DType::u8, Device::CUDA);
    check(cub::DeviceRadixSort::SortPairs(scratch.device_ptr(), bytes, keys, ptr<Index>(sorted), ptr<int64_t>(positions),
                                          ptr<int64_t>(lists.order), static_cast<int>(n), 0, static_cast<int>(8 * sizeof(Index)), stream()),
          "scatter-add lists (sort)");
  }
  list_offsets_kernel<Index><<<blocks_for(count + 1), kThreads, 0, stream()>>>(ptr<Index>(sorted), n, ptr<int64_t>(lists.offsets), count);
  check_launch("scatter-add lists");
  return lists;
}

// out[r, c] = sum over k in row r's list (in order, from 0) of g[order[k], c]:
// out [rows, d], g [n, d]; one thread per element of out. The terms are loaded
// kInFlight at a time before they are added (in order): a frequent token's row (the
// padding's, an end of sentence: thousands of terms) otherwise waited on two dependent
// loads a term (1 ms a call on an H200, window 15; 8 at a time: 0.5 ms, window 18).
constexpr int kInFlight = 32;

__global__ void scatter_add_kernel(const int64_t* offsets, const int64_t* order, const float* g, float* out, int64_t d, int64_t n) {
  TFM_GRID_STRIDE(e, n) {
    const int64_t r = e / d, c = e % d, end = offsets[r + 1];
    float acc = 0.0f;
    int64_t k = offsets[r];
    for (; k + kInFlight <= end; k += kInFlight) {
      float term[kInFlight];
#pragma unroll
      for (int j = 0; j < kInFlight; ++j) term[j] = g[order[k + j] * d + c];
#pragma unroll
      for (int j = 0; j < kInFlight; ++j) acc += term[j];
    }
    for (; k < end; ++k) acc += g[order[k] * d + c];
    out[e] = acc;
  }
}

// dx [rows, d] from g [index.size(), d]: each row gets the gradients of the indices that
// point at it, added in index order.
template <class Index>
void scatter_add(const Tensor& index, const Tensor& g, Tensor& dx) {
  const int64_t rows = dx.size(0), d = rows > 0 ? dx.numel() / rows : 0, n = rows * d;
  if (n == 0) return;
  const RowLists lists = row_lists<Index>(index, rows);
  scatter_add_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(ptr<int64_t>(lists.offsets), ptr<int64_t>(lists.order), ptr<float>(g),
                                                               ptr<float>(dx), d, n);
  check_launch("scatter_add_kernel");
}

// out[i, c] = w[ids[i], c]: out [n, d].
__global__ void embedding_kernel(const float* w, const int32_t* ids, float* out, int64_t d, int64_t n) {
  TFM_GRID_STRIDE(e, n) out[e] = w[static_cast<int64_t>(ids[e / d]) * d + e % d];
}

__global__ void arange_kernel(int64_t start, int32_t* out, int64_t n) {
  TFM_GRID_STRIDE(i, n) out[i] = static_cast<int32_t>(start + i);
}

// out[i, c] = x[rows[i], c] for elements of any 1, 2, 4 or 8-byte type T: out [n, row].
template <class T>
__global__ void gather_kernel(const T* x, const int64_t* rows, T* out, int64_t row, int64_t n) {
  TFM_GRID_STRIDE(e, n) out[e] = x[rows[e / row] * row + e % row];
}

template <class T>
void gather_as(const Tensor& x, const Tensor& rows, Tensor& out, int64_t row) {
  const int64_t n = out.numel();
  gather_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(static_cast<const T*>(x.device_ptr()), ptr<int64_t>(rows),
                                                             static_cast<T*>(out.device_ptr()), row, n);
  check_launch("gather_kernel");
}

__global__ void equal_kernel(const int32_t* x, int64_t value, bool* out, int64_t n) {
  TFM_GRID_STRIDE(i, n) out[i] = x[i] == value;
}

// Patch n of image b is row b * patches + n of out, its elements (channel, dy, dx) in
// that order: out [B, gh * gw, C * P * P] from images [B, C, H, W].
__global__ void patchify_kernel(const float* src, float* out, int64_t C, int64_t H, int64_t W, int64_t P, int64_t total) {
  const int64_t gw = W / P, patches = (H / P) * gw, width = C * P * P;
  TFM_GRID_STRIDE(e, total) {
    const int64_t patch = e / width, k = e % width;
    const int64_t b = patch / patches, n = patch % patches, c = k / (P * P), dy = k / P % P, dx = k % P;
    const int64_t y0 = (n / gw) * P, x0 = (n % gw) * P;
    out[e] = src[((b * C + c) * H + y0 + dy) * W + x0 + dx];
  }
}

}  // namespace

// out [.., d] = rows of w [vocab, d] by ids.
void embedding(const Tensor& w, const Tensor& ids, Tensor& out) {
  const int64_t d = w.size(1), n = ids.numel() * d;  // (each id a row of w: ops::checked_indices)
  if (n == 0) return;
  embedding_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(ptr<float>(w), ptr<int32_t>(ids), ptr<float>(out), d, n);
  check_launch("embedding_kernel");
}

// dw [vocab, d] = the rows of g [.., d] added up by id, in id order (the CPU's serial sum).
void embedding_backward(const Tensor& ids, const Tensor& g, Tensor& dw) {
  scatter_add<int32_t>(ids, g, dw);
}

void arange(int64_t start, Tensor& out) {
  arange_kernel<<<blocks_for(out.numel()), kThreads, 0, stream()>>>(start, ptr<int32_t>(out), out.numel());
  check_launch("arange_kernel");
}

// out [n, ..] = rows of x (any dtype) by i64 indices (each a row of x: ops::checked_indices).
void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) {
  const int64_t row = x.size(0) > 0 ? x.numel() / x.size(0) : 0;
  if (out.numel() == 0) return;
  switch (size_of(x.dtype())) {
    case 1: return gather_as<uint8_t>(x, rows, out, row);
    case 2: return gather_as<uint16_t>(x, rows, out, row);
    case 4: return gather_as<uint32_t>(x, rows, out, row);
    case 8: return gather_as<uint64_t>(x, rows, out, row);
  }
  throw Error("gather_rows: no kernel for " + to_string(x.dtype()));
}

// dx = g's rows added back where they were gathered from: a row gathered twice gets
// both gradients, in index order.
void gather_rows_backward(const Tensor& rows, const Tensor& g, Tensor& dx) {
  scatter_add<int64_t>(rows, g, dx);
}

void patchify(const Tensor& images, int64_t patch, Tensor& out) {
  const int64_t n = out.numel();
  patchify_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(ptr<float>(images), ptr<float>(out), images.size(1), images.size(2),
                                                            images.size(3), patch, n);
  check_launch("patchify_kernel");
}

void equal(const Tensor& x, int64_t value, Tensor& out) {
  equal_kernel<<<blocks_for(x.numel()), kThreads, 0, stream()>>>(ptr<int32_t>(x), value, ptr<bool>(out), x.numel());
  check_launch("equal_kernel");
}

}  // namespace tfm::ops::cuda
