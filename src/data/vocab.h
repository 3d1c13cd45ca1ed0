#pragma once
// Subword vocabularies: SentencePiece models (BPE or unigram) trained on the
// training text, with fixed ids for the special tokens; or a Hugging Face Marian
// model's, whose SentencePiece pieces take their ids from a shared vocab.json.
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace tfm::data {

struct VocabOptions {
  int64_t size = 8000;
  std::string model_type = "bpe";  // "bpe" or "unigram"
  double character_coverage = 1.0;
  int64_t max_sentences = 2000000;  // sampled for training when the corpus is larger
  std::string origin = "the training text";  // what errors call the text (the CLI: its file names)
  std::ostream* progress = nullptr;           // where to say what is being trained and how long it took
};

// The ids of a vocabulary's special tokens; tfm's own vocabularies have these.
struct SpecialIds {
  int pad = 0, unk = 1, bos = 2, eos = 3;
};

class Vocab {
 public:
  static constexpr int kPad = 0, kUnk = 1, kBos = 2, kEos = 3;

  // Loads and validates a SentencePiece model file.
  static Vocab load(const std::string& path);
  // A Hugging Face Marian tokenizer's side (source.spm or target.spm): the model's pieces
  // mapped through a vocab.json (a piece it lacks is <unk>): the one both sides share, or
  // the side's own (target_vocab.json, with separate_vocabs). encode appends no </s> (the
  // caller does) and, as MarianTokenizer, takes a language label that starts the text
  // (">>fr<<", ">>cmn_Hans<<", ">>fra<<": multi-target models) as one token of vocab.json,
  // refusing by name one that is not there; decode drops </s>, <unk> and <pad> and tidies
  // the text as MarianTokenizer.decode(ids, skip_special_tokens=True). Specials: eos and
  // bos </s> (Marian's decoder starts from pad, which the caller handles), unk <unk>, pad <pad>.
  static Vocab load_mapped(const std::string& spm_path, const std::string& vocab_json_path);
  // A fairseq multilingual model's, through transformers' tokenizers: the pieces and their
  // ids, a token for each language, and encode and decode as the tokenizer does without
  // the language and the end (the caller adds them: language_id). M2M100Tokenizer's: the
  // pieces mapped through vocab.json (a piece it lacks is <unk>), then "__en__" and the
  // others of `language_codes` ("m2m100" or "wmt21"), then 8 made-up words.
  static Vocab load_m2m100(const std::string& spm_path, const std::string& vocab_json_path, const std::string& language_codes);
  // NllbTokenizer's: <s> <pad> </s> <unk>, the model's pieces one id up, then the
  // languages ("eng_Latn") and <mask> at the ids `added` gives them (tokenizer_config.json's
  // added_tokens_decoder: content by id), else in NLLB's order after the pieces.
  static Vocab load_nllb(const std::string& spm_path, const std::vector<std::pair<int, std::string>>& added);
  // MBart50Tokenizer's: NLLB's layout with mBART-50's languages ("en_XX").
  static Vocab load_mbart50(const std::string& spm_path, const std::vector<std::pair<int, std::string>>& added);
  // One of them, as a Hugging Face directory's files say: `kind` "m2m100" (vocab.json, and
  // tokenizer_config.json's language_codes), "nllb" or "mbart50" (its added_tokens_decoder).
  static Vocab load_fairseq(const std::string& kind, const std::string& spm_path, const std::string& vocab_json_path,
                            const std::string& tokenizer_config_path);
  // Trains on `sentences` (blank ones are skipped, long ones cut into pieces SentencePiece
  // keeps) and writes the model to `path` (atomically).
  static void train(const std::vector<std::string>& sentences, const VocabOptions& options, const std::string& path);

  std::vector<int> encode(const std::string& text) const;
  std::string decode(const std::vector<int>& ids) const;  // specials are dropped
  std::string piece(int id) const;
  int size() const;
  const SpecialIds& specials() const { return specials_; }
  // A multilingual model's token for a language ("en", "eng_Latn"); another is refused,
  // naming some of the model's. multilingual(): whether the vocabulary has languages.
  int language_id(const std::string& code) const;
  bool multilingual() const { return mapping_ && !mapping_->languages.empty(); }
  // The token that starts a text of `code`: a many-to-many vocabulary's (which needs a
  // code), nothing for another (which refuses one); `option` names where the code is given.
  std::optional<int> language_token(const std::string& code, const std::string& option) const;
  // CRC-32 of the serialized model (continued over vocab.json's tokens in id order, for a
  // mapped one): what checkpoints record to refuse another vocabulary.
  uint32_t checksum() const { return checksum_; }
  const std::string& path() const { return path_; }  // the SentencePiece model's
  const std::string& mapping_path() const { return mapping_path_; }  // vocab.json, for a mapped one; else empty
  // load_fairseq's kind and tokenizer_config.json, for a fairseq one; else empty.
  const std::string& fairseq_kind() const { return fairseq_kind_; }
  const std::string& tokenizer_config_path() const { return tokenizer_config_path_; }

 private:
  // A mapped vocabulary's ids (vocab.json's) and pieces.
  struct Mapping {
    std::vector<std::string> pieces;  // by id
    std::unordered_map<std::string, int> ids;
    std::vector<std::string> labels;  // the language labels (">>...<<"), by id
    std::vector<std::string> languages;  // a fairseq model's codes, in its order
    std::unordered_map<std::string, int> language_ids;  // by code
    std::vector<bool> language;  // by id: whether it is a language's token
    bool fairseq = false;  // M2M100Tokenizer, NllbTokenizer or MBart50Tokenizer: no labels in the text
  };
  static Vocab with_languages(Vocab v, std::shared_ptr<Mapping> mapping, const std::vector<std::string>& codes,
                              std::string (*token_of)(const std::string& code), const std::string& origin);
  static Vocab load_model(const std::string& path);
  // load_nllb and load_mbart50: the pieces one id up behind fairseq's specials, then `codes`.
  static Vocab load_shifted(const std::string& spm_path, const std::vector<std::pair<int, std::string>>& added,
                            const std::vector<std::string>& codes);
  std::vector<int> encode_mapped(const std::string& text) const;
  int label_id(const std::string& label) const;
  std::string decode_mapped(const std::vector<int>& ids) const;
  bool is_language(int id) const;

  std::shared_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::shared_ptr<const Mapping> mapping_;  // null: the model's own ids
  SpecialIds specials_;
  uint32_t checksum_ = 0;
  std::string path_, mapping_path_, fairseq_kind_, tokenizer_config_path_;
};

// MarianTokenizer's split of a text (its language_code_re, ">>.+<<", matched greedily and
// never across a newline): the label that starts it ("" where none), and the text with
// every match removed, which SentencePiece then reads.
struct LabelSplit {
  std::string label, rest;
};
LabelSplit split_language_label(std::string_view text);

// The vocabulary that `checkpoint` recorded at `recorded` with checksum `crc32`: the file
// of that name beside the checkpoint (a run folder moved or copied), beside the file a
// symlinked checkpoint points at, or at the recorded path itself, the first of them that
// holds the same vocabulary (a file of that name with another vocabulary is passed
// over). Fails with one line naming the places tried and `how_to_give`, the way to
// give the file explicitly.
Vocab load_recorded_vocab(const std::string& recorded, uint32_t crc32, const std::string& checkpoint, const std::string& how_to_give);

}  // namespace tfm::data
