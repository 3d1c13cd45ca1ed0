#pragma once
// The CPU's kernels (OpenMP threads, AVX2/AVX-512 intrinsics, oneDNN), one function
// per entry of ops/kernels.h's table, which kernels() returns filled.
#include "ops/kernels.h"

namespace tfm::ops::cpu {

const Kernels& kernels();
// The simulated device's (tensor/device.h): these, with its memory reachable while each runs.
const Kernels& simulated_kernels();

void binary(Binary op, const Tensor& a, const Tensor& b, float s, Tensor& out);
void unary(Unary op, const Tensor& x, float s, Tensor& out);
void dropout(const Tensor& x, float p, DropoutKey key, const PackedSequences* packed, bool relu, Tensor& out);
void sum_to(const Tensor& g, Tensor& out);
void scale_in_place(Tensor& x, float s);

void softmax(const Tensor& x, bool log, Tensor& y);
void softmax_backward(const Tensor& y, const Tensor& g, bool log, Tensor& dx);
bool top_log_probs(const Tensor& logits, int64_t count, const std::vector<int>& excluded, bool renormalize,
                   const std::vector<uint8_t>& wanted, std::vector<std::vector<std::pair<double, int64_t>>>& best);

void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps, Tensor& y, Tensor& mean, Tensor& rstd);
void layer_norm_backward(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd, const Tensor& g, Tensor& dx,
                         Tensor& dw, Tensor& db);

void attention(const AttentionCall& call, Tensor& out, Tensor& probs);
void attention_backward(const AttentionCall& call, const Tensor& probs, const Tensor& g, Tensor& dq, Tensor& dk, Tensor& dv);

double smoothed_loss(const Tensor& logits, const Tensor& targets, int skip_id, const SmoothedTarget& q, float inv_n, Tensor* grad);

void matmul(bool trans_a, bool trans_b, const Tensor& a, const Tensor& b, float beta, Tensor& out);
void linear(const LinearProducts& products, const Tensor& x, const Tensor& w, const Tensor& bias, bool relu, Tensor& y);
void linear_backward(Precision precision, const Tensor& g, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw, float dw_beta);

void embedding(const Tensor& w, const Tensor& ids, Tensor& out);
void embedding_backward(const Tensor& ids, const Tensor& g, Tensor& dw);
void arange(int64_t start, Tensor& out);

void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out);
void gather_rows_backward(const Tensor& rows, const Tensor& g, Tensor& dx);
void patchify(const Tensor& images, int64_t patch, Tensor& out);
void equal(const Tensor& x, int64_t value, Tensor& out);

double sum(const Tensor& x, bool squares);
void adam(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamUpdate& u);
void random_fill(Tensor& t, Distribution d, float a, float b, uint64_t counter);
void sample(const Tensor& logits, const Sampling& s, uint64_t counter, Tensor& ids);
void sinusoids(Tensor& table, bool split);
void convert(const Tensor& src, Tensor& dst);
void from_pixels(const Tensor& pixels, Tensor& out);

}  // namespace tfm::ops::cpu
