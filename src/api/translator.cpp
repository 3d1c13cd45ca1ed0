#include "tfm/translator.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "api/inference.h"
#include "data/text.h"
#include "decode/translation_model.h"
#include "decode/translator.h"
#include "ops/dispatch.h"
#include "ops/linear_products.h"
#include "tensor/error.h"

namespace tfm {

namespace {

using Clock = std::chrono::steady_clock;

// One caller's sentences, translated piece by piece.
struct Request {
  std::vector<std::vector<int>> sources;  // subword ids
  decode::SearchOptions search;
  std::vector<Translation> results;
  std::promise<std::vector<Translation>> promise;
  std::function<void(int64_t)> on_progress;
  std::stop_token cancel;
  std::mutex progress_mutex;  // one on_progress call at a time
  size_t remaining = 0;       // sentences not yet translated
  bool failed = false;
};

// Up to a batch of one request's sentences, in length order, waiting for a worker.
struct Piece {
  std::shared_ptr<Request> request;
  std::vector<size_t> items;  // indices into request->sources
  int64_t longest = 0;        // the longest item's subwords, with </s>
  Clock::time_point arrived;
  bool after_a_lull = false;  // its request came batch_wait_us or more after the one before
};

// A batch's size in padded source subwords.
int64_t padded_tokens(size_t sentences, int64_t longest) { return static_cast<int64_t>(sentences) * longest; }

// Where a many-to-many model's languages are given.
constexpr const char* kLanguageOptions = "--src-lang and --tgt-lang; TranslationOptions::source_language and target_language";

// A many-to-many model's language tokens: both languages given for such a model, neither
// for another (its vocabulary refuses them by name).
void check_languages(const TranslationOptions& o, const decode::TranslationModel& tm) {
  tm.src_vocab.language_token(o.source_language, kLanguageOptions);
  tm.tgt_vocab.language_token(o.target_language, kLanguageOptions);
}

decode::SearchOptions search_options(const TranslationOptions& o, const models::TransformerConfig& model, const data::Vocab& tgt) {
  // At most 64, as `tfm translate --beam` and the server take it: a beam of 2^40 asked the
  // memory of 2^40 hypotheses (the review's C3, from Python).
  TFM_CHECK(o.beam >= 1 && o.beam <= 64, "beam must be from 1 to 64, got " << o.beam);
  TFM_CHECK(o.nbest >= 1 && o.nbest <= o.beam, "nbest " << o.nbest << " must be between 1 and the beam, " << o.beam);
  TFM_CHECK(std::isfinite(o.length_penalty), "length_penalty must be a finite number, got " << o.length_penalty);
  const float a = o.max_len_a.value_or(0);
  const int64_t b = o.max_len_b.value_or(0);
  TFM_CHECK(std::isfinite(a) && a >= 0 && b >= 0, "maximum lengths must be finite and not negative, got a " << a << ", b " << b);
  decode::SearchOptions search{o, model.bos_id, model.eos_id};
  search.forced_first = tgt.language_token(o.target_language, kLanguageOptions).value_or(-1);
  return search;
}

// A source's ids: a many-to-many model's language first, then the text's.
std::vector<int> source_ids(const decode::TranslationModel& tm, const std::string& text, const TranslationOptions& o) {
  std::vector<int> ids = tm.src_vocab.encode(text);
  const std::optional<int> language = tm.src_vocab.language_token(o.source_language, kLanguageOptions);
  if (language && !ids.empty()) ids.insert(ids.begin(), *language);
  return ids;
}

}  // namespace

struct Translator::Impl {
  decode::TranslationModel tm;
  TranslatorOptions options;
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<Piece> queue;
  bool stopping = false;
  int threads = 1, in_flight = 0;  // batches being searched
  Clock::time_point last_arrival;  // of the latest request
  std::vector<std::thread> workers;

