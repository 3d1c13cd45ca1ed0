#pragma once
// Translating many sentences: sorts them by length, searches in batches, and
// returns the results in input order.
#include <vector>

#include "decode/beam_search.h"

namespace tfm::decode {

// sources: subword ids without special tokens (</s> is appended here). An empty
// source gets an empty hypothesis without running the model.
std::vector<std::vector<Hypothesis>> translate(models::EncoderDecoder& model, const std::vector<std::vector<int>>& sources,
                                               const SearchOptions& options, int64_t batch_size);

}  // namespace tfm::decode
