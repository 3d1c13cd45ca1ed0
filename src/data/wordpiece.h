#pragma once
// BERT's tokenizer (Hugging Face's BertTokenizer): its BasicTokenizer cleans the text,
// puts spaces around CJK ideographs, lower-cases and strips accents (when configured)
// and splits words at whitespace and punctuation; WordPiece then cuts each word into the
// longest pieces of vocab.txt, from the left, continuations written "##piece". Every
// text is framed as [CLS] ... [SEP].
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/hf_tokenizer.h"
#include "data/tokenizer_json.h"

namespace tfm::data {

class WordPiece : public HfTokenizer {
 public:
  // A Hugging Face tokenizer directory: tokenizer.json where it has one (as transformers'
  // BertTokenizerFast), else vocab.txt (one token a line, ids by line); and, where
  // present, tokenizer_config.json (do_lower_case, strip_accents, tokenize_chinese_chars,
  // do_split_on_punc, added and special tokens).
  static WordPiece load(const std::string& dir);

 protected:
  std::vector<std::string> tokenize_plain(std::string_view text, bool at_start) const override;
  std::string join_tokens(const std::vector<std::string>& tokens) const override;
  std::string prepare(std::string_view text) const override;
  std::vector<std::string> add_special_tokens(std::vector<std::string> tokens) const override;

 private:
  WordPiece(std::vector<std::string> pieces, const TokenizerConfig& config, const TokenizerSettings& settings);
  std::vector<std::u32string> basic_tokens(std::u32string_view text) const;
  std::optional<std::vector<std::string>> word_pieces(std::u32string_view word) const;

  bool lower_case_ = true, chinese_chars_ = true, split_on_punctuation_ = true, clean_text_ = true;
  std::string prefix_;  // how a piece inside a word is written ("##")
  size_t max_word_characters_ = 0;
  std::optional<bool> strip_accents_;  // unset: as lower_case_
};

}  // namespace tfm::data
