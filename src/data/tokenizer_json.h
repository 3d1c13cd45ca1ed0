#pragma once
// tokenizer.json: the one file in which Hugging Face's `tokenizers` library (what
// transformers' "fast" tokenizers run) saves a whole tokenizer: its model (the vocabulary,
// and a BPE's merges), normalizer, pre-tokenizer, post-processor, decoder and added tokens.
// Models trained with `tokenizers`, and repositories saved with legacy_format=False, have
// only this file. transformers prefers it where the older files (vocab.txt; vocab.json and
// merges.txt) are there too, and so does tfm.
//
// tfm reads the two families it has models for: WordPiece (BERT) and byte-level BPE
// (GPT-2, RoBERTa). The file is translated into what the older files say (a vocabulary,
// merges, tokenizer_config.json's settings), so the tokenizers that read those
// (WordPiece, ByteLevelBpe) run it, plus the few settings only tokenizer.json can hold
// (TokenizerSettings). Anything else is refused with one line that names the component's
// JSON path and its type, never ignored.
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/hf_tokenizer.h"

namespace tfm::data {

// What a tokenizer.json can say that tokenizer_config.json cannot; the defaults are the
// slow tokenizers' (BertTokenizer's, GPT2Tokenizer's), which the older files describe.
struct TokenizerSettings {
  // The post-processor's tokens before and after every text (WordPiece requires BERT's
  // [CLS] and [SEP]); unset: the tokenizer class's own (a bos_token where add_bos_token
  // says so for GPT-2).
  std::optional<std::vector<std::string>> before, after;
  std::string continuing_prefix = "##";  // WordPiece: how a piece inside a word is written
  size_t max_word_characters = 100;      // WordPiece: longer words are the unknown token
  bool clean_text = true;                // WordPiece: control characters dropped, whitespace made spaces
  bool use_regex = true;                 // byte-level BPE: GPT-2's pattern cuts text into words (else one word)
};

// A BPE's merges: "first second" -> rank (its place in the list), lower merges first.
using MergeRanks = std::unordered_map<std::string, int>;

struct TokenizerJson {
  enum class Model { kWordPiece, kByteLevelBpe };

  std::string path;                 // the file, for messages
  Model model = Model::kWordPiece;
  std::vector<std::string> pieces;  // model.vocab, by id
  MergeRanks merge_ranks;           // byte-level BPE
  // The directory's tokenizer_config.json with tokenizer.json's added tokens and the
  // settings tokenizer.json implies (do_lower_case, strip_accents, add_prefix_space, ...),
  // combined as transformers' fast classes combine them: BertTokenizerFast and
  // GPT2TokenizerFast replace a BertNormalizer's and a ByteLevel pre-tokenizer's settings
  // by tokenizer_config.json's (or their own defaults), PreTrainedTokenizerFast keeps
  // them, and a Sequence's hold whatever the class.
  TokenizerConfig config;
  TokenizerSettings settings;

  // `dir`/tokenizer.json, or nothing where the directory has none.
  static std::optional<TokenizerJson> read(const std::string& dir);
};

// The tokenizer file of a Hugging Face directory that a message should name: tokenizer.json
// where the directory has one (what tfm reads), else `older` (vocab.txt, vocab.json).
std::string tokenizer_file(const std::string& dir, const std::string& older);

}  // namespace tfm::data
