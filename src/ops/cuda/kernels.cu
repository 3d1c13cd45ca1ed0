#include "ops/cuda/kernels.h"
#include "tensor/cuda/runtime.h"

namespace tfm::ops::cuda {

namespace {

// What the GPU computes, by dtype: everything in f32 (products with CUBLAS_COMPUTE_32F,
// no TF32); the products also in bf16 (inputs rounded, f32 accumulation); conversions
// between every dtype; integer ids and indices. int8 products are the CPU's only.
std::vector<Claim> claims() {
  std::vector<Claim> out;
  for (const char* op : {"add", "mul", "scale", "relu", "gelu", "gelu_tanh", "silu", "tanh", "dropout", "relu_dropout", "softmax",
                         "log_softmax", "layer_norm", "attention", "cross_entropy", "label_smoothing_kl", "linear_cross_entropy",
                         "matmul", "linear", "linear_relu", "embedding", "gather_rows", "patchify", "sum", "mean", "sum_of_squares",
                         "adam_update", "top_log_probs", "uniform_", "normal_", "sample", "sinusoids"})
    out.push_back({op, DType::f32});
  for (const char* op : {"linear", "linear_relu", "linear_cross_entropy"}) out.push_back({op, DType::bf16});
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i64, DType::i32, DType::i8, DType::u8, DType::boolean})
    out.push_back({"to", t});
  out.push_back({"from_pixels", DType::u8});
  out.push_back({"arange", DType::i32});
  out.push_back({"equal", DType::i32});
  for (DType t : {DType::i32, DType::boolean}) out.push_back({"gather_rows", t});
  return out;
}

std::string describe() { return "CUDA: " + tfm::cuda::describe_device(); }

}  // namespace

const Kernels& kernels() {
  static const Kernels table{
      .device = Device::CUDA,
      .claims = claims(),
      .describe = describe,
      .binary = binary,
      .unary = unary,
      .dropout = dropout,
      .sum_to = sum_to,
      .scale_in_place = scale_in_place,
      .softmax = softmax,
      .softmax_backward = softmax_backward,
      .top_log_probs = top_log_probs,
      .layer_norm = layer_norm,
      .layer_norm_backward = layer_norm_backward,
      .attention = attention,
      .attention_backward = attention_backward,
      .smoothed_loss = smoothed_loss,
      .matmul = matmul,
      .linear = linear,
      .linear_backward = linear_backward,
      .embedding = embedding,
      .embedding_backward = embedding_backward,
      .arange = arange,
      .gather_rows = gather_rows,
      .gather_rows_backward = gather_rows_backward,
      .patchify = patchify,
      .equal = equal,
      .sum = sum,
      .adam = adam,
      .random_fill = random_fill,
      .sample = sample,
      .sinusoids = sinusoids,
      .convert = convert,
      .from_pixels = from_pixels,
  };
  return table;
}

}  // namespace tfm::ops::cuda
