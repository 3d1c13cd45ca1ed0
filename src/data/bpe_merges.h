#pragma once
// BPE's merging, shared by GPT-2's tokenizer and tokenizer.json's BPE: the symbols of a
// word are joined pair by pair, the pair of lowest rank first (the leftmost where it
// occurs more than once), until no adjacent pair is a merge. That is what transformers'
// GPT2Tokenizer.bpe and the tokenizers library's BPE both compute; this is the latter's
// way (a queue of candidate pairs over a linked list of symbols), so that a long word, or
// a whole text where no pre-tokenizer cuts it (SentencePiece-style BPE), costs
// O(n log n) rather than a scan of the word per merge.
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tfm::data {

// A BPE's merges: "first second" -> rank (its place in the list), lower merges first.
using MergeRanks = std::unordered_map<std::string, int>;

std::vector<std::string> bpe_merge(std::vector<std::string> symbols, const MergeRanks& ranks);

// The tokens of words, kept for the next time a word occurs (up to 100,000 words, and
// only words shorter than 256 bytes, as the tokenizers library keeps them): most text
// repeats its words. Safe to share between threads.
class WordCache {
 public:
  template <class Tokenize>
  std::vector<std::string> get(const std::string& word, Tokenize tokenize) {
    if (word.size() >= kLongestWord) return tokenize(word);
    {
      std::lock_guard lock(mutex_);
      const auto it = tokens_.find(word);
      if (it != tokens_.end()) return it->second;
    }
    std::vector<std::string> tokens = tokenize(word);
    std::lock_guard lock(mutex_);
    if (tokens_.size() >= kMostWords) tokens_.clear();  // bounded, for long-running servers
    tokens_.emplace(word, tokens);
    return tokens;
  }

 private:
  static constexpr size_t kMostWords = 100000, kLongestWord = 256;
  std::mutex mutex_;
  std::unordered_map<std::string, std::vector<std::string>> tokens_;
};

}  // namespace tfm::data
