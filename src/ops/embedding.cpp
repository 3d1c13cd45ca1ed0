#include "ops/embedding.h"

#include <climits>
#include <string>

#include "autograd/autograd.h"
#include "ops/dispatch.h"
#include "tensor/error.h"

namespace tfm::ops {

Tensor embedding(const Tensor& weight, const Tensor& token_ids) {
  TFM_CHECK(weight.dim() == 2 && weight.is_contiguous(), "embedding: weight must be a contiguous [vocab, dim] table");
  expect_dtype("embedding", "the weight", weight, DType::f32);
  expect_dtype("embedding", "the token ids", token_ids, DType::i32);
  const int64_t vocab = weight.size(0);
  const Tensor ids = checked_indices(token_ids, vocab, weight.device(),
                                     [vocab](int64_t id) { return "token id " + std::to_string(id) + " outside the vocabulary of " + std::to_string(vocab); });
  auto fn = kernel("embedding", &Kernels::embedding, {weight, ids});
  Shape shape = ids.shape();
  shape.push_back(weight.size(1));
  Tensor out = Tensor::empty(shape, DType::f32, weight.device());
  fn(weight, ids, out);
  const Shape wshape = weight.shape();
  return autograd::record(out, "embedding", {weight}, [ids, wshape](const Tensor& g) {
    Tensor dw = Tensor::empty(wshape, DType::f32, g.device());
    kernel("embedding", &Kernels::embedding_backward, {ids, g})(ids, dense(g), dw);
    return std::vector<Tensor>{dw};
  });
}

Tensor arange(int64_t start, int64_t end, Device device) {
  TFM_CHECK(start <= end && end <= INT32_MAX, "arange: [" << start << ", " << end << ") is not a range of i32 positions");
  Tensor out = Tensor::empty({end - start}, DType::i32, device);
  auto fn = kernels(device).arange;
  if (!fn) fail_unimplemented("arange", device);
  fn(start, out);
  return out;
}

}  // namespace tfm::ops
