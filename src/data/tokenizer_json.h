#pragma once
// tokenizer.json: the one file in which Hugging Face's `tokenizers` library (what
// transformers' "fast" tokenizers run) saves a whole tokenizer: its model (the vocabulary,
// and a BPE's merges), normalizer, pre-tokenizer, post-processor, decoder and added tokens.
// Models trained with `tokenizers`, and repositories saved with legacy_format=False, have
// only this file. transformers prefers it where the older files (vocab.txt; vocab.json and
// merges.txt) are there too, and so does tfm.
//
// tfm reads the families it has models for. WordPiece (BERT) and GPT-2's byte-level BPE
// (GPT-2, RoBERTa) are translated into what the older files say (a vocabulary, merges,
// tokenizer_config.json's settings), so the tokenizers that read those (WordPiece,
// ByteLevelBpe) run it, plus the few settings only tokenizer.json can hold
// (TokenizerSettings). Any other BPE (Llama 2's and Mistral's SentencePiece-style BPE
// with byte fallback, Llama 3's and Qwen2's byte-level BPE cut by their patterns) has no
// older files that transformers' fast tokenizers would follow: its steps (BpePipeline)
// are run as the tokenizers library runs them (BpeTokenizer). Anything else is refused
// with one line that names the component's JSON path and its type, never ignored.
#include <optional>
#include <string>
#include <vector>

#include "data/bpe_merges.h"
#include "data/byte_level.h"
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

// The steps of a BPE that the tokenizers library runs (Model::kBpe), each as its
// component in tokenizer.json says.
struct BpePipeline {
  // Normalizer steps, in order: NFC; Prepend `text` (to text that is not empty); Replace
  // every `text` by `by`.
  struct Edit {
    enum class Kind { kNfc, kPrepend, kReplace } kind;
    std::string text, by;
  };
  // A Metaspace pre-tokenizer: spaces become `replacement`, which is put before the text
  // (always, only before the text's first part, or never; not where it starts with one),
  // and, with `split`, the text is cut before each one.
  struct Metaspace {
    enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
    std::string replacement;
    bool split = true;
  };
  // Decoder steps, in order, each from a list of strings to a list of strings: Replace
  // `text` by `by` in each; ByteFallback (runs of <0xXX> tokens as the text their bytes
  // make); Fuse (all into one); Strip up to `start` leading and `stop` trailing `text`
  // characters of each; Metaspace (`text` as a space, dropped in the first string unless
  // `never`); ByteLevel (byte-level characters back to bytes).
  struct Decode {
    enum class Kind { kReplace, kByteFallback, kFuse, kStrip, kMetaspace, kByteLevel } kind;
    std::string text{}, by{};
    size_t start = 0, stop = 0;
    bool never = false;
  };

  std::vector<Edit> normalizer;
  std::optional<Metaspace> metaspace;
  std::optional<WordPattern> pattern;  // a Split pre-tokenizer's (or ByteLevel's use_regex: GPT-2's)
  bool byte_level = false;             // a ByteLevel pre-tokenizer: words as byte-level characters
  bool byte_fallback = false;          // a character outside the vocabulary as its bytes' <0xXX> tokens
  bool fuse_unk = false;               // consecutive unknown characters as one unknown token
  bool ignore_merges = false;          // a word of the vocabulary is one token, whatever the merges
  std::optional<std::string> unk_token;
  std::vector<Decode> decoder;
};

struct TokenizerJson {
  // kBpe: a BPE that only the tokenizers library runs (BpePipeline).
  enum class Model { kWordPiece, kByteLevelBpe, kBpe };

  std::string path;                 // the file, for messages
  Model model = Model::kWordPiece;
  std::vector<std::string> pieces;  // model.vocab, by id
  MergeRanks merge_ranks;           // BPE
  BpePipeline pipeline;             // kBpe
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
