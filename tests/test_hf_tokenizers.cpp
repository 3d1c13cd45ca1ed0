// Hugging Face's tokenizers in tfm (GPT-2's byte-level BPE, BERT's WordPiece, Marian's
// SentencePiece through vocab.json) against what transformers 4.39 computed for the
// fixtures in ../shared/fixtures/hf, and on edge cases. Where a fixture has no case, the
// expected values come from transformers' slow-tokenizer code transcribed into Python
// (the same code, run on this machine's Python unicodedata).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "data/byte_bpe.h"
#include "data/unicode.h"
#include "data/vocab.h"
#include "data/wordpiece.h"
#include "support/fixture.h"
#include "support/process.h"

namespace tfm::data {
namespace {

using nlohmann::json;
using tfm::testing::error_of;
using tfm::testing::hf_fixture_path;
using tfm::testing::TempDir;
using tfm::testing::write_file;

json reference(const std::string& fixture) { return json::parse(std::ifstream(hf_fixture_path(fixture + "/reference.json"))); }

std::vector<int> ints(const json& list) { return list.get<std::vector<int>>(); }
std::vector<std::string> strings(const json& list) { return list.get<std::vector<std::string>>(); }

// A copy of a fixture's files in a temporary directory, with `config` as tokenizer_config.json.
void copy_with_config(const std::string& fixture, const std::vector<std::string>& files, const std::string& config, const TempDir& dir) {
  for (const std::string& file : files) std::filesystem::copy_file(hf_fixture_path(fixture + "/" + file), dir.path(file));
  write_file(dir.path("tokenizer_config.json"), config);
}

// ---- Unicode ----

TEST(HfTokenizerUnicode, ReplacesInvalidUtf8AsPython) {
  // bytes.decode("utf-8", "replace"): one U+FFFD per maximal invalid subpart.
  const std::pair<std::string, std::string> cases[] = {
      {"\xC3", "\uFFFD"},         {"\xC3\xA9", "\u00E9"},       {"\xA9", "\uFFFD"},
      {"\xE2\x82", "\uFFFD"},     {"\xE0\x80", "\uFFFD\uFFFD"}, {"\xED\xA0\x80", "\uFFFD\uFFFD\uFFFD"},
      {"\xF0\x9F\x98" "A", "\uFFFDA"}, {"\xF4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"}, {"\xC0\xAF", "\uFFFD\uFFFD"},
      {"\xF0\x9F\x98\x80", "\U0001F600"}};
  for (const auto& [bytes, text] : cases) EXPECT_EQ(replace_invalid_utf8(bytes), text) << ::testing::PrintToString(bytes);
  EXPECT_FALSE(valid_utf8("ok\xE2\x82"));
  EXPECT_TRUE(valid_utf8("ok \u00E9 \U0001F600"));
}

TEST(HfTokenizerUnicode, InvalidUtf8IsAnErrorNamingTheByte) {
  EXPECT_EQ(error_of([] { code_points("ab\xFF", "the prompt"); }), "the prompt: invalid UTF-8 at byte 2");
  EXPECT_EQ(code_points("a\u00E9\U0001F600", "x"), U"a\u00E9\U0001F600");
  EXPECT_EQ(to_utf8(U"a\u00E9\U0001F600"), "a\u00E9\U0001F600");
}

TEST(HfTokenizerUnicode, LowerCaseAndNormalizationAsPython) {
  EXPECT_EQ(unicode::lower(U"A\u00C9\u0130\u03A3\u1E9E"), U"a\u00E9i\u0307\u03C3\u00DF");  // İ lowers to two code points
  EXPECT_EQ(unicode::nfd(U"\u00E9"), U"e\u0301");
  EXPECT_EQ(unicode::nfd(U"a\u0301\u0323"), U"a\u0323\u0301");  // marks in order of combining class
  EXPECT_EQ(unicode::nfc(U"e\u0301"), U"\u00E9");
  EXPECT_EQ(unicode::nfc(U"\u212B"), U"\u00C5");                // Ångström sign: a singleton
  EXPECT_EQ(unicode::nfc(U"\u1100\u1161\u11A8"), U"\uAC01");    // Hangul jamo compose by arithmetic
  EXPECT_EQ(unicode::nfc(U"\u0301e"), U"\u0301e");              // a leading mark has nothing to join
  EXPECT_EQ(unicode::category(U'\u00E9'), unicode::Category::kLetter);
  EXPECT_EQ(unicode::category(U'\u0663'), unicode::Category::kNumber);
  EXPECT_EQ(unicode::category(U'\u2014'), unicode::Category::kPunctuation);
  EXPECT_EQ(unicode::category(U'\u0301'), unicode::Category::kNonspacingMark);
  EXPECT_EQ(unicode::category(U'\uE000'), unicode::Category::kOther);  // private use
  EXPECT_EQ(unicode::category(U'$'), unicode::Category::kRest);
}

TEST(HfTokenizerUnicode, WhitespaceAsPythonAndAsTheRegexModule) {
  EXPECT_TRUE(unicode::is_python_space(0x1C));  // str.isspace() takes the information separators...
  EXPECT_FALSE(unicode::is_white_space(0x1C));  // ...which `regex`'s \s (White_Space) does not
  for (char32_t c : {U'\t', U' ', U'\u0085', U'\u00A0', U'\u2028', U'\u3000'}) {
    EXPECT_TRUE(unicode::is_python_space(c));
    EXPECT_TRUE(unicode::is_white_space(c));
  }
  EXPECT_FALSE(unicode::is_python_space(U'\u200B'));
  EXPECT_EQ(strip_space("\u3000 a b\n\u2028"), "a b");
  EXPECT_EQ(lstrip_space(" a "), "a ");
  EXPECT_EQ(rstrip_space(" a\u00A0"), " a");
}

// ---- GPT-2 ----

class HfTokenizerGpt2 : public ::testing::Test {
 protected:
  ByteLevelBpe gpt2 = ByteLevelBpe::load(hf_fixture_path("gpt2_tiny"));
  json cases = reference("gpt2_tiny")["cases"];
};

TEST_F(HfTokenizerGpt2, PromptsGiveTransformersIdsAndTokens) {
  ASSERT_EQ(cases.size(), 2u);
  for (const json& c : cases) {
    EXPECT_EQ(gpt2.encode(c["prompt"]), ints(c["input_ids"])) << c["prompt"];
    EXPECT_EQ(gpt2.tokens(c["prompt"]), strings(c["tokens"])) << c["prompt"];
  }
}

TEST_F(HfTokenizerGpt2, DecodingGivesTransformersText) {
  ASSERT_EQ(cases.size(), 2u);
  for (const json& c : cases) {
    EXPECT_EQ(gpt2.decode(ints(c["input_ids"])), c["prompt"].get<std::string>());
    EXPECT_EQ(gpt2.decode(ints(c["greedy_new_ids"])), c["greedy_new_text"].get<std::string>());  // p1's has U+FFFD
  }
}

TEST_F(HfTokenizerGpt2, CutsWordsAsGpt2sPattern) {
  const std::pair<std::string, std::vector<std::string>> words[] = {
      {"Hello  world", {"H", "ell", "o", "\u0120", "\u0120wor", "ld"}},  // the space before a word goes with it
      {"I'll say 'S'", {"I", "'ll", "\u0120say", "\u0120'", "S", "'"}},    // contractions are lower case
      {"a\n\n b", {"a", "\u010A", "\u010A", "\u0120b"}},
      {"x\u00A0y", {"x", "\u00C2", "\u0142", "y"}},                       // a no-break space is whitespace, not " "
      {"1234 56", {"1", "2", "3", "4", "\u0120", "5", "6"}},
      {"end  ", {"end", "\u0120", "\u0120"}},
      {"a\x1C's", {"a", "\u011C", "'", "s"}},  // U+001C is not \s for `regex`: no contraction after it
  };
  for (const auto& [text, tokens] : words) EXPECT_EQ(gpt2.tokens(text), tokens) << ::testing::PrintToString(text);
}

TEST_F(HfTokenizerGpt2, FindsEndOfTextInsideText) {
  const std::string text = "don't<|endoftext|> It's";
  const std::vector<int> ids = gpt2.encode(text);
  EXPECT_EQ(ids, (std::vector<int>{67, 274, 6, 83, 556, 303, 83, 333}));
  EXPECT_EQ(gpt2.decode(ids), text);
  EXPECT_EQ(gpt2.decode(ids, /*skip_special=*/true), "don't It's");
  EXPECT_EQ(gpt2.encode("<|endoftext|><|endoftext|>"), (std::vector<int>{556, 556}));
}

TEST_F(HfTokenizerGpt2, DecodesPartialUtf8AsPython) {
  // Ids of byte symbols: 127 'Ã' (0xC3), 102 '©' (0xA9), 158 'â' (0xE2), 224 'Ĥ' (0x82), 32 'A'.
  EXPECT_EQ(gpt2.decode({127}), "\uFFFD");
  EXPECT_EQ(gpt2.decode({127, 102}), "\u00E9");
  EXPECT_EQ(gpt2.decode({102, 64}), "\uFFFDa");
  EXPECT_EQ(gpt2.decode({158, 224, 32}), "\uFFFDA");
  EXPECT_EQ(gpt2.decode({169, 254, 222}), "\uFFFD\uFFFD\uFFFD");  // a surrogate's bytes: three invalid subparts
}

TEST_F(HfTokenizerGpt2, EmptyAndInvalidText) {
  EXPECT_TRUE(gpt2.encode("").empty());
  EXPECT_EQ(gpt2.decode({}), "");
  EXPECT_EQ(error_of([&] { gpt2.encode("caf\xC3"); }), "the text to tokenize: invalid UTF-8 at byte 3");
  EXPECT_EQ(error_of([&] { gpt2.decode({557}); }), "token id 557 is outside the vocabulary (0 to 556)");
}

TEST_F(HfTokenizerGpt2, SpecialIdsAndSize) {
  EXPECT_EQ(gpt2.size(), 557);
  EXPECT_EQ(gpt2.special_id(SpecialToken::kEos), 556);
  EXPECT_EQ(gpt2.special_id(SpecialToken::kBos), 556);
  EXPECT_EQ(gpt2.special_id(SpecialToken::kUnk), 556);
  EXPECT_EQ(gpt2.special_id(SpecialToken::kPad), std::nullopt);  // "pad_token": null
  EXPECT_EQ(gpt2.piece(556), "<|endoftext|>");
  EXPECT_TRUE(gpt2.is_special(556));
  EXPECT_FALSE(gpt2.is_special(220));
}

TEST(HfTokenizerGpt2Config, PrefixSpaceBosTokenAndNoConfiguration) {
  TempDir dir;
  copy_with_config("gpt2_tiny", {"vocab.json", "merges.txt"}, R"({"add_prefix_space": true, "add_bos_token": true})", dir);
  EXPECT_EQ(ByteLevelBpe::load(dir.path("")).encode("Hello"), (std::vector<int>{556, 220, 39, 412, 78}));
  std::filesystem::remove(dir.path("tokenizer_config.json"));  // GPT2Tokenizer's defaults: <|endoftext|> is special
  const ByteLevelBpe plain = ByteLevelBpe::load(dir.path(""));
  EXPECT_EQ(plain.encode("a<|endoftext|>"), (std::vector<int>{64, 556}));
  EXPECT_EQ(plain.special_id(SpecialToken::kEos), 556);
}

TEST(HfTokenizerGpt2Config, AddedTokensTakeWhitespaceAsConfigured) {
  TempDir dir;
  copy_with_config("gpt2_tiny", {"vocab.json", "merges.txt"},
                   R"({"added_tokens_decoder": {"556": {"content": "<|endoftext|>", "lstrip": true, "rstrip": true, "special": true}},
                       "eos_token": "<|endoftext|>"})",
                   dir);
  const ByteLevelBpe gpt2 = ByteLevelBpe::load(dir.path(""));
  EXPECT_EQ(gpt2.tokens("a  <|endoftext|>  b"), (std::vector<std::string>{"a", "<|endoftext|>", "b"}));
}

