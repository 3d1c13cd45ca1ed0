#pragma once
// tfm::Translator: a trained translation model, loaded once, translating plain text for
// any number of callers at once (CTranslate2's Translator is the model).
//
//   tfm::Translator translator("runs/multi30k/best.safetensors");
//   std::vector<tfm::Translation> out = translator.translate({"Ein Hund läuft."});
//   std::cout << out[0].hypotheses[0] << "\n";
//
// A pool of workers searches batches of sentences; requests that callers submit at
// nearly the same time are batched together (a batch that is not full waits up to
// `batch_wait_us` for more, unless its request reached an idle translator after a lull of
// `batch_wait_us`: one caller's requests start at once). Every member function is safe
// to call from many threads.
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include "tfm/attention.h"
#include "tfm/decoding.h"

#include "tfm/export.h"

namespace tfm {

struct TranslatorOptions {
  std::string src_vocab, tgt_vocab;  // default: the vocabularies the checkpoint records
  std::string precision = "f32";     // the linear layers' products: f32, bf16 or int8 (int8: the CPU only)
  std::string device = "cpu";        // where the model computes: cpu, or cuda (a GPU of a build with TFM_CUDA)
  int threads = 0;                   // threads in all (0: the process's OpenMP setting)
  int workers = 0;                   // batches searched at once, sharing the threads (0: one per thread)
  int64_t max_batch = 32;            // sentences per batch
  int64_t max_batch_tokens = 0;      // source subwords per batch, padding included: sentences x the longest (0: no bound)
  int64_t batch_wait_us = 2000;      // how long a batch that is not full waits for other requests (not after a lull)
  // When given, hears each batch as its search ends (its sentences and padded source
  // subwords), from the worker that searched it; it must not throw.
  std::function<void(int64_t sentences, int64_t tokens)> on_batch;
};

struct Translation {
  std::vector<std::string> hypotheses;  // best first (an empty source: one empty hypothesis)
  std::vector<double> scores;           // each hypothesis's score: log-probability / length^penalty
  std::vector<std::vector<int>> token_ids;  // each hypothesis's target subword ids
  bool truncated = false;  // the source had more subwords than the model's positions: the rest was not read
  // With return_attention, each hypothesis's encoder-decoder attention in the last decoder
  // layer, averaged over its heads: row-major [target subwords + 1, source subwords + 1]
  // (row i: the query that chose target subword i, the last row </s>; the last column
  // the source's </s>), each row summing to 1. None for an empty source (not translated).
  std::vector<std::vector<float>> attention;
};

class TFM_API Translator {
 public:
  // Loads the checkpoint (and its vocabularies) and starts the workers; throws
  // std::runtime_error with one line saying what is wrong.
  explicit Translator(const std::string& checkpoint, const TranslatorOptions& options = {});
  // Finishes the requests already submitted, then stops the workers.
  ~Translator();
  Translator(const Translator&) = delete;
  Translator& operator=(const Translator&) = delete;

  // Translates `sources` (one sentence each) and waits for the results, in input order.
  std::vector<Translation> translate(const std::vector<std::string>& sources, const TranslationOptions& options = {});

  // The same without waiting (invalid options or text throw here, at once). `on_progress`,
  // when given, hears how many sentences each finished batch translated, one call at a
  // time, from a worker; if it throws, the exception reaches the caller through the future.
  // Once `cancel` is requested, the request's sentences still waiting for a worker are
  // dropped and the future throws "the request was cancelled" (a batch being searched
  // finishes first).
  std::future<std::vector<Translation>> submit(std::vector<std::string> sources, const TranslationOptions& options = {},
                                               std::function<void(int64_t)> on_progress = {}, std::stop_token cancel = {});

  // Every layer's and head's attention for `source` translated as `target` (empty: as
  // translate() translates it with `options`), on the calling thread.
  TranslationAttention attention(const std::string& source, const std::string& target = "", const TranslationOptions& options = {});

  // A source's subwords past this many are not read (Translation::truncated says so).
  int64_t max_source_tokens() const;
  // How many subwords `sentence` is, without the </s> the model adds.
  int64_t source_tokens(const std::string& sentence) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tfm