  Impl(const std::string& checkpoint, const TranslatorOptions& o)
      : tm(decode::TranslationModel::load(checkpoint, o.src_vocab, o.tgt_vocab)), options(o) {
    TFM_CHECK(o.max_batch >= 1, "max_batch must be at least 1, got " << o.max_batch);
    TFM_CHECK(o.threads >= 0 && o.threads <= 1024 && o.workers >= 0 && o.workers <= 1024,
              "threads and workers must be from 0 (automatic) to 1024, got " << o.threads << " and " << o.workers);
    TFM_CHECK(o.batch_wait_us >= 0 && o.max_batch_tokens >= 0,
              "batch_wait_us and max_batch_tokens must not be negative, got " << o.batch_wait_us << " and " << o.max_batch_tokens);
    tm.model->products().set_precision(ops::parse_precision(o.precision));
    tm.model->to(ops::usable_device(o.device));
    tm.model->products().freeze();
    threads = o.threads > 0 ? o.threads : omp_get_max_threads();
    const int count = o.workers > 0 ? o.workers : threads;
    for (int w = 0; w < count; ++w) workers.emplace_back([this, share = std::max(1, threads / count)] { work(share); });
  }

  ~Impl() {
    {
      const std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    for (std::thread& t : workers) t.join();
  }

  std::future<std::vector<Translation>> submit(const std::vector<std::string>& texts, const TranslationOptions& o,
                                               std::function<void(int64_t)> on_progress, std::stop_token cancel) {
    auto request = std::make_shared<Request>();
    check_languages(o, tm);
    request->search = search_options(o, tm.model->config(), tm.tgt_vocab);
    request->on_progress = std::move(on_progress);
    request->cancel = std::move(cancel);
    for (const std::string& text : texts) {
      const char* problem = data::text_problem(text);
      TFM_CHECK(!problem, "source " << request->sources.size() + 1 << ": " << problem);
      request->sources.push_back(source_ids(tm, text, o));
    }
    // An empty source is not searched: its translation is one empty hypothesis.
    request->results.resize(texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      Translation& t = request->results[i];
      t.truncated = static_cast<int64_t>(request->sources[i].size()) > max_source_tokens();
      if (request->sources[i].empty()) t.hypotheses = {""}, t.scores = {0.0}, t.token_ids = {{}};
    }
    std::future<std::vector<Translation>> result = request->promise.get_future();
    const std::vector<size_t> order = decode::length_order(request->sources);
    request->remaining = order.size();
    if (order.empty()) {
      request->promise.set_value(std::move(request->results));
      return result;
    }
    std::vector<Piece> pieces = cut(request, order);
    {
      const std::lock_guard<std::mutex> lock(mutex);
      pieces[0].after_a_lull = pieces[0].arrived - last_arrival >= std::chrono::microseconds(options.batch_wait_us);
      last_arrival = pieces[0].arrived;
      for (Piece& p : pieces) queue.push_back(std::move(p));
    }
    wake.notify_all();
    return result;
  }

  // The request's sentences in length order, cut into batches (each at least one sentence).
  std::vector<Piece> cut(const std::shared_ptr<Request>& request, const std::vector<size_t>& order) const {
    std::vector<Piece> pieces;
    const Clock::time_point now = Clock::now();
    for (size_t i : order) {
      const int64_t length = std::min<int64_t>(static_cast<int64_t>(request->sources[i].size()), max_source_tokens()) + 1;
      if (pieces.empty() || !fits(pieces.back().items.size() + 1, std::max(pieces.back().longest, length)))
        pieces.push_back({request, {}, 0, now});
      pieces.back().items.push_back(i);
      pieces.back().longest = std::max(pieces.back().longest, length);
    }
    return pieces;
  }

  bool fits(size_t sentences, int64_t longest) const {
    return sentences <= static_cast<size_t>(options.max_batch) &&
           (options.max_batch_tokens == 0 || padded_tokens(sentences, longest) <= options.max_batch_tokens);
  }

  int64_t max_source_tokens() const { return tm.model->config().max_len - 1; }

  // A worker: takes the next batch, searches it, hands out the results; until stopped
  // with nothing left to do. A batch that is not full waits batch_wait_us for company,
  // unless it is a request that found the translator idle after a lull (nothing for
  // batch_wait_us): one client's requests start at once, a burst's share batches.
  // (Waiting 2 ms there cost `tfm serve` 4 ms a request at 1 client, greedy p50
  // 14.1 -> 9.9 ms on 2 threads.) Its batches run on its share of the threads, or, with
  // the automatic worker count, on all of them when no other batch is in progress or
  // waiting (a lone sentence gets the lowest latency; a stream of batches, one thread
  // per batch, the highest throughput).
  void work(int share) {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      wake.wait(lock, [&] { return stopping || !queue.empty(); });
      drop_cancelled();
      if (queue.empty()) {
        if (stopping) return;
        continue;
      }
      const Clock::time_point deadline = queue.front().arrived + std::chrono::microseconds(options.batch_wait_us);
      const bool starts_at_once = in_flight == 0 && queue.front().after_a_lull;
      if (!stopping && !starts_at_once && !batch_full() && Clock::now() < deadline) {
        wake.wait_until(lock, deadline);  // for other requests to join the batch
        continue;
      }
      std::vector<Piece> batch = take_batch();
      omp_set_num_threads(options.workers == 0 && in_flight == 0 && queue.empty() ? threads : share);  // this thread's own setting
      ++in_flight;
      lock.unlock();
      search(batch);
      lock.lock();
      --in_flight;
    }
  }

