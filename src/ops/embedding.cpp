#include "ops/embedding.h"

#include <cstring>

#include "autograd/autograd.h"
#include "threads/parallel.h"
#include "tensor/error.h"

namespace tfm::ops {

Tensor embedding(const Tensor& weight, const std::vector<int>& ids, const Shape& ids_shape) {
  TFM_CHECK(weight.dim() == 2 && weight.is_contiguous(), "embedding: weight must be a contiguous [vocab, dim] table");
  TFM_CHECK(static_cast<int64_t>(ids.size()) == shape_numel(ids_shape), "embedding: " << ids.size() << " ids for shape " << shape_str(ids_shape));
  const int64_t vocab = weight.size(0), d = weight.size(1), n = static_cast<int64_t>(ids.size());
  for (int id : ids) TFM_CHECK(id >= 0 && id < vocab, "token id " << id << " outside the vocabulary of " << vocab);
  Shape shape = ids_shape;
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

}  // namespace tfm::ops
