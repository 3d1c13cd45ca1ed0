#include "data/bpe_merges.h"

#include <functional>
#include <optional>
#include <queue>

namespace tfm::data {

namespace {

// A pair that a merge joins: its rank, and where its first symbol is.
struct Candidate {
  int rank;
  size_t first;
  bool operator>(const Candidate& other) const { return rank != other.rank ? rank > other.rank : first > other.first; }
};

std::optional<int> rank_of(const MergeRanks& ranks, const std::string& first, const std::string& second) {
  const auto it = ranks.find(first + " " + second);
  return it == ranks.end() ? std::nullopt : std::optional<int>(it->second);
}

}  // namespace

// The symbols are a linked list (`next`, `previous`; a joined symbol's second half is
// emptied) and every adjacent pair that is a merge waits in a queue, the lowest rank and
// then the leftmost first. A pair taken from the queue may have changed since it was
// queued (a neighbour joined something else): then it no longer has that rank and is dropped.
std::vector<std::string> bpe_merge(std::vector<std::string> symbols, const MergeRanks& ranks) {
  const size_t n = symbols.size(), none = n;
  std::vector<size_t> next(n), previous(n);
  for (size_t i = 0; i < n; ++i) next[i] = i + 1, previous[i] = i == 0 ? none : i - 1;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto consider = [&](size_t first) {
    if (first == none || next[first] == none) return;
    if (const std::optional<int> rank = rank_of(ranks, symbols[first], symbols[next[first]])) queue.push({*rank, first});
  };
  for (size_t i = 0; i < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    const size_t second = next[top.first];
    if (symbols[top.first].empty() || second == none || rank_of(ranks, symbols[top.first], symbols[second]) != top.rank) continue;
    symbols[top.first] += symbols[second];
    symbols[second].clear();
    next[top.first] = next[second];
    if (next[second] != none) previous[next[second]] = top.first;
    consider(previous[top.first]);
    consider(top.first);
  }
  std::vector<std::string> merged;
  for (size_t i = 0; i < n; i = next[i]) merged.push_back(std::move(symbols[i]));
  return merged;
}

}  // namespace tfm::data
