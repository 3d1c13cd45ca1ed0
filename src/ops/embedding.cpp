#include "ops/embedding.h"

#include <climits>
#include <cstring>

#include "autograd/autograd.h"
#include "threads/parallel.h"
#include "tensor/error.h"

namespace tfm::ops {

Tensor embedding(const Tensor& weight, const Tensor& token_ids) {
  TFM_CHECK(weight.dim() == 2 && weight.is_contiguous(), "embedding: weight must be a contiguous [vocab, dim] table");
  TFM_CHECK(token_ids.dtype() == DType::i32, "embedding: token ids must be i32, got " << to_string(token_ids.dtype()));
  const std::vector<int32_t> ids = token_ids.values<int32_t>();
  const int64_t vocab = weight.size(0), d = weight.size(1), n = static_cast<int64_t>(ids.size());
  for (int id : ids) TFM_CHECK(id >= 0 && id < vocab, "token id " << id << " outside the vocabulary of " << vocab);
  Shape shape = token_ids.shape();
  shape.push_back(d);
  Tensor out = Tensor::empty(shape);
  parallel_for(n, n * d > (1 << 15), [&](int64_t i) { std::memcpy(out.data() + i * d, weight.data() + ids[i] * d, sizeof(float) * d); });
  Shape wshape = weight.shape();
  return autograd::record(out, "embedding", {weight}, [ids, wshape, d](const Tensor& g) {
    // Serial scatter-add: ids repeat, and a fixed order keeps results reproducible.
    Tensor dw = Tensor::zeros(wshape);
    for (size_t i = 0; i < ids.size(); ++i) {
      float* row = dw.data() + static_cast<int64_t>(ids[i]) * d;
      const float* gr = g.data() + static_cast<int64_t>(i) * d;
      for (int64_t j = 0; j < d; ++j) row[j] += gr[j];
    }
    return std::vector<Tensor>{dw};
  });
}

Tensor arange(int64_t start, int64_t end) {
  TFM_CHECK(start <= end && end <= INT32_MAX, "arange: [" << start << ", " << end << ") is not a range of i32 positions");
  Tensor out = Tensor::empty({end - start}, DType::i32);
  int32_t* p = out.data_as<int32_t>();
  for (int64_t i = start; i < end; ++i) p[i - start] = static_cast<int32_t>(i);
  return out;
}

}  // namespace tfm::ops
