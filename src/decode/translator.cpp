#include "decode/translator.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "tensor/error.h"
#include "tensor/storage.h"

namespace tfm::decode {

namespace {

// A batch of sources, padded, and where its sentences came from.
struct Batch {
  models::Tokens src;
  std::vector<size_t> index;
};

std::vector<Batch> make_batches(const std::vector<std::vector<int>>& sources, int64_t batch_size, int pad, int eos,
                                int64_t max_len) {
  std::vector<size_t> order;
  for (size_t i = 0; i < sources.size(); ++i)
    if (!sources[i].empty()) order.push_back(i);
  // Similar lengths together: less padding, and sentences in a batch finish together.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sources[a].size() < sources[b].size(); });
  std::vector<Batch> batches;
  for (size_t start = 0; start < order.size(); start += static_cast<size_t>(batch_size)) {
    const size_t end = std::min(order.size(), start + static_cast<size_t>(batch_size));
    int64_t cols = 0;
    for (size_t i = start; i < end; ++i) cols = std::max<int64_t>(cols, std::min<int64_t>(sources[order[i]].size(), max_len - 1) + 1);
    Batch b{{std::vector<int>(static_cast<size_t>((end - start) * cols), pad), static_cast<int64_t>(end - start), cols},
            std::vector<size_t>(order.begin() + static_cast<std::ptrdiff_t>(start), order.begin() + static_cast<std::ptrdiff_t>(end))};
    for (size_t i = start; i < end; ++i) {
      // Sources longer than the model's positions are truncated (documented in the README).
      const std::vector<int>& s = sources[order[i]];
      const int64_t n = std::min<int64_t>(s.size(), max_len - 1);
      std::copy_n(s.begin(), n, b.src.data() + static_cast<int64_t>(i - start) * cols);
      b.src.data()[static_cast<int64_t>(i - start) * cols + n] = eos;
    }
    batches.push_back(std::move(b));
  }
  return batches;
}

}  // namespace

std::vector<std::vector<Hypothesis>> translate(models::EncoderDecoder& model, const std::vector<std::vector<int>>& sources,
                                               const SearchOptions& options, int64_t batch_size, int workers,
                                               const std::function<void(int64_t)>& on_batch) {
  TFM_CHECK(batch_size >= 1, "translation batch size must be positive");
  TFM_CHECK(workers >= 0, "translation workers must be 0 (automatic) or more");
  const std::vector<Batch> batches = make_batches(sources, batch_size, model.config().pad_id, options.eos, model.config().max_len);
  std::vector<std::vector<Hypothesis>> results(sources.size(), std::vector<Hypothesis>{Hypothesis{}});
  std::mutex progress_mutex;
  auto search = [&](const Batch& b) {
    std::vector<std::vector<Hypothesis>> out = beam_search(model, b.src, options);
    for (size_t i = 0; i < b.index.size(); ++i) results[b.index[i]] = std::move(out[i]);
    if (!on_batch) return;
    const std::lock_guard<std::mutex> lock(progress_mutex);
    on_batch(static_cast<int64_t>(b.index.size()));
  };
  const int threads = omp_get_max_threads();
  if (workers == 0) workers = batches.size() >= 2 ? threads : 1;
  workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(workers), batches.size()));
  if (workers <= 1) {
    for (const Batch& b : batches) search(b);
    return results;
  }
  // Each worker takes the next batch not yet taken; batches write disjoint results.
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(static_cast<size_t>(workers));
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      omp_set_num_threads(std::max(1, threads / workers));  // this thread's own OpenMP setting
      try {
        for (size_t i = next++; i < batches.size(); i = next++) search(batches[i]);
      } catch (...) {
        errors[static_cast<size_t>(w)] = std::current_exception();
        next = batches.size();  // the others stop after their current batch
      }
    });
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return results;
}

}  // namespace tfm::decode
