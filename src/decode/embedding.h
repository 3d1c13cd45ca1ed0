#pragma once
// Sentence vectors from a BERT-style encoder, pooled as sentence-transformers pools them
// (its Pooling module): the [CLS] vector, or the mean or the maximum over every token
// the encoder read ([CLS] and [SEP] included); optionally scaled to length 1 (its
// Normalize module).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/bert.h"

namespace tfm::decode {

enum class Pooling { mean, cls, max };

// "mean", "cls" or "max"; anything else is a clear error.
Pooling parse_pooling(const std::string& name);

// The vector [d_model] of one sentence's token ids as the encoder reads them
// (data::Tokenizer::sentence: [CLS] first, within the model's max_len), pooled, and
// divided by its length where `normalize` (a zero vector stays zero).
std::vector<float> sentence_vector(models::BERT& model, const std::vector<int>& ids, Pooling pool, bool normalize = false);

// How a checkpoint embeds sentences by default: a sentence-transformers directory's
// modules (hf_checkpoint.cpp records them under kSentenceEmbeddingKey), else the mean,
// unnormalised, over as many tokens as the model reads.
struct SentenceEmbedding {
  Pooling pool = Pooling::mean;
  bool normalize = false;
  std::optional<int64_t> max_tokens;  // sentence-transformers' max_seq_length ([CLS] and [SEP] included)
};
inline constexpr const char* kSentenceEmbeddingKey = "tfm.sentence_embedding";
std::string sentence_embedding_record(const SentenceEmbedding& e);
SentenceEmbedding recorded_sentence_embedding(const std::map<std::string, std::string>& metadata, const std::string& origin);

}  // namespace tfm::decode
