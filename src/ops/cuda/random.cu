// Random fills, token sampling and the sinusoid position table on the GPU: the draws
// of tensor/rng.h's stream that the CPU's kernels take, element for element.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "ops/cuda/kernels.h"
#include "ops/host_rules.h"
#include "ops/cuda/launch.cuh"
#include "tensor/error.h"
#include "tensor/rng.h"

namespace tfm::ops::cuda {

namespace {

constexpr unsigned kAllLanes = 0xffffffffu;

// The first draw of Rng(state): Rng::uniform's double in [0, 1).
__device__ double uniform_draw(uint64_t state) { return static_cast<double>(splitmix64(state) >> 11) * (1.0 / 9007199254740992.0); }

// t [n]: element i is Rng(counter + i).uniform(a, b), or Rng(counter + 2i).normal() * a
// (Box-Muller over draws counter + 2i and + 2i + 1, in double as Rng::normal), as
// cpu/random.cpp's random_fill.
__global__ void random_fill_kernel(float* t, int64_t n, bool normal, float a, float b, uint64_t counter) {
  TFM_GRID_STRIDE(i, n) {
    if (!normal) {
      const double lo = a, hi = b;
      t[i] = static_cast<float>(lo + (hi - lo) * uniform_draw(counter + static_cast<uint64_t>(i)));
    } else {
      const uint64_t s = counter + 2 * static_cast<uint64_t>(i);
      const double u1 = 1.0 - uniform_draw(s), u2 = uniform_draw(s + 1);  // 1 - u keeps the logarithm finite
      t[i] = static_cast<float>(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2)) * a;
    }
  }
}

// The better of two (logit, id) candidates: the larger logit, the lower id on ties
// (std::max_element's first largest); id -1 is none.
__device__ void better(float& v, int& id, float ov, int oid) {
  if (oid >= 0 && (id < 0 || ov > v || (ov == v && oid < id))) v = ov, id = oid;
}

// ids [rows] = each row's greedy pick (its first largest logit) and finite [rows] =
// whether every logit of the row is finite, a block a row.
__global__ void greedy_kernel(const float* logits, int64_t rows, int64_t vocab, int32_t* ids, uint8_t* finite) {
  __shared__ float warp_v[32];
  __shared__ int warp_id[32], warp_finite[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = logits + r * vocab;
    float v = 0.0f;
    int id = -1, ok = 1;
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      ok &= isfinite(x[j]) ? 1 : 0;
      better(v, id, x[j], static_cast<int>(j));
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(kAllLanes, v, o);
      const int oid = __shfl_xor_sync(kAllLanes, id, o);
      ok &= __shfl_xor_sync(kAllLanes, ok, o);
      better(v, id, ov, oid);
    }
    __syncthreads();  // the previous row's readers are done with the shared arrays
    if ((threadIdx.x & 31) == 0) warp_v[threadIdx.x / 32] = v, warp_id[threadIdx.x / 32] = id, warp_finite[threadIdx.x / 32] = ok;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (unsigned w = 1; w < blockDim.x / 32; ++w) {
        better(v, id, warp_v[w], warp_id[w]);
        ok &= warp_finite[w];
      }
      ids[r] = id;
      finite[r] = static_cast<uint8_t>(ok);
    }
  }
}


// table [max_len, d_model]: pair i of position pos (one thread each) is
// sin and cos of pos / 10000^(2i / d_model), in double as cpu/random.cpp's sinusoids;
// `rate` is its -(log(10000) / d_model), computed on the host as the CPU does.
// fairseq's table in single precision, as cpu/random.cpp's fairseq_sinusoids (the
// frequency and the angle rounded to float, then sin and cos of it in double).
__global__ void fairseq_sinusoids_kernel(float* table, int64_t max_len, int64_t d_model, int64_t first, float rate) {
  const int64_t half = d_model / 2;
  TFM_GRID_STRIDE(w, max_len * half) {
    const int64_t row = w / half, c = w % half;
    const float frequency = expf(static_cast<float>(c) * -rate), angle = __fmul_rn(static_cast<float>(first + row), frequency);
    table[row * d_model + c] = static_cast<float>(sin(static_cast<double>(angle)));
    table[row * d_model + half + c] = static_cast<float>(cos(static_cast<double>(angle)));
  }
}

__global__ void sinusoids_kernel(float* table, int64_t max_len, int64_t d_model, bool split, double rate) {
  const int64_t half = (d_model + 1) / 2;
  TFM_GRID_STRIDE(w, max_len * half) {
    const int64_t pos = w / half, i = 2 * (w % half);
    const double angle = static_cast<double>(pos) * exp(static_cast<double>(i) * rate);
    const int64_t sin_at = split ? i / 2 : i, cos_at = split ? half + i / 2 : i + 1;
    table[pos * d_model + sin_at] = static_cast<float>(sin(angle));
    if (i + 1 < d_model) table[pos * d_model + cos_at] = static_cast<float>(cos(angle));
  }
}

}  // namespace

void random_fill(Tensor& t, Distribution d, float a, float b, uint64_t counter) {
  const int64_t n = t.numel();
  if (n == 0) return;
  random_fill_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(ptr<float>(t), n, d == Distribution::normal, a, b, counter);
  check_launch("random_fill");
}

// Greedy batches without penalties are picked on the GPU (only the finiteness flags come
// back); others on the host from the logits copied back, so the picks are the CPU's exactly.
void sample(const Tensor& logits, const std::vector<SampledRow>& rows, Tensor& ids) {
  const int64_t n = logits.size(0), vocab = logits.size(1);
  if (n == 0) return;
  if (std::all_of(rows.begin(), rows.end(), [](const SampledRow& r) { return r.sampling.temperature <= 0.0f && !r.sampling.penalizes(); })) {
    Tensor finite = Tensor::empty({n}, DType::u8, Device::CUDA);
    greedy_kernel<<<blocks_for(n, 1), kThreads, 0, stream()>>>(ptr<float>(logits), n, vocab, ptr<int32_t>(ids), ptr<uint8_t>(finite));
    check_launch("sample");
    const std::vector<uint8_t> ok = finite.values<uint8_t>();
    if (!std::all_of(ok.begin(), ok.end(), [](uint8_t f) { return f != 0; })) fail_not_finite("scores");
    return;
  }
  const std::vector<float> host = logits.values<float>();
  std::vector<int32_t> picks(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) picks[r] = sample_row(host.data() + r * vocab, vocab, rows[r]);
  ids.copy_from(Tensor::from_values<int32_t>({n}, picks));
}

void sinusoids(Tensor& table, SinusoidLayout layout, int64_t first) {
  const int64_t max_len = table.size(0), d_model = table.size(1);
  if (max_len == 0 || d_model == 0) return;
  if (layout == SinusoidLayout::fairseq) {
    const float rate = static_cast<float>(std::log(10000.0) / static_cast<double>(d_model / 2 - 1));
    fairseq_sinusoids_kernel<<<blocks_for(max_len * (d_model / 2)), kThreads, 0, stream()>>>(ptr<float>(table), max_len, d_model, first, rate);
    return check_launch("sinusoids");
  }
  const double rate = -(std::log(10000.0) / static_cast<double>(d_model));
  sinusoids_kernel<<<blocks_for(max_len * ((d_model + 1) / 2)), kThreads, 0, stream()>>>(ptr<float>(table), max_len, d_model,
                                                                                         layout == SinusoidLayout::split, rate);
  check_launch("sinusoids");
}

}  // namespace tfm::ops::cuda
