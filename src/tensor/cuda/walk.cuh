#pragma once
// How the GPU's element-wise kernels walk two operands of any strides over one shape
// (a strided copy or add, a broadcasting binary op, a sum over broadcast dims): the
// dims merged on the host wherever they walk memory as one, so that most calls walk one
// dim (both contiguous) or two (a bias broadcast over rows), and index arithmetic in
// 32 bits wherever every offset fits. A 64-bit division is some 70 instructions on the
// GPU: the unmerged 64-bit walk made gradient accumulation (`strided_add`, three dims,
// two divisions a dim an element) 7 ms of a base Transformer's 84 ms bf16 step, about
// 5 times its memory traffic (H200, scripts/gpu/NOTES.md window 15).
#include <cstdint>

#include "tensor/error.h"

namespace tfm::cuda {

constexpr int kMaxWalkDims = 8;

// Up to kMaxWalkDims dims and two operands' element strides over them.
struct Walk {
  int dims = 0;
  int64_t size[kMaxWalkDims] = {};
  int64_t a[kMaxWalkDims] = {};
  int64_t b[kMaxWalkDims] = {};
};

// Appends a dim of `size` with strides sa and sb (outermost first), merged into the
// last one where that walks the same offsets (a contiguous run, or a broadcast run of
// stride 0); size-1 dims are dropped.
inline void append(Walk& w, int64_t size, int64_t sa, int64_t sb) {
  if (size == 1) return;
  const int last = w.dims - 1;
  if (last >= 0 && w.a[last] == sa * size && w.b[last] == sb * size) {
    w.size[last] *= size;
    w.a[last] = sa;
    w.b[last] = sb;
    return;
  }
  TFM_CHECK(w.dims < kMaxWalkDims, "cuda: element-wise walks of more than " << kMaxWalkDims << " dimensions are not supported");
  w.size[w.dims] = size, w.a[w.dims] = sa, w.b[w.dims] = sb;
  ++w.dims;
}

// for (i in [0, n)) spread over the whole grid, i of type Index.
#define TFM_GRID_STRIDE_AS(Index, i, n)                                                                        \
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + static_cast<Index>(threadIdx.x); \
       i < (n); i += static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x))

// Whether a grid-stride loop over n elements may count in int32: n and the loop's last
// step past it (a grid of at most 65,535 blocks of at most 1,024 threads) stay below 2^31.
inline bool index_fits_in_32_bits(int64_t n) { return n <= INT32_MAX - (int64_t{65535} << 10); }

// The same, and every offset of both operands fits too (strides are never negative here).
inline bool fits_in_32_bits(const Walk& w, int64_t n) {
  int64_t last_a = 0, last_b = 0;
  for (int d = 0; d < w.dims; ++d) last_a += (w.size[d] - 1) * w.a[d], last_b += (w.size[d] - 1) * w.b[d];
  return index_fits_in_32_bits(n) && last_a <= INT32_MAX && last_b <= INT32_MAX;
}

// Offsets into a and b of flat (row-major) index i of w's dims, in Index arithmetic.
template <class Index>
__device__ inline void walk_offsets(const Walk& w, Index i, Index& oa, Index& ob) {
  if (w.dims == 1) {  // (most calls: no division)
    oa = i * static_cast<Index>(w.a[0]), ob = i * static_cast<Index>(w.b[0]);
    return;
  }
  oa = 0, ob = 0;
  for (int d = w.dims - 1; d >= 0; --d) {
    const Index size = static_cast<Index>(w.size[d]), at = i % size;
    i /= size;
    oa += at * static_cast<Index>(w.a[d]);
    ob += at * static_cast<Index>(w.b[d]);
  }
}

}  // namespace tfm::cuda
