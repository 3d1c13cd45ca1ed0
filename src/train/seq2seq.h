#pragma once
// An encoder-decoder's teacher-forced batches and their loss.
#include <vector>

#include "data/batching.h"
#include "dist/communicator.h"
#include "models/encoder_decoder.h"

namespace tfm::training {

struct Seq2SeqBatch {
  models::Tokens src;      // [batch, src_len]
  models::Tokens tgt_in;   // [batch, tgt_len]: <bos> y1 ... y_{n-1}
  models::Tokens tgt_out;  // [batch, tgt_len]: y1 ... y_n, the prediction targets
  int64_t target_tokens(int pad) const;
};

// The examples at `indices`, padded with the model's pad id: source ids + </s>; decoder
// input the start symbol + target; prediction targets target + </s> (the model's symbols:
// tfm's own, or a Hugging Face model's).
Seq2SeqBatch collate(const std::vector<data::Example>& examples, const std::vector<int64_t>& indices, const models::TransformerConfig& model);

// Rows [r.begin, r.end) of a batch (a process's share of it), padded as the batch is.
Seq2SeqBatch rows_of(const Seq2SeqBatch& batch, dist::Range r);

// Teacher-forced forward pass and label-smoothed cross-entropy (padding ignored).
Tensor seq2seq_loss(models::EncoderDecoder& model, const Seq2SeqBatch& batch, float label_smoothing);

}  // namespace tfm::training