TEST(HfTokenizerGpt2Config, MalformedFilesAreOneLineErrorsNamingThem) {
  TempDir dir;
  copy_with_config("gpt2_tiny", {"vocab.json"}, "{}", dir);
  write_file(dir.path("merges.txt"), "#version: 0.2\n\u0120 t\nh e x\n");
  EXPECT_EQ(error_of([&] { ByteLevelBpe::load(dir.path("")); }),
            dir.path("merges.txt") + ":3: expected two symbols separated by a space, got \"h e x\"");
  write_file(dir.path("merges.txt"), "#version: 0.2\n");
  write_file(dir.path("vocab.json"), R"({"a": 0, "b": 0})");
  EXPECT_EQ(error_of([&] { ByteLevelBpe::load(dir.path("")); }), dir.path("vocab.json") + ": \"a\" and \"b\" both have id 0");
  write_file(dir.path("vocab.json"), R"(["a"])");
  EXPECT_EQ(error_of([&] { ByteLevelBpe::load(dir.path("")); }), dir.path("vocab.json") + ": not a JSON object of tokens and their ids");
  write_file(dir.path("vocab.json"), R"({"a": 0})");
  EXPECT_EQ(error_of([&] { ByteLevelBpe::load(dir.path("")); }),
            dir.path("tokenizer_config.json") + ": the special token <|endoftext|> is neither in the vocabulary nor an added token");
}

