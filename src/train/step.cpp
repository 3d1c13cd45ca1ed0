#include "train/step.h"

#include "ops/loss.h"

namespace tfm::train {

int64_t Seq2SeqBatch::target_tokens(int pad) const {
  int64_t n = 0;
  for (int t : tgt_out) n += t != pad;
  return n;
}

Tensor seq2seq_loss(models::EncoderDecoder& model, const Seq2SeqBatch& batch, float label_smoothing) {
  Tensor hidden = model.forward(batch.src, batch.tgt_in);  // [batch, tgt_len, d_model]
  return model.generator->loss(hidden, batch.tgt_out, label_smoothing, model.config().pad_id);
}

double train_step(models::EncoderDecoder& model, Adam& optimizer, const Seq2SeqBatch& batch, const StepOptions& options) {
  Tensor loss = seq2seq_loss(model, batch, options.label_smoothing);
  optimizer.zero_grad();
  loss.backward();
  if (options.clip_norm > 0.0) clip_grad_norm(model.parameters(), options.clip_norm);
  optimizer.step();
  return loss.item();
}

}  // namespace tfm::train
