#pragma once
// What Hugging Face's slow tokenizers (transformers' PreTrainedTokenizer, 4.x) do around
// their model, shared by ByteLevelBpe (GPT-2) and WordPiece (BERT): a vocabulary of token
// strings; the added tokens (tokenizer_config.json's added_tokens_decoder and the special
// tokens it names), which are found in the text before the model sees it; and decoding
// (the model joins its tokens, added tokens that are not special stay apart, and spaces
// before punctuation are "cleaned up"). A subclass is the model: it tokenizes text that
// holds no added token (HF's _tokenize) and joins tokens back into text
// (convert_tokens_to_string).
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tfm::data {

// tokenizer_config.json: a Hugging Face tokenizer's settings (keys tfm does not know are
// ignored, as by HF). A missing file reads as an empty configuration.
class TokenizerConfig {
 public:
  static TokenizerConfig read(const std::string& path);
  // Settings from elsewhere (tokenizer.json's, with tokenizer_config.json's); `origin`
  // names them in messages.
  static TokenizerConfig from_json(nlohmann::json settings, const std::string& origin);
  // A boolean setting; missing or null: `fallback`.
  bool flag(const char* key, bool fallback) const;
  // A boolean setting that may be unset (missing or null), such as strip_accents.
  std::optional<bool> optional_flag(const char* key) const;
  const nlohmann::json& json() const { return *json_; }
  const std::string& path() const { return path_; }

 private:
  std::shared_ptr<const nlohmann::json> json_;
  std::string path_;
};

// The special tokens a configuration may name ("bos_token", ...).
enum class SpecialToken { kBos, kEos, kUnk, kSep, kPad, kCls, kMask };

class HfTokenizer {
 public:
  virtual ~HfTokenizer() = default;

  // The tokens of `text` (valid UTF-8), with those the tokenizer puts around every text
  // (BERT's [CLS] and [SEP]) unless `add_special` is false, as HF's
  // convert_ids_to_tokens(tokenizer(text, add_special_tokens=add_special).input_ids).
  std::vector<std::string> tokens(const std::string& text, bool add_special = true) const;
  // Their ids, as HF's tokenizer(text, add_special_tokens=add_special).input_ids.
  std::vector<int> encode(const std::string& text, bool add_special = true) const;
  // As HF's decode(ids, skip_special_tokens=skip_special).
  virtual std::string decode(const std::vector<int>& ids, bool skip_special = false) const;

  const std::string& piece(int id) const;
  int size() const { return static_cast<int>(pieces_.size()); }
  // A token's id: an added token's, else the vocabulary's, else the unknown token's.
  int id(const std::string& token) const;
  std::optional<int> special_id(SpecialToken which) const { return special_ids_[static_cast<size_t>(which)]; }
  // Whether the configuration names the token as special ("bos_token", ...,
  // "additional_special_tokens"), as HF's all_special_ids: what skip_special drops.
  bool is_special(int id) const;
  // The settings it was read with (tokenizer_config.json's: the chat template among them).
  const TokenizerConfig& config() const { return config_; }

 protected:
  // `pieces`: the model's vocabulary, token strings by id (a token that occurs twice has
  // the later id, as in HF's dictionaries); `defaults`: the special tokens of the
  // tokenizer class, for those the configuration does not name.
  HfTokenizer(std::vector<std::string> pieces, const TokenizerConfig& config,
              const std::vector<std::pair<SpecialToken, std::string>>& defaults);

  // HF's _tokenize: the tokens of valid UTF-8 text that holds no added token; `at_start`:
  // whether the text begins the whole text (no added token before it).
  virtual std::vector<std::string> tokenize_plain(std::string_view text, bool at_start) const = 0;
  // HF's convert_tokens_to_string.
  virtual std::string join_tokens(const std::vector<std::string>& tokens) const = 0;
  // HF's prepare_for_tokenization, before added tokens are looked for.
  virtual std::string prepare(std::string_view text) const { return std::string(text); }
  // HF's build_inputs_with_special_tokens, on token strings.
  virtual std::vector<std::string> add_special_tokens(std::vector<std::string> tokens) const { return tokens; }
  // Tokens around every text in place of add_special_tokens's (a tokenizer.json's
  // post-processor).
  void set_frame(std::vector<std::string> before, std::vector<std::string> after);

  // Whether `token` is in the model's vocabulary (added tokens aside).
  bool in_vocabulary(const std::string& token) const { return vocabulary_ids_.count(token) != 0; }
  // HF's lower-casing for tokenizers with do_lower_case: everything but the special
  // tokens (and the added tokens marked "normalized" but not "special").
  std::string lower_outside_added_tokens(std::string_view text) const;
  const std::string& special_token(SpecialToken which) const;

 private:
  // A token matched in the text as a whole (tokenizer_config.json's added_tokens_decoder).
  struct AddedToken {
    std::string content;
    int id = 0;
    bool lstrip = false, rstrip = false;  // whether it takes the whitespace on its left, its right
    bool single_word = false;             // whether it is a token only with a space (or nothing) either side
    // The file's flags, which only lower-casing consults (is_special is what the configuration names).
    bool normalized = false, special = false;
  };
  // A stretch of text: an added token, or text between them (token == nullptr).
  struct Segment {
    std::string text;
    const AddedToken* token = nullptr;
  };
  template <class Accept>
  std::vector<Segment> find_added_tokens(std::string_view text, Accept accept) const;
  std::vector<Segment> split_on_added_tokens(std::string_view text) const;
  void add_token(const AddedToken& token, const std::string& origin);
  void read_added_tokens(const TokenizerConfig& config);
  void read_special_tokens(const TokenizerConfig& config, const std::vector<std::pair<SpecialToken, std::string>>& defaults);
  const AddedToken* added_token(int id) const;

  TokenizerConfig config_;
  std::vector<std::string> pieces_;                       // by id, added tokens included
  std::unordered_map<std::string, int> vocabulary_ids_;   // the model's vocabulary
  std::vector<AddedToken> added_;                         // longest first
  std::vector<std::optional<int>> special_ids_;           // by SpecialToken
  std::vector<std::string> special_tokens_;               // by SpecialToken ("" where none)
  std::vector<bool> special_;                             // by id
  std::vector<bool> apart_;                               // by id: whether decoding keeps it apart from the model's tokens
  size_t vocabulary_size_ = 0;                            // the model's, added tokens aside
  bool clean_up_spaces_ = true;
  std::optional<std::pair<std::vector<std::string>, std::vector<std::string>>> frame_;  // before, after
};

// Python's str.replace: every occurrence of `from` (not empty) replaced by `to`.
std::string replace_all(const std::string& text, std::string_view from, std::string_view to);

// HF's clean_up_tokenization: " ." -> ".", " ?", " !", " ,", " ' " -> "'", " n't", " 'm",
// " 's", " 've", " 're" without their space.
std::string clean_up_tokenization(std::string text);

// A vocab.json (token -> id, the ids 0..N-1 each once): the tokens by id.
std::vector<std::string> read_vocab_json(const std::string& path);
// The same from a JSON object (tokenizer.json's model.vocab); `origin` names it in messages.
std::vector<std::string> vocabulary_from_json(const nlohmann::json& vocab, const std::string& origin);

}  // namespace tfm::data
