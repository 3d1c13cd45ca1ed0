#pragma once
// Batched beam search over an EncoderDecoder (greedy search is beam size 1).
// Each step feeds only the newest token: the decoder's self-attention keys and
// values and the projected encoder memory are cached (nn::DecoderCache).
#include <vector>

#include "models/encoder_decoder.h"
#include "tfm/decoding.h"

namespace tfm::decode {

// The public options (beam, nbest, length penalty, maximum length: tfm/decoding.h) and
// the target vocabulary's symbols.
struct SearchOptions : TranslationOptions {
  int bos = 2, eos = 3;     // eos < 0: no end symbol, every hypothesis runs to its maximum length
  int forced_first = -1;    // a token every hypothesis starts with, at log-probability 0 (M2M100's target language:
                            // transformers' ForcedBOSTokenLogitsProcessor); -1: none
  bool use_cache = true;    // false re-runs the decoder over the whole prefix (for testing)
  bool operator==(const SearchOptions&) const = default;
};

struct Hypothesis {
  std::vector<int> tokens;  // without the start and end symbols
  double log_prob = 0;      // sum of the tokens' log-probabilities (end symbol included)
  double score = 0;         // log_prob / length^length_penalty; length: the tokens (tfm's models), + 1 for the end (Hugging Face's)
};

// src: [batch, src_len] padded with the model's pad id. Returns, for each
// sentence, its best `nbest` hypotheses, best first.
std::vector<std::vector<Hypothesis>> beam_search(models::EncoderDecoder& model, const models::Tokens& src, const SearchOptions& options);

}  // namespace tfm::decode
