#pragma once
// Text generation from a decoder-only language model: temperature, top-k, nucleus
// (top-p) and min-p sampling with a seed, or greedy, after repetition, frequency and
// presence penalties, with a key/value cache so that each new token costs one position.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <vector>

#include "models/gpt.h"
#include "ops/random.h"
#include "tfm/decoding.h"
#include "tensor/rng.h"

namespace tfm::decode {

// The public options (tfm/decoding.h), and how the engine runs them.
struct SamplingOptions : GenerationOptions {
  bool use_cache = true;  // false: re-run the whole window each step (for tests)
  std::vector<int> ends{};  // tokens that end the text (GPT-2's <|endoftext|>, a chat model's end of turn), kept as the last

  ops::Sampling sampling() const {
    return {temperature, top_k, top_p, min_p, repetition_penalty, frequency_penalty, presence_penalty};
  }
  bool ends_with(int token) const { return std::find(ends.begin(), ends.end(), token) != ends.end(); }
};

// Continues `prompt` (at least one token) by up to max_new_tokens tokens (fewer where
// an end token comes), calling
// on_token with each as soon as it is chosen. Returns the new tokens. When the
// sequence outgrows the context window, the cache is rebuilt from the last half of
// the window (so the cost stays about one position a token).
std::vector<int> generate(models::GPT& model, const std::vector<int>& prompt, const SamplingOptions& o,
                          const std::function<void(int)>& on_token = {});

// Many sequences generated at once, each joining and leaving between decoding steps
// (continuous batching; a Generator's worker owns one): a step runs one position of
// every running sequence as one batch over ragged caches (nn::KVCache), after running
// the prompts of those that joined since, those of one length as one batch. A sequence
// gets the tokens `generate` gives it alone (within the rounding of batched products:
// the same ids unless two candidates are that close). Not thread-safe: one thread joins
// and steps.
class GenerationBatch {
 public:
  // `max_rows`: at most so many sequences run at once, the others waiting their turn in
  // the order they joined (0: no limit): what bounds the caches' memory.
  explicit GenerationBatch(models::GPT& model, int64_t max_rows = 0) : model_(model), max_rows_(max_rows) {}

  // The most bytes one running sequence's keys and values may take: a whole context window
  // in every layer, where its storage, grown by halves, may reach one and a half windows.
  static int64_t row_bytes(const models::StackConfig& c);

  // A sequence joins (a prompt of at least one token). on_token hears each token as it is
  // chosen, and says whether the sequence goes on (false: it ends there, as at an end
  // token: a stop string); on_done once the sequence has its tokens, or with the
  // exception that ended it (on_token's own, or non-finite scores). Both run on the
  // thread that steps.
  void join(std::vector<int> prompt, const SamplingOptions& o, std::function<bool(int)> on_token,
            std::function<void(std::exception_ptr)> on_done);
  // The prompts of the sequences that joined, then one position of every running one.
  void step();
  int64_t size() const { return static_cast<int64_t>(waiting_.size() + running_.size()); }
  int64_t waiting() const { return static_cast<int64_t>(waiting_.size()); }  // joined, not yet running (max_rows)
  // The bytes the running sequences' key/value caches hold (their storage grows with the
  // longest, stays for the sequences that join while others run, and goes once none do).
  int64_t cache_bytes() const;

 private:
  struct Sequence {
    std::vector<int> tokens;  // prompt and generated
    SamplingOptions o;
    Rng rng;
    int64_t produced = 0, keep;  // keep: the tokens to run when (re)started, at most
    std::function<bool(int)> on_token;
    std::function<void(std::exception_ptr)> on_done;
  };
  // How s's next token is drawn: its settings, generator and tokens so far.
  static ops::RowSampling row_sampling(Sequence& s);
  // Hands `s` its next token, drawn by `pick`; false where it is finished (on_done called).
  bool take(Sequence& s, const std::function<int()>& pick);
  void fail_running(std::exception_ptr why);  // every running sequence hears why, and ends
  static int64_t run_length(const Sequence& s);  // the tokens its prefill runs
  static std::vector<Sequence> one(Sequence s);
  // Sequences whose prefill runs as many tokens each, as one batch: their prompts, first
  // tokens, and their rows of the caches.
  void prefill(std::vector<Sequence> group);
  // The most tokens one prefill runs: prompts of one length that join together run as one
  // batch up to this (the attention's scores grow with its rows' lengths squared).
  static constexpr int64_t kPrefillTokens = 4096;
  models::GPT& model_;
  int64_t max_rows_;
  std::vector<Sequence> waiting_;  // to run from their last `keep` tokens: joined, or outgrew the context window
  std::vector<Sequence> running_;  // batch row b of caches_ is running_[b]
  std::vector<nn::KVCache> caches_;
};

}  // namespace tfm::decode
