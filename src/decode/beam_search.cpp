#include "decode/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/autograd.h"
#include "ops/convert.h"
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

// Hugging Face's BeamHypotheses.add: the K best finished hypotheses are kept.
void keep_best(std::vector<Hypothesis>& finished, Hypothesis h, int64_t K) {
  if (static_cast<int64_t>(finished.size()) < K) return finished.push_back(std::move(h));
  auto worst = std::min_element(finished.begin(), finished.end(), [](const auto& a, const auto& b) { return a.score < b.score; });
  if (h.score > worst->score) *worst = std::move(h);
}

double worst_score(const std::vector<Hypothesis>& finished) {
  double w = std::numeric_limits<double>::infinity();
  for (const Hypothesis& h : finished) w = std::min(w, h.score);
  return w;
}

}  // namespace

std::vector<std::vector<Hypothesis>> beam_search(models::EncoderDecoder& model, const models::Tokens& src, const SearchOptions& o) {
  TFM_CHECK(o.beam >= 1 && o.nbest >= 1 && o.nbest <= o.beam, "beam search: need 1 <= nbest <= beam");
  TFM_CHECK(std::isfinite(o.max_len_a.value_or(0)) && o.max_len_a.value_or(0) >= 0 && o.max_len_b.value_or(0) >= 0,
            "beam search: max_len_a and max_len_b must be finite and at least 0");
  autograd::NoGradGuard no_grad;
  const models::TransformerConfig& config = model.config();
  const int pad = config.pad_id;
  const bool hf = config.hf_search;
  const int64_t B = src.rows(), K = o.beam;
  auto normalized = [&](double log_prob, size_t length) {
    if (o.length_penalty == 0.0f) return log_prob;
    if (length == 0) return kNegInf;  // an empty translation ranks last (CTranslate2: log p / 0)
    return log_prob / std::pow(static_cast<double>(length), o.length_penalty);
  };

  // Encode once. The first step extends one beam per sentence (the start symbol);
  // its K children then share their sentence's memory: the cached encoder-decoder
  // keys and values are projected for B rows and indexed per beam (KVCache::rows),
  // never copied K times.
  const ops::AttentionMask src_mask = models::padding_mask(src, pad, model.device());
  Tensor memory = model.encode(src, src_mask);  // [batch, src_len, d_model]
  ops::AttentionMask beam_src_mask = src_mask;  // a row per beam
  // Transformers caps a Hugging Face model's output by its max_length alone; tfm's rule
  // a * n + b applies where the model has none, or where the caller sets a or b.
  const bool by_source = config.max_length == 0 || o.max_len_a || o.max_len_b;
  const double a = o.max_len_a.value_or(1.5f), b_tokens = static_cast<double>(o.max_len_b.value_or(10));
  std::vector<int64_t> max_len(B);
  for (int64_t b = 0; b < B; ++b) {
    int64_t n = 0;
    for (int64_t c = 0; c < src.cols(); ++c) n += src.at(b, c) != pad;
    // In double, and capped before the conversion: a * n may exceed any integer.
    double limit = static_cast<double>(config.max_len - 1);
    if (by_source) limit = std::min(limit, a * static_cast<double>(n) + b_tokens);
    if (config.max_length > 0) limit = std::min(limit, static_cast<double>(config.max_length - 1));  // it counts the start symbol
    max_len[b] = static_cast<int64_t>(limit);
  }
  const int64_t steps = *std::max_element(max_len.begin(), max_len.end());
  // Never proposed: the pad, and the start symbol where it is not also the end symbol
  // (M2M100's decoder starts from </s>).
  const std::vector<int> never = o.bos == o.eos ? std::vector<int>{pad} : std::vector<int>{pad, o.bos};
  TFM_CHECK(o.forced_first < static_cast<int>(config.tgt_vocab), "beam search: the forced first token " << o.forced_first << " is not in the vocabulary");

  // Sentences still searched, in the order of their blocks of rows: a finished
  // sentence leaves the batch (its rows of the memory, mask and caches with it).
  std::vector<int64_t> live(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) live[b] = b;
  std::vector<Beam> beams(static_cast<size_t>(B), Beam{{o.bos}, 0.0});  // then K per sentence
  std::vector<std::vector<Hypothesis>> finished(B);
  nn::DecoderCache cache;
  ops::AttentionMask causal;
  causal.causal = true;

  for (int64_t step = 1; step <= steps && !live.empty(); ++step) {
    const int64_t n = static_cast<int64_t>(beams.size()), width = n / static_cast<int64_t>(live.size());  // beams per sentence
    std::vector<int> ids;
    for (const Beam& beam : beams) {
      if (o.use_cache) {
        ids.push_back(beam.tokens.back());
      } else {  // filler beams have shorter histories: pad them (their rows are ignored)
        std::vector<int> row = beam.tokens;
        row.resize(static_cast<size_t>(step), beam.tokens.back());
        ids.insert(ids.end(), row.begin(), row.end());
      }
    }
    const models::Tokens input(ids, n, o.use_cache ? 1 : step);
    Tensor hidden = model.decode(memory, beam_src_mask, input, causal, o.use_cache ? &cache : nullptr);
    Tensor logits = model.generator->logits(ops::contiguous(ops::slice(hidden, 1, hidden.size(1) - 1, hidden.size(1))));  // [n, 1, vocab]
    const int64_t V = logits.size(-1);
    // Each beam's 2K best extensions: together they hold the sentence's 2K best,
    // which can always supply K that do not end the sentence.
    // Non-finite scores are an error, not empty output: nothing can be ranked by them.
    std::vector<uint8_t> real(static_cast<size_t>(n));  // filler beams need no extensions
    for (int64_t r = 0; r < n; ++r) real[r] = std::isfinite(beams[r].log_prob);
    std::vector<std::vector<std::pair<double, int64_t>>> best;
    if (!ops::top_log_probs(ops::reshape(logits, {n, V}), 2 * K, never, config.renormalize, real, best)) fail_not_finite("scores");
    if (step == 1 && o.forced_first >= 0)
      for (auto& row : best) row = {{0.0, o.forced_first}};
    if (config.forced_eos)  // Hugging Face's ForcedEOSTokenLogitsProcessor: at the limit, the end symbol with log-probability 0
      for (size_t j = 0; j < live.size(); ++j)
        if (step >= max_len[live[j]])
          for (int64_t k = 0; k < width; ++k) best[j * width + k] = {{0.0, o.eos}};

    std::vector<Beam> next;
    std::vector<int64_t> origin, still;
    for (size_t j = 0; j < live.size(); ++j) {
      const int64_t b = live[j];
      std::vector<std::pair<double, int64_t>> cand;  // (log-probability, k * V + token)
      for (int64_t k = 0; k < width; ++k)
        for (const auto& [lp, token] : best[j * width + k]) cand.push_back({beams[j * width + k].log_prob + lp, k * V + token});
      std::stable_sort(cand.begin(), cand.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
      std::vector<Beam> children;
      std::vector<int64_t> parents;
      for (size_t i = 0; i < cand.size() && static_cast<int64_t>(children.size()) < K; ++i) {
        const int64_t k = cand[i].second / V;
        const int token = static_cast<int>(cand[i].second % V);
        const Beam& parent = beams[j * width + k];
        if (token == o.eos) {  // an end counts only among the best K (both rules), else its place goes to the next candidate
          if (static_cast<int64_t>(i) >= K || !std::isfinite(cand[i].first)) continue;
          std::vector<int> out(parent.tokens.begin() + 1, parent.tokens.end());
          // The length normalised by: tfm's rule (CTranslate2's), the words; Hugging Face's, the words and the end.
          Hypothesis h{out, cand[i].first, normalized(cand[i].first, hf ? out.size() + 1 : out.size())};
          if (hf) keep_best(finished[b], std::move(h), K);
          else finished[b].push_back(std::move(h));  // every end among the best K, even past K in one step
          continue;
        }
        children.push_back({parent.tokens, cand[i].first});
        children.back().tokens.push_back(token);
        parents.push_back(static_cast<int64_t>(j) * width + k);
      }
      while (static_cast<int64_t>(children.size()) < K) children.push_back({{o.bos}, kNegInf}), parents.push_back(static_cast<int64_t>(j) * width);
      if (step >= max_len[b]) {  // out of length: the open beams end here
        for (const Beam& beam : children) {
          if (!std::isfinite(beam.log_prob)) continue;
          std::vector<int> out(beam.tokens.begin() + 1, beam.tokens.end());
          Hypothesis h{out, beam.log_prob, normalized(beam.log_prob, out.size())};
          if (hf) keep_best(finished[b], std::move(h), K);
          else finished[b].push_back(std::move(h));
        }
        continue;
      }
      // Done: tfm's rule (CTranslate2's, fairseq's), K ended; Hugging Face's, K ended and
      // none of the open beams' best can beat the worst of them at this length.
      const bool full = static_cast<int64_t>(finished[b].size()) >= K;
      if (full && (!hf || (!cand.empty() && worst_score(finished[b]) >= normalized(cand[0].first, static_cast<size_t>(step))))) continue;
      still.push_back(b);
      for (int64_t k = 0; k < K; ++k) next.push_back(std::move(children[k])), origin.push_back(parents[k]);
    }
    const bool regrouped = still.size() < live.size() || width < K;  // sentences left, or the first step's beams branched
    live = std::move(still);
    beams = std::move(next);
    if (live.empty()) break;
    bool identity = !regrouped;
    for (size_t r = 0; r < origin.size() && identity; ++r) identity = origin[r] == static_cast<int64_t>(r);
    if (identity) continue;
    const Tensor rows = Tensor::from_values(origin);  // (host indices: checked and copied over by gather_rows, no wait)
    if (o.use_cache) cache.select_rows(rows);
    if (regrouped) {  // rows of one sentence share their memory, so the parents' rows are the children's
      if (!o.use_cache) memory = ops::gather_rows(memory, rows);  // cached: projected once, indexed by the cache
      beam_src_mask.key_padding = ops::gather_rows(beam_src_mask.key_padding, rows);
    }
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