// ---- BERT ----

class HfTokenizerBert : public ::testing::Test {
 protected:
  WordPiece bert = WordPiece::load(hf_fixture_path("bert_tiny_uncased"));
  json cases = reference("bert_tiny_uncased")["cases"];
};

TEST_F(HfTokenizerBert, SentencesGiveTransformersIdsTokensAndText) {
  ASSERT_EQ(cases.size(), 3u);
  for (const json& c : cases) {
    EXPECT_EQ(bert.encode(c["text"]), ints(c["input_ids"])) << c["text"];
    EXPECT_EQ(bert.tokens(c["text"]), strings(c["tokens"])) << c["text"];
    EXPECT_EQ(bert.decode(ints(c["input_ids"])), c["decoded"].get<std::string>());
  }
}

TEST_F(HfTokenizerBert, DecodingCanSkipSpecialTokens) {
  const std::string texts[] = {"a man in a blue shirt is on a ladder.", "two young children are playing with a dog in the park!",
                               "the cafe's owner, zoe, 42 croissants for."};  // [UNK] is special too
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(bert.decode(ints(cases[i]["input_ids"]), /*skip_special=*/true), texts[i]);
}

TEST_F(HfTokenizerBert, SpecialIdsAndSize) {
  EXPECT_EQ(bert.size(), 312);
  EXPECT_EQ(bert.special_id(SpecialToken::kPad), 0);
  EXPECT_EQ(bert.special_id(SpecialToken::kUnk), 1);
  EXPECT_EQ(bert.special_id(SpecialToken::kCls), 2);
  EXPECT_EQ(bert.special_id(SpecialToken::kSep), 3);
  EXPECT_EQ(bert.special_id(SpecialToken::kMask), 4);
  EXPECT_EQ(bert.special_id(SpecialToken::kEos), std::nullopt);
}

