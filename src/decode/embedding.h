#pragma once
// Sentence vectors from a BERT-style encoder: the [CLS] vector, or the mean of the
// sentence's token vectors.
#include <cstdint>
#include <string>
#include <vector>

#include "models/bert.h"

namespace tfm::decode {

enum class Pooling { mean, cls };

// "mean" or "cls"; anything else is a clear error.
Pooling parse_pooling(const std::string& name);

// The vector [d_model] of one sentence's token ids as the encoder reads them
// (data::Tokenizer::sentence: [CLS] first, within the model's max_len): [CLS]'s vector,
// or the mean of those after it. An empty sentence's mean is its [CLS] vector.
std::vector<float> sentence_vector(models::BERT& model, const std::vector<int>& ids, Pooling pool);

}  // namespace tfm::decode
