#pragma once
// Fused label-smoothed losses over logits [rows, vocab] (log-softmax included, so
// the generator's logits go in directly). Targets are class ids, an i32 tensor [rows];
// those equal to the padding id are ignored. Give them on the host (they are checked
// there, then copied to the logits' device without a wait) or on the logits' device
// (copied back to be checked: a wait). The loss is a scalar on the logits' device.

#include "ops/linear_products.h"
#include "tensor/tensor.h"

namespace tfm::ops {

// torch.nn.CrossEntropyLoss(label_smoothing=smoothing, ignore_index=ignore_index):
// target distribution (1 - s) one-hot + s / vocab, averaged over non-ignored rows.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, float smoothing, int ignore_index);

// cross_entropy(linear(x, weight, bias), ...) without the [rows, vocab] logits: rows
// a chunk at a time, whose logits become their gradient and go straight into the
// linear layer's backward (dx, dweight, dbias are made in the forward pass and kept
// for backward). A generator's loss over a batch of thousands of tokens and a vocabulary of
// thousands of words would otherwise hold the logits and their gradient at once
// (2 x 128 MB for 4,000 tokens x 8,000 words). x: [rows, in], weight: [vocab, in]; the
// products in the model's `products` (precision, frozen copies).
Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& targets,
                            float smoothing, int ignore_index, const LinearProducts& products);

// The Annotated Transformer's LabelSmoothing + KLDivLoss(reduction="sum"), divided by
// `normalizer` (its SimpleLossCompute passes the token count): target distribution
// 1 - s on the true class, s / (vocab - 2) elsewhere, 0 on the padding column.
Tensor label_smoothing_kl(const Tensor& logits, const Tensor& targets, float smoothing, int padding_idx, float normalizer);

}  // namespace tfm::ops