  // Whether the queued sentences that could join the front piece's batch fill it: no
  // other sentence could join them. (Counting only an overflow, a batch of one with its
  // one sentence waited `batch_wait_us` for company: 2 ms of every sentence of
  // `tfm translate --batch 1`.)
  bool batch_full() const {
    size_t n = 0;
    int64_t longest = 0;
    for (const Piece& p : queue)
      if (p.request->search == queue.front().request->search) n += p.items.size(), longest = std::max(longest, p.longest);
    return n >= static_cast<size_t>(options.max_batch) || !fits(n, longest);
  }

  // The front piece, and the queued pieces of the same search options that fit beside it.
  std::vector<Piece> take_batch() {
    std::vector<Piece> batch{std::move(queue.front())};
    queue.pop_front();
    size_t size = batch[0].items.size();
    int64_t longest = batch[0].longest;
    for (auto it = queue.begin(); it != queue.end();) {
      if (it->request->search == batch[0].request->search && fits(size + it->items.size(), std::max(longest, it->longest))) {
        size += it->items.size();
        longest = std::max(longest, it->longest);
        batch.push_back(std::move(*it));
        it = queue.erase(it);
      } else {
        ++it;
      }
    }
    return batch;
  }

  // Cancelled requests leave the queue, their futures told why (under the lock).
  void drop_cancelled() {
    for (const Piece& p : queue)
      if (p.request->cancel.stop_requested() && !p.request->failed) {
        p.request->failed = true;
        p.request->promise.set_exception(std::make_exception_ptr(Error("the request was cancelled")));
      }
    std::erase_if(queue, [](const Piece& p) { return p.request->failed; });
  }

  // Searches the batch and hands each request its results; an error anywhere, a
  // caller's progress callback included, fails the batch's requests.
  void search(const std::vector<Piece>& batch) {
    try {
      search_and_report(batch);
    } catch (...) {
      fail(batch, std::current_exception());
      return;
    }
    for (const Piece& p : batch) finish(p);
  }

  void search_and_report(const std::vector<Piece>& batch) {
    std::vector<const std::vector<int>*> sources;
    for (const Piece& p : batch)
      for (size_t i : p.items) sources.push_back(&p.request->sources[i]);
    const decode::SearchOptions& o = batch[0].request->search;
    const models::Tokens padded = decode::pad_sources(sources, tm.model->config().pad_id, o.eos, tm.model->config().max_len);
    const std::vector<std::vector<decode::Hypothesis>> hyps = decode::beam_search(*tm.model, padded, o);
    if (options.on_batch) options.on_batch(padded.rows(), padded.rows() * padded.cols());
    size_t k = 0;
    for (const Piece& p : batch) {
      for (size_t i : p.items) {
        Translation& t = p.request->results[i];
        for (const decode::Hypothesis& h : hyps[k++]) {
          t.hypotheses.push_back(tm.tgt_vocab.decode(h.tokens));
          t.scores.push_back(h.score);
          t.token_ids.push_back(h.tokens);
          if (o.return_attention) t.attention.push_back(attention_of(p.request->sources[i], h.tokens));
        }
      }
      if (p.request->on_progress) {
        const std::lock_guard<std::mutex> lock(p.request->progress_mutex);
        p.request->on_progress(static_cast<int64_t>(p.items.size()));
      }
    }
  }

