#pragma once
// GPT-2's tokenizer (Hugging Face's GPT2Tokenizer): byte-level BPE. Text is cut into
// words by GPT-2's pattern, each word's UTF-8 bytes are written as printable characters
// (one per byte, `Ġ` for the space), and BPE joins them by merge rank into tokens of
// vocab.json; decoding maps the characters back to bytes.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/bpe_merges.h"
#include "data/hf_tokenizer.h"
#include "data/tokenizer_json.h"

namespace tfm::data {

class ByteLevelBpe : public HfTokenizer {
 public:
  // A Hugging Face tokenizer directory: tokenizer.json where it has one (as transformers'
  // GPT2TokenizerFast), else vocab.json and merges.txt; and, where present,
  // tokenizer_config.json (added tokens, add_prefix_space, add_bos_token).
  static ByteLevelBpe load(const std::string& dir);

 protected:
  std::vector<std::string> tokenize_plain(std::string_view text, bool at_start) const override;
  std::string join_tokens(const std::vector<std::string>& tokens) const override;
  std::string prepare(std::string_view text) const override;
  std::vector<std::string> add_special_tokens(std::vector<std::string> tokens) const override;

 private:
  ByteLevelBpe(std::vector<std::string> pieces, const TokenizerConfig& config, MergeRanks ranks, const TokenizerSettings& settings);
  MergeRanks ranks_;
  bool add_prefix_space_ = false, add_bos_token_ = false, use_regex_ = true;
  std::shared_ptr<WordCache> cache_;
};

}  // namespace tfm::data
