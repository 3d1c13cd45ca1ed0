#pragma once
// Random numbers on a tensor's device: initialisation (as torch.nn.init's uniform_ and
// normal_) and token sampling, drawing from a seeded generator (tensor/rng.h). Draw i of
// an op comes from the generator's counter + i, so a device may compute the elements in
// any order and still gives the values a sequential loop would; the generator then
// moves past the draws used. And the sinusoid position table.
#include <span>
#include <vector>

#include "ops/kernels.h"  // Sampling
#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace tfm::ops {

void uniform_(Tensor& t, float lo, float hi, Rng& rng);  // U(lo, hi), in place
void normal_(Tensor& t, float std, Rng& rng);            // N(0, std^2), in place (Box-Muller)

// One token id per row of logits [rows, vocab] (i32 [rows]): the most likely at
// temperature 0, else drawn from softmax(logits / temperature) over the top_k most
// likely, then the smallest set of those whose probability reaches top_p, then those at
// least min_p times as likely as the first (Sampling; ops/host_rules.h's sample_row).
// A row that is not finite is a clear error.
Tensor sample(const Tensor& logits, const Sampling& s, Rng& rng);

// What a row of a batch is sampled with: its settings, its generator, and for the
// penalties the sequence so far (`seen`, of which the last `generated` were generated).
struct RowSampling {
  Sampling sampling;
  Rng* rng;
  std::span<const int> seen = {};
  int64_t generated = 0;
};
// The same with each row's own (a batch of requests: one call and one transfer back for
// all of them).
Tensor sample(const Tensor& logits, const std::vector<RowSampling>& rows);

// The sinusoid positions of "Attention Is All You Need", [max_len, d_model], with
// angle(pos, i) = pos / 10000^(2i/d_model): interleaved (the paper's, the Annotated
// Transformer's) PE(pos, 2i) = sin, PE(pos, 2i+1) = cos; or split (Marian's) the sines in
// the first half of the columns and the cosines in the second. fairseq's (M2M100's,
// NLLB's): split, angle(pos, c) = pos * exp(-c ln(10000) / (d_model/2 - 1)) in single
// precision, row p holding position first + p (their positions start past the pad id).
Tensor sinusoids(int64_t max_len, int64_t d_model, SinusoidLayout layout = SinusoidLayout::interleaved, int64_t first = 0,
                 Device device = Device::CPU);

}  // namespace tfm::ops