  // The last decoder layer's encoder-decoder attention for `target`, averaged over heads.
  std::vector<float> attention_of(const std::vector<int>& source, const std::vector<int>& target) {
    const Tensor w = decode::attention_of(*tm.model, source, target).decoder.cross.back();  // [1, heads, tq, tk]
    const int64_t heads = w.size(1), cells = w.size(2) * w.size(3);
    std::vector<float> mean(static_cast<size_t>(cells), 0.0f);
    const std::vector<float> all = w.values<float>();
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t c = 0; c < cells; ++c) mean[c] += all[h * cells + c] / static_cast<float>(heads);
    return mean;
  }

  void finish(const Piece& p) {
    const std::lock_guard<std::mutex> lock(mutex);
    Request& r = *p.request;
    r.remaining -= p.items.size();
    if (r.remaining == 0 && !r.failed) r.promise.set_value(std::move(r.results));
  }

  // The requests of a failed batch fail, and their other pieces are dropped.
  void fail(const std::vector<Piece>& batch, std::exception_ptr error) {
    const std::lock_guard<std::mutex> lock(mutex);
    for (const Piece& p : batch) {
      if (p.request->failed) continue;
      p.request->failed = true;
      p.request->promise.set_exception(error);
      std::erase_if(queue, [&](const Piece& q) { return q.request == p.request; });
    }
  }
};

Translator::Translator(const std::string& checkpoint, const TranslatorOptions& options)
    : impl_(std::make_unique<Impl>(checkpoint, options)) {}

Translator::~Translator() = default;

std::vector<Translation> Translator::translate(const std::vector<std::string>& sources, const TranslationOptions& options) {
  return submit(sources, options).get();
}

std::future<std::vector<Translation>> Translator::submit(std::vector<std::string> sources, const TranslationOptions& options,
                                                         std::function<void(int64_t)> on_progress, std::stop_token cancel) {
  return impl_->submit(sources, options, std::move(on_progress), std::move(cancel));
}

TranslationAttention Translator::attention(const std::string& source, const std::string& target, const TranslationOptions& options) {
  const decode::TranslationModel& tm = impl_->tm;
  for (const std::string* text : {&source, &target}) {
    const char* problem = data::text_problem(*text);
    TFM_CHECK(!problem, (text == &source ? "the source: " : "the target: ") << problem);
  }
  check_languages(options, impl_->tm);
  std::vector<int> src = source_ids(tm, source, options), tgt;
  TFM_CHECK(!src.empty(), "the source is empty: there is nothing to attend to");
  TranslationAttention out;
  if (target.empty()) {  // the translation's own subwords, not its text encoded again
    Translation t = translate({source}, options)[0];
    out.translation = t.hypotheses[0], tgt = t.token_ids[0];
  } else {
    out.translation = target, tgt = tm.tgt_vocab.encode(target);
  }
  const decode::AttentionOfTranslation a = decode::attention_of(*tm.model, src, tgt);
  src.resize(std::min<size_t>(src.size(), static_cast<size_t>(max_source_tokens())));  // as attention_of read it
  src.push_back(tm.model->config().eos_id);
  tgt.insert(tgt.begin(), tm.model->config().bos_id);
  for (int id : src) out.source_tokens.push_back(tm.src_vocab.piece(id));
  for (int id : tgt) out.target_tokens.push_back(tm.tgt_vocab.piece(id));
  out.encoder = api::weights_of(a.encoder.self), out.decoder = api::weights_of(a.decoder.self), out.cross = api::weights_of(a.decoder.cross);
  return out;
}

int64_t Translator::max_source_tokens() const { return impl_->max_source_tokens(); }

int64_t Translator::source_tokens(const std::string& sentence) const {
  const char* problem = data::text_problem(sentence);
  TFM_CHECK(!problem, "the sentence: " << problem);
  return static_cast<int64_t>(impl_->tm.src_vocab.encode(sentence).size());
}

}  // namespace tfm
