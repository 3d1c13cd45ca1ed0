#pragma once
// Corpus-level BLEU and chrF, computed as sacreBLEU computes them by default:
// BLEU with the 13a tokenizer, cased, 4-grams, exponential smoothing and the
// brevity penalty; chrF with character 6-grams, beta 2, whitespace ignored.
#include <string>
#include <vector>

namespace tfm::eval {

// mteval-v13a tokenization (sacreBLEU's "13a").
std::string tokenize_13a(const std::string& line);

struct BleuScore {
  double score = 0;               // 0..100
  double precisions[4] = {0, 0, 0, 0};  // after smoothing, in percent
  double brevity_penalty = 0;
  long hyp_len = 0, ref_len = 0;
  std::string format() const;     // "BLEU = 34.12 65.1/41.2/28.0/19.9 (BP = 1.000 ratio = 1.012 hyp_len = ... ref_len = ...)"
};

// One reference per hypothesis; sizes must match.
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references);

// chrF (0..100).
double corpus_chrf(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references);

}  // namespace tfm::eval