TEST_F(HfTokenizerBert, DropsControlCharactersAndSplitsAtWhitespace) {
  // BEL, zero-width space (a format character), NUL and U+FFFD go; the tab separates.
  EXPECT_EQ(bert.encode("a\x07" "b\u200B" "c" + std::string(1, '\0') + "d\uFFFD" "e\tf"), (std::vector<int>{2, 22, 56, 57, 58, 59, 27, 3}));
}

TEST_F(HfTokenizerBert, WordsOver100CharactersAreUnknown) {
  EXPECT_EQ(bert.encode(std::string(100, 'x')).size(), 102u);  // x ##x ##x ... between [CLS] and [SEP]
  EXPECT_EQ(bert.encode(std::string(101, 'x')), (std::vector<int>{2, 1, 3}));
  EXPECT_EQ(bert.encode(std::string(150, 'a')), (std::vector<int>{2, 1, 3}));
}

TEST_F(HfTokenizerBert, SpecialTokensInsideTextKeepTheirCase) {
  EXPECT_EQ(bert.tokens("[mask] A[MASK]b"),
            (std::vector<std::string>{"[CLS]", "[UNK]", "m", "##a", "##s", "##k", "[UNK]", "a", "[MASK]", "b", "[SEP]"}));
  EXPECT_EQ(bert.decode(bert.encode("[mask] A[MASK]b"), /*skip_special=*/true), "mask a b");
}

