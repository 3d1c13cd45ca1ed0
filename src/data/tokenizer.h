#pragma once
// Tokenizers for the single-stream families (language model, masked LM): either
// characters (every distinct UTF-8 character of the training text, as nanoGPT's
// shakespeare_char) or a SentencePiece model from `tfm vocab`. Both reserve the
// same special ids, and both describe themselves as a JSON record that checkpoints
// keep ("tfm.tokenizer"), so generation and embedding need no other file for
// characters and refuse a different SentencePiece model.
#include <memory>
#include <string>
#include <vector>

#include "data/vocab.h"

namespace tfm::data {

class Tokenizer {
 public:
  static constexpr int kPad = Vocab::kPad, kUnk = Vocab::kUnk, kBos = Vocab::kBos, kEos = Vocab::kEos;  // [CLS] = bos, [SEP] = eos

  // Every distinct character of `text`, in code-point order, after the specials.
  static Tokenizer characters(const std::string& text);
  static Tokenizer sentencepiece(const std::string& model_path);
  // Rebuilds the tokenizer a checkpoint recorded; `spm_path` overrides the recorded
  // SentencePiece path (its checksum must still match).
  static Tokenizer from_record(const std::string& json, const std::string& origin, const std::string& spm_path = "");
  std::string record() const;

  // Characters: every character, newlines included, unknown ones as kUnk.
  // SentencePiece: each line's pieces, lines separated by kEos.
  std::vector<int> encode(const std::string& text) const;
  std::string decode(const std::vector<int>& ids) const;  // specials other than the line break are dropped
  // One token as a label: its character or SentencePiece piece; specials by name ([CLS], [SEP], ...).
  std::string piece(int id) const;
  int size() const;           // ids 0 .. size()-1, [MASK] included
  int mask_id() const;        // [MASK], for the masked-language-model objective
  int line_break_id() const;  // '\n' (characters) or kEos (SentencePiece)
  bool is_special(int id) const;
  bool is_characters() const { return !spm_; }

 private:
  std::vector<std::string> chars_;  // id kFirstChar + i
  std::shared_ptr<Vocab> spm_;
  static constexpr int kMask = 4, kFirstChar = 5;
};

// The whole of a text file (plain or .gz), lines joined with '\n', validated as UTF-8.
std::string read_text(const std::string& path);

}  // namespace tfm::data
