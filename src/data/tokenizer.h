#pragma once
// Tokenizers for the single-stream families (language model, masked LM): either
// characters (every distinct UTF-8 character of the training text, as nanoGPT's
// shakespeare_char) or a SentencePiece model from `tfm vocab`, both with tfm's special
// ids; or a Hugging Face model's own (GPT-2's byte-level BPE, BERT's WordPiece, with
// their ids). Each describes itself as a JSON record that checkpoints keep
// ("tfm.tokenizer"), so generation and embedding need no other file for characters
// and refuse a different SentencePiece model.
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "data/hf_tokenizer.h"
#include "data/tool_calls.h"
#include "data/vocab.h"

namespace tfm::data {

class Tokenizer {
 public:
  static constexpr int kPad = Vocab::kPad, kUnk = Vocab::kUnk, kBos = Vocab::kBos, kEos = Vocab::kEos;  // [CLS] = bos, [SEP] = eos

  // Every distinct character of `text`, in code-point order, after the specials.
  static Tokenizer characters(const std::string& text);
  static Tokenizer sentencepiece(const std::string& model_path);
  // A Hugging Face model directory's tokenizer: `type` "byte_bpe" (GPT-2's vocab.json and
  // merges.txt), "wordpiece" (BERT's vocab.txt), or "bpe" (the tokenizer.json of Llama,
  // Mistral and Qwen2: BpeTokenizer), with tokenizer_config.json.
  static Tokenizer hugging_face(const std::string& type, const std::string& dir);
  // Rebuilds the tokenizer a checkpoint recorded; `spm_path` overrides the recorded
  // SentencePiece path (its checksum must still match).
  static Tokenizer from_record(const std::string& json, const std::string& origin, const std::string& spm_path = "");
  std::string record() const;

  // Characters: every character, newlines included, unknown ones as kUnk.
  // SentencePiece: each line's pieces, lines separated by kEos.
  // Hugging Face: as its tokenizer(text).input_ids ([CLS] and [SEP] around WordPiece's).
  std::vector<int> encode(const std::string& text) const;
  // A sentence as an encoder reads it: [CLS], its tokens (at most max_len in all, with
  // truncated set where some were cut), and [SEP] where the tokenizer ends with one.
  std::vector<int> sentence(const std::string& text, int64_t max_len, bool* truncated = nullptr) const;
  // The token that ends a text, where generation stops (GPT-2's <|endoftext|>); -1: none.
  int end_of_text() const;
  // Every token that ends a generated text: the model's (a Hugging Face directory's
  // generation_config.json eos_token_id, which may list end-of-turn tokens beside the end
  // of text), else end_of_text(); empty: none. Recorded with the tokenizer.
  std::vector<int> ends() const;
  void set_ends(std::vector<int> ends);
  // Whether the tokenizer has a chat template (tokenizer_config.json's chat_template).
  bool has_chat_template() const;
  // A conversation ([{"role": ..., "content": ...}, ...]) as the ids of the text the chat
  // template writes, up to where the assistant's reply begins: transformers'
  // apply_chat_template(messages, tools=tools, add_generation_prompt=True) (the template
  // writes the special tokens: none are added around it; null tools: none given).
  std::vector<int> encode_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools) const;
  // The format in which the chat template teaches the model to call tools.
  ToolCallFormat tool_call_format() const;
  std::string decode(const std::vector<int>& ids) const;  // specials other than the line break are dropped
  // One token as a label: its character or SentencePiece piece; specials by name ([CLS], [SEP], ...).
  std::string piece(int id) const;
  int size() const;           // ids 0 .. size()-1, [MASK] included
  int mask_id() const;        // [MASK], for the masked-language-model objective
  int cls_id() const;         // [CLS], what an encoder's input starts with (tfm's: kBos)
  int unk_id() const;         // the unknown token
  int line_break_id() const;  // '\n' (characters), kEos (SentencePiece) or the start of a text (Hugging Face)
  bool is_special(int id) const;
  bool is_characters() const { return !spm_ && !hf_; }
  const std::string& sentencepiece_path() const;  // a SentencePiece tokenizer's model file
  // "characters", "SentencePiece", or the Hugging Face tokenizer's type.
  std::string describe() const;

 private:
  std::vector<std::string> chars_;  // id kFirstChar + i
  std::shared_ptr<Vocab> spm_;
  std::shared_ptr<const HfTokenizer> hf_;
  std::string hf_type_, hf_dir_;
  std::vector<int> ends_;  // (empty: end_of_text())
  static constexpr int kMask = 4, kFirstChar = 5;
};

// The whole of a text file (plain or .gz), lines joined with '\n', validated as UTF-8.
std::string read_text(const std::string& path);

}  // namespace tfm::data
