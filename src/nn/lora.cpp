#include "nn/lora.h"

#include <algorithm>
#include <cmath>

#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/random.h"
#include "ops/shape.h"
#include "tensor/error.h"

namespace tfm::nn {

Lora::Lora(int64_t in, int64_t out, int64_t rank, float alpha) : scaling(alpha / static_cast<float>(rank)) {
  TFM_CHECK(rank > 0, "a LoRA adapter's rank must be at least 1 (got " << rank << ")");
  A = Tensor::zeros({rank, in});
  B = Tensor::zeros({out, rank});
  register_parameter("lora_A.weight", A);  // (PEFT's names: its lora_A and lora_B are Linear modules)
  register_parameter("lora_B.weight", B);
}

Tensor Lora::forward(const Tensor& x) const {
  const Tensor down = ops::linear(x, A, Tensor(), products());  // [..., rank]
  return ops::scale(ops::linear(down, B, Tensor(), products()), scaling);  // [..., out]
}

Tensor Lora::delta() const {
  const Tensor a_t = ops::contiguous(ops::transpose(A, 0, 1));  // [in, rank]
  return ops::scale(ops::linear(B, a_t, Tensor(), products()), scaling);  // [out, rank] x [rank, in]
}

void Lora::init_parameters(Rng& rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(A.size(1)));  // kaiming_uniform_(a=sqrt(5)): gain sqrt(1/3) x sqrt(3 / in)
  ops::uniform_(A, -bound, bound, rng);  // (B: zeros since construction)
}

bool LoraBlocks::empty() const {
  return std::none_of(adapters.begin(), adapters.end(), [](const auto& a) { return a != nullptr; });
}

Tensor LoraBlocks::add_to(const Tensor& y, const Tensor& x, int64_t begin, int64_t end) const {
  std::vector<Tensor> changes;  // each block's of [begin, end): its adapter's, or zeros
  bool changed = false;
  int64_t at = 0;
  for (size_t i = 0; i < rows.size(); at += rows[i++]) {
    if (at + rows[i] <= begin || at >= end) continue;
    TFM_CHECK(at >= begin && at + rows[i] <= end, "LoRA: rows [" << begin << ", " << end << ") cut an adapter's block");
    changed = changed || adapters[i] != nullptr;
    Shape shape = y.shape();
    shape.back() = rows[i];
    changes.push_back(adapters[i] ? adapters[i]->forward(x) : Tensor::zeros(shape, y.device()));
  }
  if (!changed) return y;
  return ops::add(y, changes.size() == 1 ? changes[0] : ops::concat(changes, y.dim() - 1));
}

}  // namespace tfm::nn
