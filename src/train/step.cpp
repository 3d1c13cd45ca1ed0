#include "train/step.h"

#include "ops/loss.h"

namespace tfm::train {

int64_t Seq2SeqBatch::target_tokens(int pad) const {
  int64_t n = 0;
  for (int t : tgt_out) n += t != pad;
  return n;
}

double train_step(models::EncoderDecoder& model, Adam& optimizer, const Seq2SeqBatch& batch, const StepOptions& options) {
  const int pad = model.config().pad_id;
  Tensor hidden = model.forward(batch.src, batch.tgt_in);                             // [batch, tgt_len, d_model]
  Tensor logits = model.generator->logits(hidden).reshape({-1, model.config().tgt_vocab});  // [batch * tgt_len, vocab]
  Tensor loss = ops::cross_entropy(logits, batch.tgt_out, options.label_smoothing, pad);
  optimizer.zero_grad();
  loss.backward();
  if (options.clip_norm > 0.0) clip_grad_norm(model.parameters(), options.clip_norm);
  optimizer.step();
  return loss.item();
}

}  // namespace tfm::train
