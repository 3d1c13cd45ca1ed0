#include "eval/metrics.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>

#include "tensor/error.h"

namespace tfm::eval {

namespace {

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
}

std::vector<std::string> split_whitespace(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

using NgramCounts = std::map<std::vector<std::string>, int>;

NgramCounts ngrams(const std::vector<std::string>& words, size_t n) {
  NgramCounts counts;
  for (size_t i = 0; i + n <= words.size(); ++i) ++counts[std::vector<std::string>(words.begin() + i, words.begin() + i + n)];
  return counts;
}

}  // namespace

std::string tokenize_13a(const std::string& input) {
  std::string line = input;
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    replace_all(line, "&quot;", "\"");
    replace_all(line, "&amp;", "&");
    replace_all(line, "&lt;", "<");
    replace_all(line, "&gt;", ">");
  }
  line = " " + line + " ";
  // The language-independent part of mteval-v13a's tokenizer: split off
  // punctuation, periods and commas unless inside a number, and dashes after digits.
  static const std::regex punctuation(R"(([\{-\~\[-\` -\&\(-\+\:-\@\/]))");
  static const std::regex period_comma_after(R"(([^0-9])([\.,]))");
  static const std::regex period_comma_before(R"(([\.,])([^0-9]))");
  static const std::regex dash_after_digit(R"(([0-9])(-))");
  line = std::regex_replace(line, punctuation, " $1 ");
  line = std::regex_replace(line, period_comma_after, "$1 $2 ");
  line = std::regex_replace(line, period_comma_before, " $1 $2");
  line = std::regex_replace(line, dash_after_digit, "$1 $2 ");
  std::string out;
  for (const std::string& w : split_whitespace(line)) out += (out.empty() ? "" : " ") + w;
  return out;
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references) {
  TFM_CHECK(hypotheses.size() == references.size(),
            "BLEU: " << hypotheses.size() << " hypotheses for " << references.size() << " references");
  long correct[4] = {0, 0, 0, 0}, total[4] = {0, 0, 0, 0};
  BleuScore s;
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    std::vector<std::string> hyp = split_whitespace(tokenize_13a(hypotheses[i]));
    std::vector<std::string> ref = split_whitespace(tokenize_13a(references[i]));
    s.hyp_len += static_cast<long>(hyp.size());
    s.ref_len += static_cast<long>(ref.size());
    for (size_t n = 1; n <= 4; ++n) {
      NgramCounts h = ngrams(hyp, n), r = ngrams(ref, n);
      for (const auto& [gram, count] : h) {
        auto it = r.find(gram);
        correct[n - 1] += std::min(count, it == r.end() ? 0 : it->second);  // clipped counts
        total[n - 1] += count;
      }
    }
  }
  s.brevity_penalty = s.hyp_len >= s.ref_len ? 1.0 : (s.hyp_len > 0 ? std::exp(1.0 - static_cast<double>(s.ref_len) / s.hyp_len) : 0.0);
  // Exponential smoothing: the k-th order with no match counts as 1 / 2^k matches.
  double smooth = 1.0, log_sum = 0.0;
  bool zero = false;
  for (int n = 0; n < 4; ++n) {
    if (total[n] == 0) {
      zero = true;  // hypotheses too short for n-grams of this order
      break;
    }
    if (correct[n] == 0) {
      smooth *= 2;
      s.precisions[n] = 100.0 / (smooth * total[n]);
    } else {
      s.precisions[n] = 100.0 * correct[n] / total[n];
    }
    log_sum += std::log(s.precisions[n]);
  }
  s.score = zero ? 0.0 : s.brevity_penalty * std::exp(log_sum / 4);
  return s;
}

std::string BleuScore::format() const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %ld ref_len = %ld)", score,
                precisions[0], precisions[1], precisions[2], precisions[3], brevity_penalty,
                ref_len ? static_cast<double>(hyp_len) / ref_len : 0.0, hyp_len, ref_len);
  return buf;
}

namespace {

// UTF-8 code points of s without whitespace.
std::vector<std::string> characters(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    len = std::min(len, s.size() - i);
    if (!(len == 1 && std::isspace(c))) out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace

double corpus_chrf(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references) {
  TFM_CHECK(hypotheses.size() == references.size(),
            "chrF: " << hypotheses.size() << " hypotheses for " << references.size() << " references");
  constexpr int kOrder = 6;
  constexpr double kBeta = 2.0;
  long hyp_count[kOrder] = {}, ref_count[kOrder] = {}, match[kOrder] = {};
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    std::vector<std::string> h = characters(hypotheses[i]), r = characters(references[i]);
    for (size_t n = 1; n <= kOrder; ++n) {
      NgramCounts hg = ngrams(h, n), rg = ngrams(r, n);
      for (const auto& [g, c] : hg) {
        hyp_count[n - 1] += c;
        auto it = rg.find(g);
        if (it != rg.end()) match[n - 1] += std::min(c, it->second);
      }
      for (const auto& [g, c] : rg) ref_count[n - 1] += c;
    }
  }
  // Precision and recall averaged over the orders present on both sides, then F-beta.
  double precision = 0, recall = 0;
  int effective = 0;
  for (int n = 0; n < kOrder; ++n) {
    if (hyp_count[n] > 0 && ref_count[n] > 0) {
      precision += static_cast<double>(match[n]) / hyp_count[n];
      recall += static_cast<double>(match[n]) / ref_count[n];
      ++effective;
    }
  }
  if (effective == 0) return 0.0;
  precision /= effective;
  recall /= effective;
  if (precision + recall == 0) return 0.0;
  const double b2 = kBeta * kBeta;
  return 100.0 * (1 + b2) * precision * recall / (b2 * precision + recall);
}

}  // namespace tfm::eval
