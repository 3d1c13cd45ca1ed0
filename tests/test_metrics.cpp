// BLEU and chrF on examples worked out by hand, step by step.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/metrics.h"

namespace tfm {
namespace {

TEST(Tokenize13a, SplitsPunctuationButNotNumbersOrInnerHyphens) {
  EXPECT_EQ(eval::tokenize_13a("Hello, world!"), "Hello , world !");
  EXPECT_EQ(eval::tokenize_13a("It costs 3.14 or 1,000."), "It costs 3.14 or 1,000 .");
  EXPECT_EQ(eval::tokenize_13a("a well-known 5-year plan"), "a well-known 5 - year plan");
  EXPECT_EQ(eval::tokenize_13a("a (b) c: d's"), "a ( b ) c : d's");
  EXPECT_EQ(eval::tokenize_13a("&quot;x&quot; &amp; y"), "\" x \" & y");
  EXPECT_EQ(eval::tokenize_13a("  spaced   out  "), "spaced out");
}

TEST(Bleu, IdenticalCorpusScores100) {
  eval::BleuScore s = eval::corpus_bleu({"the cat sat on the mat ."}, {"the cat sat on the mat ."});
  EXPECT_NEAR(s.score, 100.0, 1e-9);
}

TEST(Bleu, HandWorkedExampleWithSmoothing) {
  // hyp: the cat is on the mat    ref: the cat sat on the mat   (6 tokens each: BP = 1)
  // 1-grams: the x2, cat, on, mat match          -> 5/6
  // 2-grams: "the cat", "on the", "the mat"      -> 3/5
  // 3-grams: "on the mat"                         -> 1/4
  // 4-grams: none of 3 match; exp smoothing, first zero order -> 1 / (2 * 3)
  // BLEU = 100 * (5/6 * 3/5 * 1/4 * 1/6)^(1/4)
  eval::BleuScore s = eval::corpus_bleu({"the cat is on the mat"}, {"the cat sat on the mat"});
  EXPECT_NEAR(s.precisions[0], 100.0 * 5 / 6, 1e-9);
  EXPECT_NEAR(s.precisions[1], 100.0 * 3 / 5, 1e-9);
  EXPECT_NEAR(s.precisions[2], 100.0 * 1 / 4, 1e-9);
  EXPECT_NEAR(s.precisions[3], 100.0 / 6, 1e-9);
  EXPECT_NEAR(s.brevity_penalty, 1.0, 1e-12);
  EXPECT_NEAR(s.score, 100.0 * std::pow(5.0 / 6 * 3.0 / 5 * 1.0 / 4 * 1.0 / 6, 0.25), 1e-9);
}

TEST(Bleu, CorpusStatisticsAreSummedBeforeTheGeometricMean) {
  // Sentence 1: "a b c d" vs "a b c d": 4/4, 3/3, 2/2, 1/1.
  // Sentence 2: "x y" vs "x z w": 1-grams 1/2; 2-grams 0/1; no 3- or 4-grams.
  // Corpus: 5/6, 3/4, 2/2, 1/1; hyp_len 6 < ref_len 7 -> BP = exp(1 - 7/6).
  eval::BleuScore s = eval::corpus_bleu({"a b c d", "x y"}, {"a b c d", "x z w"});
  const double bp = std::exp(1.0 - 7.0 / 6.0);
  EXPECT_NEAR(s.brevity_penalty, bp, 1e-12);
  EXPECT_NEAR(s.score, 100.0 * bp * std::pow(5.0 / 6 * 3.0 / 4 * 1.0 * 1.0, 0.25), 1e-9);
}

TEST(Bleu, TooShortForFourGramsScoresZero) {
  // "the cat" has no 3-grams: sacreBLEU stops and the score is 0.
  EXPECT_EQ(eval::corpus_bleu({"the cat"}, {"the cat sat on the mat"}).score, 0.0);
}

TEST(Chrf, HandWorkedExample) {
  // hyp "ab", ref "a bc" -> whitespace removed: "ab" vs "abc".
  // n=1: hyp {a,b} ref {a,b,c}: P = 2/2, R = 2/3.   n=2: hyp {ab} ref {ab,bc}: P = 1/1, R = 1/2.
  // n=3..6: the hypothesis has none, so those orders are left out (effective order 2).
  // P = 1, R = (2/3 + 1/2) / 2 = 7/12; chrF2 = 100 * 5 P R / (4 P + R).
  const double p = 1.0, r = 7.0 / 12.0;
  EXPECT_NEAR(eval::corpus_chrf({"ab"}, {"a bc"}), 100.0 * 5 * p * r / (4 * p + r), 1e-9);
  EXPECT_NEAR(eval::corpus_chrf({"Größe"}, {"Größe"}), 100.0, 1e-9);
  EXPECT_EQ(eval::corpus_chrf({"xyz"}, {"abc"}), 0.0);
}

}  // namespace
}  // namespace tfm
