#include "train/seq2seq.h"

#include <algorithm>

#include "ops/convert.h"
#include "ops/loss.h"

namespace tfm::training {

int64_t Seq2SeqBatch::target_tokens(int pad) const {
  int64_t n = 0;
  for (int t : tgt_out.values()) n += t != pad;
  return n;
}

Seq2SeqBatch collate(const std::vector<data::Example>& examples, const std::vector<int64_t>& indices, const models::TransformerConfig& model) {
  const int64_t n = static_cast<int64_t>(indices.size());
  int64_t src_len = 0, tgt_len = 0;
  for (int64_t i : indices) {
    src_len = std::max<int64_t>(src_len, static_cast<int64_t>(examples[i].src.size()) + 1);
    tgt_len = std::max<int64_t>(tgt_len, static_cast<int64_t>(examples[i].tgt.size()) + 1);
  }
  Seq2SeqBatch b;
  const int pad = model.pad_id;
  b.src = {std::vector<int>(n * src_len, pad), n, src_len};
  b.tgt_in = {std::vector<int>(n * tgt_len, pad), n, tgt_len};
  b.tgt_out = {std::vector<int>(n * tgt_len, pad), n, tgt_len};
  for (int64_t r = 0; r < n; ++r) {
    const data::Example& e = examples[indices[r]];
    std::copy(e.src.begin(), e.src.end(), b.src.data() + r * src_len);
    b.src.data()[r * src_len + static_cast<int64_t>(e.src.size())] = model.eos_id;
    b.tgt_in.data()[r * tgt_len] = model.bos_id;
    std::copy(e.tgt.begin(), e.tgt.end(), b.tgt_in.data() + r * tgt_len + 1);
    std::copy(e.tgt.begin(), e.tgt.end(), b.tgt_out.data() + r * tgt_len);
    b.tgt_out.data()[r * tgt_len + static_cast<int64_t>(e.tgt.size())] = model.eos_id;
  }
  return b;
}

namespace {

models::Tokens rows_of(const models::Tokens& t, dist::Range r) {
  const int32_t* first = t.data() + r.begin * t.cols();
  return {std::vector<int>(first, first + r.size() * t.cols()), r.size(), t.cols()};
}

}  // namespace

Seq2SeqBatch rows_of(const Seq2SeqBatch& batch, dist::Range r) {
  return {rows_of(batch.src, r), rows_of(batch.tgt_in, r), rows_of(batch.tgt_out, r)};
}

Tensor seq2seq_loss(models::EncoderDecoder& model, const Seq2SeqBatch& batch, float label_smoothing) {
  Tensor hidden = model.forward(batch.src, batch.tgt_in);  // [batch, tgt_len, d_model]
  return model.generator->loss(hidden, batch.tgt_out.ids, label_smoothing, model.config().pad_id);
}

}  // namespace tfm::training
