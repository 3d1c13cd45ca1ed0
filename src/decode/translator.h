#pragma once
// Translating many sentences: sorts them by length, searches in batches, and
// returns the results in input order.
#include <cstdint>
#include <functional>
#include <vector>

#include "decode/beam_search.h"

namespace tfm::decode {

// sources: subword ids without special tokens (</s> is appended here). An empty
// source gets an empty hypothesis without running the model.
//
// workers: how many batches are searched at once. The OpenMP threads are shared
// out among them (2 workers on 2 threads: one thread each). Decoding a batch is
// a long chain of small products and row-wise ops, each a parallel region whose
// threads wait for one another; workers on batches of their own never wait, so
// throughput rises (Marian's --cpu-threads works this way) while each batch takes
// longer. 0: one worker per thread when there are at least two batches. Results
// do not depend on the number of workers beyond float rounding.
//
// on_batch, when given, hears how many sentences each batch held once it is searched
// (progress); calls come from the workers, one at a time.
std::vector<std::vector<Hypothesis>> translate(models::EncoderDecoder& model, const std::vector<std::vector<int>>& sources,
                                               const SearchOptions& options, int64_t batch_size, int workers = 1,
                                               const std::function<void(int64_t)>& on_batch = {});

}  // namespace tfm::decode
