#pragma once
// Greedy decoding: encode once, then repeatedly append the most probable next token.
#include "models/encoder_decoder.h"

namespace tfm::decode {

// Returns [batch, max_len] tokens starting with `start_symbol`; rows that emit
// `end_symbol` (if >= 0) are padded after it.
models::Tokens greedy_decode(models::EncoderDecoder& model, const models::Tokens& src, int64_t max_len, int start_symbol,
                             int end_symbol = -1);

}  // namespace tfm::decode
