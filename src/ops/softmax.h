#pragma once
// Softmax and log-softmax over the last dimension.
#include <cstdint>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace tfm::ops {

Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);

// Beam search's ranking: for each row r of logits [rows, V] with wanted[r], the `count`
// most probable ids other than the excluded ones, as (log-probability, id), best first,
// into best[r] (empty for the other rows). The log-softmax is never written out: the
// logits rank the ids as their log-probabilities do, and only the kept ones are shifted
// by the row's log-sum-exp (with `renormalize`, that of the ids not excluded: the
// log-probabilities of a distribution over the allowed ids). False where a wanted row is not finite (NaN or infinite
// logits, from corrupted or overflowing weights). Rows are split over the threads.
bool top_log_probs(const Tensor& logits, int64_t count, const std::vector<int>& excluded, bool renormalize,
                   const std::vector<uint8_t>& wanted, std::vector<std::vector<std::pair<double, int64_t>>>& best);

}  // namespace tfm::ops