TEST_F(HfTokenizerBert, EmptyAndInvalidText) {
  EXPECT_EQ(bert.encode(""), (std::vector<int>{2, 3}));
  EXPECT_EQ(bert.encode(" \n "), (std::vector<int>{2, 3}));
  EXPECT_EQ(error_of([&] { bert.encode("\xE9t\xE9"); }), "the text to tokenize: invalid UTF-8 at byte 0");
}

TEST(HfTokenizerBertConfig, LowerCaseAccentsAndChineseCharactersAsConfigured) {
  struct Case {
    std::string config, text;
    std::vector<std::string> tokens;
  };
  const Case cases[] = {
      {"{}", "\u65E5\u672C\u8A9E", {"\u65E5", "\u672C", "[UNK]"}},  // each ideograph a word
      {R"({"tokenize_chinese_chars": false})", "\u65E5\u672C\u8A9E", {"[UNK]"}},
      {"{}", "Caf\u00E9 CAFE\u0301", {"c", "##a", "##f", "##e", "c", "##a", "##f", "##e"}},
      {R"({"do_lower_case": false})", "Caf\u00E9 Cafe\u0301", {"Caf\u00E9", "Caf\u00E9"}},  // NFC first
      {R"({"do_lower_case": true, "strip_accents": false})", "CAF\u00C9", {"c", "##a", "##f", "##\u00E9"}},
      {R"({"do_lower_case": false, "strip_accents": true})", "Caf\u00E9", {"[UNK]"}},  // "Cafe" is not in the vocabulary
  };
  for (const Case& c : cases) {
    TempDir dir;
    std::string vocab = tfm::testing::read_file(hf_fixture_path("bert_tiny_uncased/vocab.txt"));
    write_file(dir.path("vocab.txt"), vocab + "\u65E5\n\u672C\nCaf\u00E9\n\u00E9\n##\u00E9\n");
    write_file(dir.path("tokenizer_config.json"), c.config);
    std::vector<std::string> expected = c.tokens;
    expected.insert(expected.begin(), "[CLS]");
    expected.push_back("[SEP]");
    EXPECT_EQ(WordPiece::load(dir.path("")).tokens(c.text), expected) << c.config << " " << c.text;
  }
}

TEST(HfTokenizerBertConfig, RefusesWhatItDoesNotImplement) {
  TempDir dir;
  copy_with_config("bert_tiny_uncased", {"vocab.txt"}, R"({"never_split": ["xyz"]})", dir);
  EXPECT_EQ(error_of([&] { WordPiece::load(dir.path("")); }),
            dir.path("tokenizer_config.json") + ": never_split is not supported (make those tokens added tokens)");
  write_file(dir.path("tokenizer_config.json"), R"({"do_lower_case": "yes"})");
  EXPECT_EQ(error_of([&] { WordPiece::load(dir.path("")); }), dir.path("tokenizer_config.json") + ": \"do_lower_case\" must be true, false or null");
}

// ---- Marian ----

// A Marian fixture's cases: each text's ids (</s> appended) as MarianTokenizer gives them.
void expect_ids_are_transformers(const Vocab& source, const Vocab& target, const json& cases) {
  for (const json& c : cases) {
    std::vector<int> source_ids = source.encode(c["source_text"]), target_ids = target.encode(c["target_text"]);
    source_ids.push_back(source.specials().eos);
    target_ids.push_back(target.specials().eos);
    EXPECT_EQ(source_ids, ints(c["input_ids"])) << c["source_text"];
    EXPECT_EQ(target_ids, ints(c["labels"])) << c["target_text"];
  }
}

// A Marian fixture's greedy and beam-4 generations decoded as transformers decoded them.
void expect_generations_decode_as_transformers(const Vocab& target, const json& cases) {
  for (const json& c : cases) {
    for (const char* kind : {"greedy", "beam4"}) {
      std::vector<int> ids = ints(c[std::string(kind) + "_ids"]);
      ids.erase(ids.begin());  // the decoder's start, <pad>
      EXPECT_EQ(target.decode(ids), c[std::string(kind) + "_text"].get<std::string>()) << kind;
    }
  }
}

class HfTokenizerMarian : public ::testing::Test {
 protected:
  static Vocab side(const char* spm) {
    return Vocab::load_mapped(hf_fixture_path(std::string("marian_opus_mt_tiny_de_en/") + spm), hf_fixture_path("marian_opus_mt_tiny_de_en/vocab.json"));
  }
  Vocab source = side("source.spm"), target = side("target.spm");
  json cases = reference("marian_opus_mt_tiny_de_en")["cases"];
};

