#include "decode/sampling.h"

#include <map>
#include <utility>

#include "autograd/autograd.h"
#include "ops/random.h"
#include "ops/shape.h"
#include "tensor/error.h"

namespace tfm::decode {

std::vector<int> generate(models::GPT& model, const std::vector<int>& prompt, const SamplingOptions& o,
                          const std::function<void(int)>& on_token) {
  TFM_CHECK(!prompt.empty(), "generation needs a prompt of at least one token");
  autograd::NoGradGuard no_grad;
  model.eval();
  Rng rng(o.seed);
  const int64_t window = model.config().max_len;
  std::vector<int> seq = prompt, out;
  std::vector<nn::KVCache> caches;
  // The tokens to feed next: a whole window when (re)starting, then one at a time.
  auto restart = [&](int64_t keep) {
    caches.clear();
    return std::vector<int>(seq.end() - std::min<int64_t>(keep, static_cast<int64_t>(seq.size())), seq.end());
  };
  std::vector<int> feed = restart(window);
  for (int64_t n = 0; n < o.max_new_tokens; ++n) {
    const Tensor logits = model.last_logits({feed, 1, static_cast<int64_t>(feed.size())}, o.use_cache ? &caches : nullptr);  // [1, vocab]
    const int token = ops::sample(logits, {{o.sampling(), &rng, seq, static_cast<int64_t>(out.size())}}).values<int32_t>()[0];
    seq.push_back(token);
    out.push_back(token);
    if (on_token) on_token(token);
    if (o.ends_with(token)) break;
    const int64_t cached = caches.empty() ? 0 : caches[0].length;
    if (!o.use_cache) feed = restart(window);
    else if (cached + 1 > window) feed = restart(window / 2 + 1);
    else feed = {token};
  }
  return out;
}

void GenerationBatch::join(std::vector<int> prompt, const SamplingOptions& o, std::function<bool(int)> on_token,
                           std::function<void(std::exception_ptr)> on_done) {
  TFM_CHECK(!prompt.empty(), "generation needs a prompt of at least one token");
  if (o.max_new_tokens <= 0) return on_done(nullptr);
  waiting_.push_back({std::move(prompt), o, Rng(o.seed), 0, model_.config().max_len, std::move(on_token), std::move(on_done)});
}

bool GenerationBatch::take(Sequence& s, const std::function<int()>& pick) {
  bool more = true;
  try {
    const int token = pick();
    s.tokens.push_back(token);
    ++s.produced;
    if (s.on_token) more = s.on_token(token);
  } catch (...) {
    s.on_done(std::current_exception());
    return false;
  }
  if (more && s.produced < s.o.max_new_tokens && !s.o.ends_with(s.tokens.back())) return true;
  s.on_done(nullptr);
  return false;
}

ops::RowSampling GenerationBatch::row_sampling(Sequence& s) { return {s.o.sampling(), &s.rng, s.tokens, s.produced}; }

int64_t GenerationBatch::run_length(const Sequence& s) { return std::min<int64_t>(s.keep, static_cast<int64_t>(s.tokens.size())); }

void GenerationBatch::prefill(std::vector<Sequence> group) {
  // As generate restarts: the last `keep` tokens of each, as many for all, run as one batch.
  const int64_t n = run_length(group[0]), rows = static_cast<int64_t>(group.size());
  std::vector<int> ids;
  for (const Sequence& s : group) ids.insert(ids.end(), s.tokens.end() - n, s.tokens.end());
  std::vector<nn::KVCache> run;
  Tensor logits;
  try {
    logits = model_.last_logits({ids, rows, n}, &run);  // [rows, vocab]
  } catch (...) {  // a sequence whose prompt fails ends with the error, the others go on: each alone
    if (rows == 1) return group[0].on_done(std::current_exception());
    for (Sequence& s : group) prefill(one(std::move(s)));
    return;
  }
  std::vector<int> tokens;
  try {
    std::vector<ops::RowSampling> sampling;
    for (Sequence& s : group) sampling.push_back(row_sampling(s));
    tokens = ops::sample(logits, sampling).values<int32_t>();
  } catch (...) {  // (non-finite scores) none of them can go on
    for (Sequence& s : group) s.on_done(std::current_exception());
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    Sequence& s = group[static_cast<size_t>(r)];
    if (!take(s, [&] { return tokens[static_cast<size_t>(r)]; })) continue;
    s.keep = model_.config().max_len / 2 + 1;  // a later restart keeps half the window
    if (run[0].length + 1 > model_.config().max_len) {
      waiting_.push_back(std::move(s));
      continue;
    }
    if (caches_.empty()) caches_.resize(run.size());
    for (size_t i = 0; i < run.size(); ++i) caches_[i].adopt(run[i], r);
    running_.push_back(std::move(s));
  }
}

std::vector<GenerationBatch::Sequence> GenerationBatch::one(Sequence s) {
  std::vector<Sequence> group;
  group.push_back(std::move(s));
  return group;
}

void GenerationBatch::step() {
  autograd::NoGradGuard no_grad;
  model_.eval();
  const size_t room = max_rows_ > 0 ? static_cast<size_t>(std::max<int64_t>(0, max_rows_ - static_cast<int64_t>(running_.size()))) : waiting_.size();
  const auto admitted = waiting_.begin() + static_cast<std::ptrdiff_t>(std::min(room, waiting_.size()));
  std::vector<Sequence> joined(std::make_move_iterator(waiting_.begin()), std::make_move_iterator(admitted));
  waiting_.erase(waiting_.begin(), admitted);
  // Those of one length run as one batch, of at most kPrefillTokens tokens in all.
  std::map<int64_t, std::vector<Sequence>> by_length;
  for (Sequence& s : joined) {
    std::vector<Sequence>& group = by_length[run_length(s)];
    if (!group.empty() && static_cast<int64_t>(group.size() + 1) * run_length(s) > kPrefillTokens) prefill(std::exchange(group, {}));
    group.push_back(std::move(s));
  }
  for (auto& [length, group] : by_length) prefill(std::move(group));
  if (running_.empty()) return;
  const int64_t batch = static_cast<int64_t>(running_.size());
  std::vector<int> last;
  for (const Sequence& s : running_) last.push_back(s.tokens.back());
  std::vector<int> tokens;  // every row's, drawn in one call and brought back in one copy
  try {
    const Tensor logits = model_.forward({last, batch, 1}, &caches_);  // [batch, 1, vocab]
    std::vector<ops::RowSampling> rows;
    for (Sequence& s : running_) rows.push_back(row_sampling(s));
    tokens = ops::sample(ops::reshape(logits, {batch, logits.size(2)}), rows).values<int32_t>();
  } catch (...) {  // no sequence can go on
    return fail_running(std::current_exception());
  }
  for (int64_t b = batch - 1; b >= 0; --b) {  // from the end: rows after b move up as b leaves
    Sequence& s = running_[b];
    const bool more = take(s, [&] { return tokens[static_cast<size_t>(b)]; });
    const bool outgrown = more && caches_[0].lengths[b] + 1 > model_.config().max_len;
    if (more && !outgrown) continue;
    for (nn::KVCache& c : caches_) c.release(b);
    if (outgrown) waiting_.push_back(std::move(s));
    running_.erase(running_.begin() + b);
  }
  if (running_.empty() && waiting_.empty()) caches_.clear();  // idle: the caches' memory goes back
}

int64_t GenerationBatch::row_bytes(const models::StackConfig& c) {
  const int64_t kv_width = c.d_model / c.heads * (c.kv_heads > 0 ? c.kv_heads : c.heads);
  return (c.max_len * 3 / 2 + 16) * kv_width * 2 * c.layers * static_cast<int64_t>(sizeof(float));
}

int64_t GenerationBatch::cache_bytes() const {
  int64_t bytes = 0;
  for (const nn::KVCache& c : caches_)
    for (const Tensor* t : {&c.k, &c.v})
      if (t->defined()) bytes += t->numel() * static_cast<int64_t>(size_of(t->dtype()));
  return bytes;
}

void GenerationBatch::fail_running(std::exception_ptr why) {
  for (Sequence& s : running_) s.on_done(why);
  running_.clear(), caches_.clear();
}

}  // namespace tfm::decode
