#include "decode/translator.h"

#include <algorithm>

#include "autograd/autograd.h"
#include "tensor/error.h"

namespace tfm::decode {

std::vector<size_t> length_order(const std::vector<std::vector<int>>& sources) {
  std::vector<size_t> order;
  for (size_t i = 0; i < sources.size(); ++i)
    if (!sources[i].empty()) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sources[a].size() < sources[b].size(); });
  return order;
}

models::Tokens pad_sources(const std::vector<const std::vector<int>*>& sources, int pad, int eos, int64_t max_len) {
  int64_t cols = 0;
  for (const std::vector<int>* s : sources) cols = std::max<int64_t>(cols, std::min<int64_t>(s->size(), max_len - 1) + 1);
  const int64_t rows = static_cast<int64_t>(sources.size());
  models::Tokens batch(std::vector<int>(static_cast<size_t>(rows * cols), pad), rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<int>& s = *sources[static_cast<size_t>(r)];
    const int64_t n = std::min<int64_t>(s.size(), max_len - 1);
    std::copy_n(s.begin(), n, batch.data() + r * cols);
    batch.data()[r * cols + n] = eos;
  }
  return batch;
}

std::vector<std::vector<Hypothesis>> translate(models::EncoderDecoder& model, const std::vector<std::vector<int>>& sources,
                                               const SearchOptions& options, int64_t batch_size,
                                               const std::function<void(int64_t)>& on_batch) {
  TFM_CHECK(batch_size >= 1, "translation batch size must be positive");
  std::vector<std::vector<Hypothesis>> results(sources.size(), std::vector<Hypothesis>{Hypothesis{}});
  const std::vector<size_t> order = length_order(sources);
  for (size_t start = 0; start < order.size(); start += static_cast<size_t>(batch_size)) {
    const size_t end = std::min(order.size(), start + static_cast<size_t>(batch_size));
    std::vector<const std::vector<int>*> batch;
    for (size_t i = start; i < end; ++i) batch.push_back(&sources[order[i]]);
    std::vector<std::vector<Hypothesis>> out =
        beam_search(model, pad_sources(batch, model.config().pad_id, options.eos, model.config().max_len), options);
    for (size_t i = start; i < end; ++i) results[order[i]] = std::move(out[i - start]);
    if (on_batch) on_batch(static_cast<int64_t>(end - start));
  }
  return results;
}

AttentionOfTranslation attention_of(models::EncoderDecoder& model, const std::vector<int>& source, std::vector<int> target) {
  autograd::NoGradGuard no_grad;
  const models::TransformerConfig& c = model.config();
  const models::Tokens src = pad_sources({&source}, c.pad_id, c.eos_id, c.max_len);
  target.insert(target.begin(), c.bos_id);
  const models::Tokens tgt(target, 1, static_cast<int64_t>(target.size()));
  AttentionOfTranslation a;
  const ops::AttentionMask src_mask;  // one sentence: no padding
  const Tensor memory = model.encode(src, src_mask, &a.encoder);
  model.decode(memory, src_mask, tgt, model.target_mask(tgt), nullptr, &a.decoder);
  return a;
}

}  // namespace tfm::decode