TEST_F(HfTokenizerMarian, SourceAndTargetIdsAreTransformers) {
  ASSERT_EQ(cases.size(), 5u);
  expect_ids_are_transformers(source, target, cases);
}

TEST_F(HfTokenizerMarian, DecodedGenerationsAreTransformersTexts) {
  ASSERT_EQ(cases.size(), 5u);
  expect_generations_decode_as_transformers(target, cases);
}

TEST_F(HfTokenizerMarian, SpecialIdsPiecesAndSize) {
  EXPECT_EQ(source.size(), 507);
  EXPECT_EQ(source.specials().eos, 0);
  EXPECT_EQ(source.specials().bos, 0);
  EXPECT_EQ(source.specials().unk, 1);
  EXPECT_EQ(source.specials().pad, 506);
  EXPECT_EQ(target.piece(506), "<pad>");
  EXPECT_EQ(target.piece(85), "\u2581A");
  const SpecialIds tfm_ids;  // tfm's own vocabularies
  EXPECT_EQ(std::vector<int>({tfm_ids.pad, tfm_ids.unk, tfm_ids.bos, tfm_ids.eos}), std::vector<int>({Vocab::kPad, Vocab::kUnk, Vocab::kBos, Vocab::kEos}));
}

TEST_F(HfTokenizerMarian, UnknownPiecesAreUnkAndDecodingDropsThem) {
  const std::vector<int> ids = source.encode("Ein \u65E5 Mann");
  EXPECT_EQ(ids, (std::vector<int>{9, 2, 1, 27}));
  EXPECT_EQ(source.decode(ids), "Ein  Mann");
}

// A source piece the target model lacks (the model may generate any id of the shared
// vocabulary) is left as it is by SentencePiece, and its "▁" becomes a space, as
// MarianTokenizer's convert_tokens_to_string does.
TEST_F(HfTokenizerMarian, SourcePiecesInATargetTextDecodeWithSpaces) {
  const std::vector<int> ids = source.encode("Kinder Kinder");
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(target.piece(ids[0]), "\u2581Kinder");
  EXPECT_EQ(target.decode(ids), "Kinder Kinder");
}

TEST_F(HfTokenizerMarian, ChecksumsTellTheSidesApart) {
  EXPECT_NE(source.checksum(), target.checksum());
  EXPECT_EQ(source.checksum(), side("source.spm").checksum());
}

TEST(HfTokenizerMarianFiles, VocabJsonNeedsMariansSpecialTokens) {
  TempDir dir;
  write_file(dir.path("vocab.json"), R"({"</s>": 0, "<unk>": 1})");
  const std::string spm = hf_fixture_path("marian_opus_mt_tiny_de_en/source.spm");
  EXPECT_EQ(error_of([&] { Vocab::load_mapped(spm, dir.path("vocab.json")); }), dir.path("vocab.json") + ": has no <pad>, which a Marian vocabulary needs");
  write_file(dir.path("vocab.json"), R"({"</s>": 0, "<unk>": 1, "<pad>": 3})");
  EXPECT_EQ(error_of([&] { Vocab::load_mapped(spm, dir.path("vocab.json")); }),
            dir.path("vocab.json") + ": the id of \"<pad>\" is 3; ids must be 0 to 2, each once");
}

// ---- Marian's language labels (tests/fixtures/hf/marian_multi_target_tiny, made by
// tests/reference/make_hf_fixtures.py: a vocab.json with >>fr<<, >>cmn_Hans<<, >>fra<<, ...) ----

class HfTokenizerMarianLabels : public ::testing::Test {
 protected:
  static std::string file(const std::string& name) { return tfm::testing::fixture_path("hf/marian_multi_target_tiny/" + name); }
  Vocab source = Vocab::load_mapped(file("source.spm"), file("vocab.json")), target = Vocab::load_mapped(file("target.spm"), file("vocab.json"));
  json cases = json::parse(std::ifstream(file("reference.json")))["cases"];
};

