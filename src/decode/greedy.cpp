#include "decode/greedy.h"

#include "autograd/autograd.h"

namespace tfm::decode {

models::Tokens greedy_decode(models::EncoderDecoder& model, const models::Tokens& src, int64_t max_len, int start_symbol,
                             int end_symbol) {
  autograd::NoGradGuard no_grad;
  const int pad = model.config().pad_id;
  ops::AttentionMask src_mask = models::padding_mask(src, pad);
  Tensor memory = model.encode(src, src_mask);  // [batch, src_len, d_model]
  const int64_t batch = src.rows;
  std::vector<std::vector<int>> rows(batch, std::vector<int>{start_symbol});
  std::vector<bool> done(batch, false);
  for (int64_t len = 1; len < max_len; ++len) {
    models::Tokens ys{{}, batch, len};
    for (const auto& r : rows) ys.ids.insert(ys.ids.end(), r.begin(), r.end());
    Tensor out = model.decode(memory, src_mask, ys, models::padding_mask(ys, pad, /*causal=*/true));  // [batch, len, d_model]
    Tensor logits = model.generator->logits(out.slice(1, len - 1, len));                              // [batch, 1, vocab]
    const int64_t vocab = logits.size(-1);
    for (int64_t b = 0; b < batch; ++b) {
      const float* row = logits.data() + b * vocab;
      int best = 0;
      for (int64_t v = 1; v < vocab; ++v)
        if (row[v] > row[best]) best = static_cast<int>(v);
      rows[b].push_back(done[b] ? pad : best);
      if (best == end_symbol) done[b] = true;
    }
  }
  models::Tokens result{{}, batch, max_len};
  for (const auto& r : rows) result.ids.insert(result.ids.end(), r.begin(), r.end());
  return result;
}

}  // namespace tfm::decode
