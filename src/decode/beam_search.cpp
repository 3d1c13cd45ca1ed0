#include "decode/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/autograd.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "tensor/error.h"

namespace tfm::decode {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct Beam {
  std::vector<int> tokens;  // start symbol first
  double log_prob = kNegInf;
};

}  // namespace

std::vector<std::vector<Hypothesis>> beam_search(models::EncoderDecoder& model, const models::Tokens& src, const SearchOptions& o) {
  TFM_CHECK(o.beam >= 1 && o.nbest >= 1 && o.nbest <= o.beam, "beam search: need 1 <= nbest <= beam");
  autograd::NoGradGuard no_grad;
  const int pad = model.config().pad_id;
  const int64_t B = src.rows, K = o.beam, rows = B * K;
  auto normalized = [&](double log_prob, size_t length) {
    return o.length_penalty == 0.0f ? log_prob : log_prob / std::pow(static_cast<double>(length), o.length_penalty);
  };

  // Encode once, then give every beam its own copy of its sentence's memory.
  ops::AttentionMask src_mask = models::padding_mask(src, pad);
  Tensor memory = model.encode(src, src_mask);  // [batch, src_len, d_model]
  std::vector<int64_t> expand(rows);
  for (int64_t r = 0; r < rows; ++r) expand[r] = r / K;
  memory = ops::gather_rows(memory, expand);  // [batch * beam, src_len, d_model]
  ops::AttentionMask beam_src_mask;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < src.cols; ++c) beam_src_mask.key_padding.push_back(src_mask.key_padding[expand[r] * src.cols + c]);

  std::vector<int64_t> max_len(B);
  for (int64_t b = 0; b < B; ++b) {
    int64_t n = 0;
    for (int64_t c = 0; c < src.cols; ++c) n += src.at(b, c) != pad;
    max_len[b] = std::min<int64_t>(static_cast<int64_t>(o.max_len_a * n) + o.max_len_b, model.config().max_len - 1);
  }
  const int64_t steps = *std::max_element(max_len.begin(), max_len.end());

  std::vector<Beam> beams(rows);
  for (int64_t r = 0; r < rows; ++r) {
    beams[r].tokens = {o.bos};
    beams[r].log_prob = r % K == 0 ? 0.0 : kNegInf;  // identical beams would be found K times
  }
  std::vector<std::vector<Hypothesis>> finished(B);
  std::vector<bool> done(B, false);
  nn::DecoderCache cache;
  ops::AttentionMask causal;
  causal.causal = true;

  for (int64_t step = 1; step <= steps; ++step) {
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    models::Tokens input{{}, rows, o.use_cache ? 1 : step};
    for (const Beam& beam : beams) {
      if (o.use_cache) {
        input.ids.push_back(beam.tokens.back());
      } else {  // finished sentences and filler beams have shorter histories: pad them (their rows are ignored)
        std::vector<int> row = beam.tokens;
        row.resize(static_cast<size_t>(step), beam.tokens.back());
        input.ids.insert(input.ids.end(), row.begin(), row.end());
      }
    }
    Tensor hidden = model.decode(memory, beam_src_mask, input, causal, o.use_cache ? &cache : nullptr);
    Tensor logits = model.generator->logits(hidden.slice(1, hidden.size(1) - 1, hidden.size(1)).contiguous());  // [rows, 1, vocab]
    const int64_t V = logits.size(-1);
    std::vector<float> logp(static_cast<size_t>(rows * V));
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) ops::log_softmax_row(logits.data() + r * V, logp.data() + r * V, V);

    std::vector<Beam> next(rows);
    std::vector<int64_t> origin(rows);
    for (int64_t b = 0; b < B; ++b) {
      if (done[b]) {
        for (int64_t k = 0; k < K; ++k) next[b * K + k] = beams[b * K + k], origin[b * K + k] = b * K + k;
        continue;
      }
      // The 2K best extensions can always supply K that do not end the sentence.
      std::vector<std::pair<double, int64_t>> cand;
      for (int64_t k = 0; k < K; ++k) {
        const Beam& beam = beams[b * K + k];
        if (!std::isfinite(beam.log_prob)) continue;
        const float* lp = logp.data() + (b * K + k) * V;
        for (int64_t v = 0; v < V; ++v)  // non-finite scores (a diverged model) are never candidates
          if (v != pad && v != o.bos && std::isfinite(lp[v])) cand.push_back({beam.log_prob + lp[v], k * V + v});
      }
      const size_t keep = std::min<size_t>(cand.size(), static_cast<size_t>(2 * K));
      std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(keep), cand.end(),
                        [](const auto& x, const auto& y) { return x.first > y.first; });
      int64_t filled = 0;
      for (size_t i = 0; i < keep && filled < K; ++i) {
        const int64_t k = cand[i].second / V;
        const int token = static_cast<int>(cand[i].second % V);
        const Beam& parent = beams[b * K + k];
        if (token == o.eos) {
          std::vector<int> out(parent.tokens.begin() + 1, parent.tokens.end());
          if (static_cast<int64_t>(finished[b].size()) < K)
            finished[b].push_back({out, cand[i].first, normalized(cand[i].first, out.size() + 1)});
          continue;
        }
        Beam& child = next[b * K + filled];
        child.tokens = parent.tokens;
        child.tokens.push_back(token);
        child.log_prob = cand[i].first;
        origin[b * K + filled] = b * K + k;
        ++filled;
      }
      for (; filled < K; ++filled) next[b * K + filled] = Beam{{o.bos}, kNegInf}, origin[b * K + filled] = b * K;
      if (step >= max_len[b]) {  // out of length: the open beams end here
        for (int64_t k = 0; k < K; ++k) {
          const Beam& beam = next[b * K + k];
          if (!std::isfinite(beam.log_prob)) continue;
          std::vector<int> out(beam.tokens.begin() + 1, beam.tokens.end());
          finished[b].push_back({out, beam.log_prob, normalized(beam.log_prob, out.size())});
        }
      }
      done[b] = step >= max_len[b] || static_cast<int64_t>(finished[b].size()) >= K;
    }
    beams = std::move(next);
    if (o.use_cache) cache.select_rows(origin);
  }

  std::vector<std::vector<Hypothesis>> result(B);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<Hypothesis>& f = finished[b];
    std::stable_sort(f.begin(), f.end(), [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
    f.resize(std::min<size_t>(f.size(), static_cast<size_t>(o.nbest)));
    if (f.empty()) f.push_back({{}, kNegInf, kNegInf});  // nothing finite was ever proposed
    result[b] = std::move(f);
  }
  return result;
}

}  // namespace tfm::decode