// A label starting the text is one token; one elsewhere is cut out, with all between it
// and the line's last "<<" (the same on the target side), as MarianTokenizer does.
TEST_F(HfTokenizerMarianLabels, IdsAreTransformers) {
  ASSERT_EQ(cases.size(), 7u);
  expect_ids_are_transformers(source, target, cases);
  EXPECT_EQ(source.piece(source.encode(">>cmn_Hans<< Two dogs.")[0]), ">>cmn_Hans<<");
}

TEST_F(HfTokenizerMarianLabels, DecodedGenerationsAreTransformersTexts) {
  expect_generations_decode_as_transformers(target, cases);
}

// MarianTokenizer would read these as <unk> and translate into a language of the model's choosing.
TEST_F(HfTokenizerMarianLabels, ALabelTheVocabularyLacksIsRefusedByName) {
  const std::string labels = ">>fr<<, >>es<<, >>it<<, >>pt_BR<<, >>cmn_Hans<<, >>fra<<, >>por<< (7 in all)";
  EXPECT_EQ(error_of([&] { source.encode(">>xx<< A dog."); }), "'>>xx<<' is not a language label of this model; its labels: " + labels);
  EXPECT_EQ(error_of([&] { source.encode(">>fr<< A dog <<"); }),  // the pattern is greedy: the match is the label
            "'>>fr<< A dog <<' is not a language label of this model; its labels: " + labels);
  const Vocab single = Vocab::load_mapped(hf_fixture_path("marian_opus_mt_tiny_de_en/source.spm"), hf_fixture_path("marian_opus_mt_tiny_de_en/vocab.json"));
  EXPECT_EQ(error_of([&] { single.encode(">>en<< Ein Hund."); }),
            "'>>en<<' is not a language label of this model, which has none (it translates into one language): remove it from the text");
}

// separate_vocabs: the source's ids from vocab.json (its labels too), the target's from
// target_vocab.json (tests/fixtures/hf/marian_separate_vocabs_tiny).
TEST(HfTokenizerMarianSeparate, EachSideHasItsOwnIds) {
  const auto file = [](const std::string& name) { return tfm::testing::fixture_path("hf/marian_separate_vocabs_tiny/" + name); };
  const Vocab source = Vocab::load_mapped(file("source.spm"), file("vocab.json")), target = Vocab::load_mapped(file("target.spm"), file("target_vocab.json"));
  const json cases = json::parse(std::ifstream(file("reference.json")))["cases"];
  ASSERT_EQ(cases.size(), 4u);
  for (const json& c : cases) {
    std::vector<int> source_ids = source.encode(c["source_text"]), target_ids = target.encode(c["target_text"]);
    source_ids.push_back(source.specials().eos);
    target_ids.push_back(target.specials().eos);
    EXPECT_EQ(source_ids, ints(c["input_ids"])) << c["source_text"];
    EXPECT_EQ(target_ids, ints(c["labels"])) << c["target_text"];
    for (const char* kind : {"greedy", "beam4"}) {
      std::vector<int> ids = ints(c[std::string(kind) + "_ids"]);
      ids.erase(ids.begin());
      EXPECT_EQ(target.decode(ids), c[std::string(kind) + "_text"].get<std::string>()) << kind;
    }
  }
  EXPECT_NE(source.piece(50), target.piece(50));
}

// Python's re.compile(">>.+<<"): match() for the label, sub("", text) for the rest.
TEST(HfTokenizerMarianLabelSplit, IsPythonsRegex) {
  const std::tuple<std::string, std::string, std::string> cases[] = {
      {">>fr<<x", ">>fr<<", "x"},        {"a >>fr<< b >>es<< c", "", "a  c"}, {">>a<<\n>>b<< x", ">>a<<", "\n x"},
      {">><< x", "", ">><< x"},          {">>><< x", ">>><<", " x"},         {">>fr<< dogs <<", ">>fr<< dogs <<", ""},
      {">>>fr<<<", ">>>fr<<<", ""},      {"x>>fr<<", "", "x"},                {">>fr<<\n<<", ">>fr<<", "\n<<"},
      {">>\u00E9<< \u00FC", ">>\u00E9<<", " \u00FC"}, {"", "", ""},          {">>", "", ">>"}};
  for (const auto& [text, label, rest] : cases) {
    const LabelSplit split = split_language_label(text);
    EXPECT_EQ(split.label, label) << text;
    EXPECT_EQ(split.rest, rest) << text;
  }
}

}  // namespace
}  // namespace tfm::data
