#pragma once
// tokenizer.json's BPE as Hugging Face's tokenizers library runs it (what transformers'
// fast tokenizers are), for the BPE tokenizers of today's language models, which have no
// other file: Llama 2's and Mistral's SentencePiece-style BPE (spaces written `▁`, a
// character outside the vocabulary as its bytes' <0xXX> tokens) and Llama 3's and Qwen2's
// byte-level BPE (words cut by their patterns). Each piece of text between added tokens
// is normalized (NFC, Prepend, Replace), cut into words (Metaspace, Split, ByteLevel),
// and each word merged by BPE; decoding runs the file's decoder steps over the tokens,
// added tokens included, as the library's decode does.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/bpe_merges.h"
#include "data/hf_tokenizer.h"
#include "data/tokenizer_json.h"

namespace tfm::data {

class BpeTokenizer : public HfTokenizer {
 public:
  // A Hugging Face tokenizer directory: its tokenizer.json, with tokenizer_config.json
  // where present (special tokens, clean_up_tokenization_spaces, and for Llama's classes
  // add_bos_token and add_eos_token).
  static BpeTokenizer load(const std::string& dir);

  // The tokenizers library's decode (the decoder steps over every token, special ones
  // unless skipped), then transformers' clean_up_tokenization where configured.
  std::string decode(const std::vector<int>& ids, bool skip_special = false) const override;

 protected:
  std::vector<std::string> tokenize_plain(std::string_view text, bool at_start) const override;
  std::string join_tokens(const std::vector<std::string>& tokens) const override;

 private:
  explicit BpeTokenizer(TokenizerJson file);
  std::string normalize(std::string text) const;
  std::vector<std::string> words(std::string text, bool at_start) const;
  std::vector<std::string> metaspace_words(std::string text, bool at_start) const;
  std::vector<std::string> word_tokens(const std::string& word) const;
  std::vector<std::string> first_symbols(const std::string& word) const;
  std::vector<std::string> byte_tokens(const std::string& c) const;

  BpePipeline pipeline_;
  MergeRanks ranks_;
  bool clean_up_spaces_ = true;
  std::shared_ptr<WordCache> cache_;
};

}  // namespace tfm::data
