// tokenizer.json (Hugging Face's `tokenizers` library's one file) read by WordPiece and
// ByteLevelBpe: the ids, tokens and texts transformers gave on the fixtures of
// tests/fixtures/hf (tests/reference/make_hf_tokenizer_json.py); the same ids where the
// older files are there too; and every component tfm does not run refused by its JSON path.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/byte_bpe.h"
#include "data/wordpiece.h"
#include "support/fixture.h"
#include "support/process.h"

namespace tfm::data {
namespace {

using nlohmann::json;
using tfm::testing::error_of;
using tfm::testing::TempDir;
using tfm::testing::write_file;

std::string ours(const std::string& fixture) { return tfm::testing::fixture_path("hf/" + fixture); }
json read_json(const std::string& path) { return json::parse(std::ifstream(path)); }

// A fixture's tokenizer, WordPiece or byte-level BPE as its name says.
std::unique_ptr<HfTokenizer> load(const std::string& dir, bool wordpiece) {
  if (wordpiece) return std::make_unique<WordPiece>(WordPiece::load(dir));
  return std::make_unique<ByteLevelBpe>(ByteLevelBpe::load(dir));
}

// Every case of a reference.json: ids, tokens and decoded text as transformers gave them.
void expect_cases(const HfTokenizer& tokenizer, const json& cases) {
  for (const json& c : cases) {
    const std::string text = c["text"].get<std::string>();
    EXPECT_EQ(tokenizer.tokens(text), c["tokens"].get<std::vector<std::string>>()) << text;
    EXPECT_EQ(tokenizer.encode(text), c["ids"].get<std::vector<int>>()) << text;
    EXPECT_EQ(tokenizer.decode(c["ids"].get<std::vector<int>>()), c["decoded"].get<std::string>()) << text;
  }
}

class TokenizerJsonFixture : public ::testing::TestWithParam<std::pair<const char*, bool>> {};

TEST_P(TokenizerJsonFixture, GivesTransformersIdsTokensAndTexts) {
  const auto [fixture, wordpiece] = GetParam();
  const json reference = read_json(ours(fixture) + "/reference.json");
  const std::unique_ptr<HfTokenizer> tokenizer = load(ours(fixture), wordpiece);
  EXPECT_EQ(tokenizer->size(), reference["size"].get<int>());
  expect_cases(*tokenizer, reference["cases"]);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokenizerJsonFixture,
                         ::testing::Values(std::pair{"bert_json_uncased", true}, std::pair{"bert_json_cased", true},
                                           std::pair{"bert_json_trained", true}, std::pair{"gpt2_json", false},
                                           std::pair{"roberta_json_added", false}),
                         [](const auto& info) { return std::string(info.param.first); });

// A directory of the older files and tokenizer.json (as save_pretrained writes both) reads
// tokenizer.json, and either gives transformers' ids.
TEST(TokenizerJson, BesideTheOlderFilesGivesTheSameIds) {
  const std::pair<const char*, const char*> pairs[] = {{"bert_tiny_uncased", "bert_json_uncased"}, {"gpt2_tiny", "gpt2_json"}};
  for (const auto& [shared, fixture] : pairs) {
    const bool wordpiece = std::string(shared).starts_with("bert");
    TempDir dir;
    for (const char* file : {"vocab.txt", "vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"})
      if (std::filesystem::exists(tfm::testing::hf_fixture_path(std::string(shared) + "/" + file)))
        std::filesystem::copy_file(tfm::testing::hf_fixture_path(std::string(shared) + "/" + file), dir.path(file));
    const json cases = read_json(ours(fixture) + "/reference.json")["cases"];
    expect_cases(*load(dir.path(""), wordpiece), cases);  // the older files alone
    std::filesystem::copy_file(ours(fixture) + "/tokenizer.json", dir.path("tokenizer.json"));
    expect_cases(*load(dir.path(""), wordpiece), cases);
    write_file(dir.path("tokenizer.json"), "{}");  // read, not the older files
    EXPECT_NE(error_of([&] { load(dir.path(""), wordpiece); }).find("tokenizer.json: model is missing"), std::string::npos) << shared;
  }
}

// A copy of a fixture's tokenizer.json (with its tokenizer_config.json) in `dir`, changed by `edit`.
template <class Edit>
void edited_copy(const std::string& fixture, const TempDir& dir, Edit edit) {
  json file = read_json(ours(fixture) + "/tokenizer.json");
  edit(file);
  write_file(dir.path("tokenizer.json"), file.dump());
  if (std::filesystem::exists(ours(fixture) + "/tokenizer_config.json"))
    std::filesystem::copy_file(ours(fixture) + "/tokenizer_config.json", dir.path("tokenizer_config.json"),
                               std::filesystem::copy_options::overwrite_existing);
}

// Merges as "a b" strings (tokenizers up to 0.19) and as ["a", "b"] pairs (from 0.20) are one list.
TEST(TokenizerJson, MergesAsStringsOrPairsAgree) {
  TempDir dir;
  edited_copy("gpt2_json", dir, [](json& file) {
    for (json& merge : file["model"]["merges"]) {
      const std::string m = merge.get<std::string>();
      merge = json::array({m.substr(0, m.find(' ')), m.substr(m.find(' ') + 1)});
    }
  });
  expect_cases(ByteLevelBpe::load(dir.path("")), read_json(ours("gpt2_json") + "/reference.json")["cases"]);
}

// tokenizer_config.json's settings win over those of tokenizer.json's normalizer, as in
// transformers' BertTokenizerFast; without it, the normalizer's hold.
TEST(TokenizerJson, TokenizerConfigSettingsWinAsInTransformers) {
  TempDir dir;
  edited_copy("bert_json_uncased", dir, [](json& file) { file["normalizer"]["lowercase"] = false; });
  EXPECT_EQ(WordPiece::load(dir.path("")).tokens("Dog"), (std::vector<std::string>{"[CLS]", "dog", "[SEP]"}));
  std::filesystem::remove(dir.path("tokenizer_config.json"));
  EXPECT_EQ(WordPiece::load(dir.path("")).tokens("Dog"), (std::vector<std::string>{"[CLS]", "[UNK]", "[SEP]"}));
}

// ByteLevel's use_regex false: the text is one word, not cut by GPT-2's pattern.
TEST(TokenizerJson, ByteLevelWithoutTheRegexKeepsTextWhole) {
  TempDir dir;
  edited_copy("gpt2_json", dir, [](json& file) { file["pre_tokenizer"]["use_regex"] = false; });
  const ByteLevelBpe whole = ByteLevelBpe::load(dir.path(""));
  const ByteLevelBpe cut = ByteLevelBpe::load(ours("gpt2_json"));
  EXPECT_EQ(whole.tokens("the"), cut.tokens("the"));
  EXPECT_NE(whole.tokens("a the"), cut.tokens("a the"));
}

// Each component or setting tfm does not run is one line naming the file, the component's
// JSON path and its type or value.
struct Refusal {
  const char* fixture;
  const char* pointer;  // a JSON pointer into tokenizer.json
  const char* value;    // what it becomes (JSON)
  const char* message;  // after "<dir>/tokenizer.json: "
};

constexpr const char* kUnsupported = " is not supported (tfm reads WordPiece and byte-level BPE tokenizers)";

class TokenizerJsonRefusal : public ::testing::TestWithParam<Refusal> {};

TEST_P(TokenizerJsonRefusal, NamesTheComponent) {
  const Refusal& r = GetParam();
  TempDir dir;
  edited_copy(r.fixture, dir, [&](json& file) { file[json::json_pointer(r.pointer)] = json::parse(r.value); });
  const bool wordpiece = std::string(r.fixture).starts_with("bert");
  EXPECT_EQ(error_of([&] { load(dir.path(""), wordpiece); }), dir.path("tokenizer.json") + ": " + r.message + kUnsupported);
}

INSTANTIATE_TEST_SUITE_P(
    Components, TokenizerJsonRefusal,
    ::testing::Values(Refusal{"bert_json_uncased", "/pre_tokenizer", R"({"type": "Metaspace", "replacement": "_"})", R"(pre_tokenizer.type "Metaspace")"},
                      Refusal{"bert_json_uncased", "/pre_tokenizer", "null", "pre_tokenizer null"},
                      Refusal{"bert_json_uncased", "/pre_tokenizer", R"({"type": "Sequence", "pretokenizers": [{"type": "BertPreTokenizer"}, {"type": "Digits", "individual_digits": true}]})",
                              R"(pre_tokenizer.pretokenizers[1].type "Digits")"},
                      Refusal{"bert_json_uncased", "/normalizer", R"({"type": "NFKC"})", R"(normalizer.type "NFKC")"},
                      Refusal{"bert_json_uncased", "/normalizer", R"({"type": "Sequence", "normalizers": [{"type": "Lowercase"}, {"type": "Replace", "pattern": {"String": "a"}, "content": "b"}]})",
                              R"(normalizer.normalizers[1].type "Replace")"},
                      Refusal{"bert_json_uncased", "/normalizer", R"({"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"}]})",
                              R"(normalizer "NFD without StripAccents")"},
                      Refusal{"bert_json_uncased", "/normalizer/clean_txt", "true", "normalizer.clean_txt true"},
                      Refusal{"bert_json_uncased", "/model/type", R"("Unigram")", R"(model.type "Unigram")"},
                      Refusal{"bert_json_uncased", "/model/max_input_chars_per_word", "-1", "model.max_input_chars_per_word -1"},
                      Refusal{"bert_json_uncased", "/post_processor", R"({"type": "Custom"})", R"(post_processor.type "Custom")"},
                      Refusal{"bert_json_uncased", "/post_processor/single/1", R"({"Sequence": {"id": "B", "type_id": 0}})",
                              R"(post_processor.single[1] {"Sequence":{"id":"B","type_id":0}})"},
                      Refusal{"bert_json_uncased", "/decoder", R"({"type": "Metaspace"})", R"(decoder.type "Metaspace")"},
                      Refusal{"bert_json_uncased", "/decoder", "null", "decoder null"},
                      Refusal{"bert_json_uncased", "/decoder/prefix", R"("@@")", R"(decoder.prefix "@@")"},
                      Refusal{"bert_json_uncased", "/decoder/type", R"("ByteLevel")", R"(decoder.type "ByteLevel")"},
                      Refusal{"bert_json_uncased", "/added_tokens/0/special_flag", "true", "added_tokens[0].special_flag true"},
                      Refusal{"bert_json_uncased", "/version", R"("2.0")", R"(version "2.0")"},
                      Refusal{"gpt2_json", "/pre_tokenizer", R"({"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated", "invert": false})",
                              R"(pre_tokenizer.type "Split")"},
                      Refusal{"gpt2_json", "/pre_tokenizer", R"({"type": "BertPreTokenizer"})", R"(pre_tokenizer.type "BertPreTokenizer")"},
                      Refusal{"gpt2_json", "/normalizer", R"({"type": "BertNormalizer"})", R"(normalizer.type "BertNormalizer")"},
                      Refusal{"gpt2_json", "/normalizer", R"({"type": "NFC"})", R"(normalizer.type "NFC")"},
                      Refusal{"gpt2_json", "/model/byte_fallback", "true", "model.byte_fallback true"},
                      Refusal{"gpt2_json", "/model/dropout", "0.1", "model.dropout 0.1"},
                      Refusal{"gpt2_json", "/model/ignore_merges", "true", "model.ignore_merges true"},
                      Refusal{"gpt2_json", "/model/end_of_word_suffix", R"("</w>")", R"(model.end_of_word_suffix "</w>")"},
                      Refusal{"gpt2_json", "/decoder", R"({"type": "BPEDecoder", "suffix": "</w>"})", R"(decoder.type "BPEDecoder")"},
                      Refusal{"roberta_json_added", "/post_processor/type", R"("BertProcessing")", "post_processor.add_prefix_space false"}));

// A file of the other family than the model's tokenizer, and broken ids, are one line.
TEST(TokenizerJson, WrongFamilyAndBrokenIdsAreOneLine) {
  TempDir dir;
  edited_copy("gpt2_json", dir, [](json&) {});
  EXPECT_EQ(error_of([&] { WordPiece::load(dir.path("")); }),
            dir.path("tokenizer.json") + ": model.type \"BPE\" is not BERT's tokenizer (WordPiece)");
  edited_copy("bert_json_uncased", dir, [](json& file) { file["post_processor"]["special_tokens"]["[CLS]"]["ids"] = {7}; });
  EXPECT_EQ(error_of([&] { WordPiece::load(dir.path("")); }),
            dir.path("tokenizer.json") + ": the post-processor gives [CLS] the id 7, which is not that token's");
  edited_copy("bert_json_uncased", dir, [](json& file) { file["model"]["vocab"]["the"] = 0; });
  EXPECT_EQ(error_of([&] { WordPiece::load(dir.path("")); }),
            dir.path("tokenizer.json") + ": model.vocab: \"[PAD]\" and \"the\" both have id 0");
}

}  // namespace
}  // namespace tfm::data
