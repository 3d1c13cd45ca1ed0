#pragma once
// Translating many sentences: sorts them by length, searches in batches, and
// returns the results in input order.
#include <cstdint>
#include <functional>
#include <vector>

#include "decode/beam_search.h"

namespace tfm::decode {

// The order in which to translate `sources`: by length, so that a batch holds similar
// lengths (less padding, and its sentences finish together); empty sources are left out.
std::vector<size_t> length_order(const std::vector<std::vector<int>>& sources);

// Sources (subword ids without special tokens) as one padded batch [n, cols], each
// followed by </s> and truncated to the model's positions (documented in the README).
models::Tokens pad_sources(const std::vector<const std::vector<int>*>& sources, int pad, int eos, int64_t max_len);

// Translates `sources` batch by batch on the calling thread, in length order, and
// returns the hypotheses in input order; an empty source gets an empty hypothesis
// without running the model. on_batch, when given, hears how many sentences each batch
// held once it is searched (progress). This is the plain path; tfm::Translator runs the
// same batches on a pool of workers, with requests from many callers.
std::vector<std::vector<Hypothesis>> translate(models::EncoderDecoder& model, const std::vector<std::vector<int>>& sources,
                                               const SearchOptions& options, int64_t batch_size,
                                               const std::function<void(int64_t)>& on_batch = {});

// Every layer's attention probabilities ([1, heads, queries, keys] each) for `target`
// as the translation of `source` (subword ids without special tokens, the source cut
// to the model's positions): a teacher-forced pass of the start symbol + target (the queries: row i
// chose target token i, the last one </s>) against source + </s> (the keys).
struct AttentionOfTranslation {
  nn::AttentionMaps encoder, decoder;  // decoder.cross: encoder-decoder attention
};
AttentionOfTranslation attention_of(models::EncoderDecoder& model, const std::vector<int>& source, std::vector<int> target);

}  // namespace tfm::decode
