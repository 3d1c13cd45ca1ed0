#pragma once
// LoRA (Hu et al., 2021, as PEFT's LoraLayer computes it): a frozen product's output
// changed by a trainable low-rank product, y = W x + (alpha / r) B A x, with A [r, in]
// and B [out, r]. B starts at zero, so a fresh adapter changes nothing; only A and B
// train, so the optimiser keeps moments for r (in + out) floats instead of in x out.
// tfm fuses some of Hugging Face's products (attention's q, k and v in in_proj; the gated
// block's gate and up in linear1): `LoraBlocks` gives each block of a fused product's
// output rows its own adapter, as PEFT gives each Hugging Face projection one.
#include <cstdint>
#include <memory>
#include <vector>

#include "nn/module.h"

namespace tfm::nn {

class Lora : public Module {
 public:
  Lora(int64_t in, int64_t out, int64_t rank, float alpha);
  // x [..., in] -> the change of the product's output [..., out]: scaling (x A^T) B^T
  Tensor forward(const Tensor& x) const;
  // scaling B A [out, in]: the change of W that merging the adapter makes.
  Tensor delta() const;
  // PEFT's: A Kaiming-uniform (a = sqrt(5), bound 1 / sqrt(in), as nn.Linear's weight), B zeros.
  void init_parameters(Rng& rng);
  Tensor A;  // lora_A.weight [rank, in]
  Tensor B;  // lora_B.weight [out, rank]
  float scaling;  // alpha / rank
};

// The adapters of one product, by blocks of its output rows (one block for a plain Linear).
struct LoraBlocks {
  std::vector<int64_t> rows;                    // each block's rows, in order
  std::vector<std::shared_ptr<Lora>> adapters;  // one a block; null: that block unchanged
  bool empty() const;
  // y [..., end - begin], the product's output rows [begin, end) (whole blocks) of input
  // x [..., in], plus the changes the adapters of those blocks make.
  Tensor add_to(const Tensor& y, const Tensor& x, int64_t begin, int64_t end) const;
};

}  // namespace tfm::nn
