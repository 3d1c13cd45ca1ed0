#include "decode/translator.h"

#include <algorithm>
#include <numeric>

#include "tensor/error.h"

namespace tfm::decode {

std::vector<std::vector<Hypothesis>> translate(models::EncoderDecoder& model, const std::vector<std::vector<int>>& sources,
                                               const SearchOptions& options, int64_t batch_size) {
  TFM_CHECK(batch_size >= 1, "translation batch size must be positive");
  const int pad = model.config().pad_id;
  std::vector<std::vector<Hypothesis>> results(sources.size(), std::vector<Hypothesis>{Hypothesis{}});
  std::vector<size_t> order;
  for (size_t i = 0; i < sources.size(); ++i)
    if (!sources[i].empty()) order.push_back(i);
  // Similar lengths together: less padding, and sentences in a batch finish together.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sources[a].size() < sources[b].size(); });
  const int64_t limit = model.config().max_len;
  for (size_t start = 0; start < order.size(); start += static_cast<size_t>(batch_size)) {
    const size_t end = std::min(order.size(), start + static_cast<size_t>(batch_size));
    int64_t cols = 0;
    for (size_t i = start; i < end; ++i) cols = std::max<int64_t>(cols, std::min<int64_t>(sources[order[i]].size(), limit - 1) + 1);
    models::Tokens src{std::vector<int>(static_cast<size_t>((end - start) * cols), pad), static_cast<int64_t>(end - start), cols};
    for (size_t i = start; i < end; ++i) {
      // Sources longer than the model's positions are truncated (documented in the README).
      const std::vector<int>& s = sources[order[i]];
      const int64_t n = std::min<int64_t>(s.size(), limit - 1);
      std::copy_n(s.begin(), n, src.ids.begin() + static_cast<int64_t>(i - start) * cols);
      src.ids[static_cast<int64_t>(i - start) * cols + n] = options.eos;
    }
    std::vector<std::vector<Hypothesis>> out = beam_search(model, src, options);
    for (size_t i = start; i < end; ++i) results[order[i]] = std::move(out[i - start]);
  }
  return results;
}

}  // namespace tfm::decode
