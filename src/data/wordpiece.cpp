#include "data/wordpiece.h"

#include <filesystem>
#include <string_view>
#include <unordered_map>
#include <nlohmann/json.hpp>

#include "data/text.h"
#include "data/unicode.h"
#include "tensor/error.h"

namespace tfm::data {

namespace {

using unicode::Category;
using unicode::category;

// The character classes of HF's tokenization_bert.py (_is_whitespace, _is_control,
// _is_punctuation, _is_chinese_char), which differ from Python's own.
bool is_whitespace(char32_t c) { return c == U' ' || c == U'\t' || c == U'\n' || c == U'\r' || category(c) == Category::kSpaceSeparator; }

bool is_control(char32_t c) { return c != U'\t' && c != U'\n' && c != U'\r' && category(c) == Category::kOther; }

// Unicode punctuation, and every ASCII character that is neither a letter, a digit nor a space ("$", "^", "`", ...).
bool is_punctuation(char32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126) ||
         category(c) == Category::kPunctuation;
}

// The CJK Unified Ideographs blocks and their extensions A to E, and the compatibility ideographs.
bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// _clean_text: NUL, U+FFFD and control characters dropped, whitespace made spaces.
std::u32string clean(std::u32string_view text) {
  std::u32string out;
  for (char32_t c : text) {
    if (c == 0 || c == 0xFFFD || is_control(c)) continue;
    out += is_whitespace(c) ? U' ' : c;
  }
  return out;
}

// _tokenize_chinese_chars: each ideograph a word of its own.
std::u32string space_chinese_chars(std::u32string_view text) {
  std::u32string out;
  for (char32_t c : text) {
    if (is_chinese_char(c))
      out.append({U' ', c, U' '});
    else
      out += c;
  }
  return out;
}

// whitespace_tokenize: Python's str.split().
std::vector<std::u32string> split_on_space(std::u32string_view text) {
  std::vector<std::u32string> words;
  std::u32string word;
  for (char32_t c : text) {
    if (!unicode::is_python_space(c)) {
      word += c;
      continue;
    }
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

// _run_strip_accents: NFD, then no non-spacing marks.
std::u32string strip_accents(std::u32string_view word) {
  std::u32string out = unicode::nfd(word);
  std::erase_if(out, [](char32_t c) { return category(c) == Category::kNonspacingMark; });
  return out;
}

// _run_split_on_punc: each punctuation character a word of its own.
std::vector<std::u32string> split_on_punctuation(std::u32string_view word) {
  std::vector<std::u32string> out;
  bool new_word = true;
  for (char32_t c : word) {
    if (is_punctuation(c)) {
      out.push_back(std::u32string(1, c));
      new_word = true;
      continue;
    }
    if (new_word) out.emplace_back();
    new_word = false;
    out.back() += c;
  }
  return out;
}

// A post-processor's frame of a text as TemplateProcessing writes it: "[CLS] $A [SEP]".
std::string frame(const std::vector<std::string>& before, const std::vector<std::string>& after) {
  std::string out;
  for (const std::string& token : before) out += token + " ";
  out += "$A";
  for (const std::string& token : after) out += " " + token;
  return out;
}

// The settings this implementation does not follow, refused rather than ignored.
void check_supported(const TokenizerConfig& config) {
  TFM_CHECK(config.flag("do_basic_tokenize", true), config.path() << ": do_basic_tokenize false is not supported");
  const nlohmann::json& never_split = config.json().value("never_split", nlohmann::json());
  TFM_CHECK(never_split.is_null() || never_split.empty(), config.path() << ": never_split is not supported (make those tokens added tokens)");
}

}  // namespace

WordPiece WordPiece::load(const std::string& dir) {
  if (std::optional<TokenizerJson> file = TokenizerJson::read(dir)) {
    TFM_CHECK(file->model == TokenizerJson::Model::kWordPiece, file->path << ": model.type \"BPE\" is not BERT's tokenizer (WordPiece)");
    return WordPiece(std::move(file->pieces), file->config, file->settings);
  }
  const std::string vocab = (std::filesystem::path(dir) / "vocab.txt").string();
  std::vector<std::string> pieces = read_lines(vocab);
  std::unordered_map<std::string_view, size_t> first;  // a repeated token would leave an id that no text gives
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto [at, fresh] = first.emplace(pieces[i], i);
    TFM_CHECK(fresh, vocab << ": line " << i + 1 << " repeats the token '" << pieces[i] << "' of line " << at->second + 1);
  }
  return WordPiece(std::move(pieces), TokenizerConfig::read((std::filesystem::path(dir) / "tokenizer_config.json").string()), {});
}

WordPiece::WordPiece(std::vector<std::string> pieces, const TokenizerConfig& config, const TokenizerSettings& settings)
    : HfTokenizer(std::move(pieces), config,
                  {{SpecialToken::kUnk, "[UNK]"}, {SpecialToken::kSep, "[SEP]"}, {SpecialToken::kPad, "[PAD]"},
                   {SpecialToken::kCls, "[CLS]"}, {SpecialToken::kMask, "[MASK]"}}),
      lower_case_(config.flag("do_lower_case", true)),
      chinese_chars_(config.flag("tokenize_chinese_chars", true)),
      split_on_punctuation_(config.flag("do_split_on_punc", true)),
      clean_text_(settings.clean_text),
      prefix_(settings.continuing_prefix),
      max_word_characters_(settings.max_word_characters),
      strip_accents_(config.optional_flag("strip_accents")) {
  check_supported(config);
  for (SpecialToken needed : {SpecialToken::kUnk, SpecialToken::kCls, SpecialToken::kSep})
    TFM_CHECK(special_id(needed), config.path() << ": BERT's tokenizer needs an unk_token, a cls_token and a sep_token");
  // tfm's BERT reads [CLS] text [SEP] (Tokenizer::sentence, the [CLS] pooling): a
  // tokenizer.json whose post-processor frames text otherwise is refused, not followed.
  const std::vector<std::string> before{special_token(SpecialToken::kCls)}, after{special_token(SpecialToken::kSep)};
  TFM_CHECK(!settings.before || (*settings.before == before && *settings.after == after),
            config.path() << ": post_processor frames a text as " << frame(*settings.before, *settings.after) << ", not " << frame(before, after)
                          << " as BERT's tokenizer does (a TemplateProcessing or BertProcessing that does is needed)");
}

// As PreTrainedTokenizer.tokenize for a tokenizer with do_lower_case.
std::string WordPiece::prepare(std::string_view text) const { return lower_case_ ? lower_outside_added_tokens(text) : std::string(text); }

std::vector<std::string> WordPiece::add_special_tokens(std::vector<std::string> tokens) const {
  tokens.insert(tokens.begin(), special_token(SpecialToken::kCls));
  tokens.push_back(special_token(SpecialToken::kSep));
  return tokens;
}

std::vector<std::string> WordPiece::tokenize_plain(std::string_view text, bool /*at_start*/) const {
  std::vector<std::string> tokens;
  for (const std::u32string& word : basic_tokens(code_points(text, "the text to tokenize"))) {
    const std::optional<std::vector<std::string>> pieces = word_pieces(word);
    if (pieces)
      tokens.insert(tokens.end(), pieces->begin(), pieces->end());
    else
      tokens.push_back(special_token(SpecialToken::kUnk));
  }
  return tokens;
}

// HF's BasicTokenizer.tokenize.
std::vector<std::u32string> WordPiece::basic_tokens(std::u32string_view text) const {
  std::u32string cleaned = clean_text_ ? clean(text) : std::u32string(text);
  if (chinese_chars_) cleaned = space_chinese_chars(cleaned);
  std::vector<std::u32string> out;
  for (std::u32string word : split_on_space(unicode::nfc(cleaned))) {
    if (lower_case_) word = unicode::lower(word);
    if (strip_accents_.value_or(lower_case_)) word = strip_accents(word);
    for (std::u32string& part : split_on_punctuation_ ? split_on_punctuation(word) : std::vector{word})
      if (!part.empty()) out.push_back(std::move(part));
  }
  return out;
}

// HF's WordpieceTokenizer: the longest piece of the vocabulary from the left, then the
// longest "##" continuation from there, and so on; nothing for a word with no such cut
// (or too long a word).
std::optional<std::vector<std::string>> WordPiece::word_pieces(std::u32string_view word) const {
  if (word.size() > max_word_characters_) return std::nullopt;
  std::vector<std::string> pieces;
  for (size_t start = 0; start < word.size();) {
    size_t end = word.size();
    std::string piece;
    for (; end > start; --end) {
      piece = (start > 0 ? prefix_ : "") + to_utf8(word.substr(start, end - start));
      if (in_vocabulary(piece)) break;
    }
    if (end == start) return std::nullopt;
    pieces.push_back(std::move(piece));
    start = end;
  }
  return pieces;
}

// HF's BertTokenizer.convert_tokens_to_string: joined with spaces, "##" continuations
// glued to what precedes them.
std::string WordPiece::join_tokens(const std::vector<std::string>& tokens) const {
  std::string text;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool continuation = i > 0 && !prefix_.empty() && tokens[i].starts_with(prefix_);
    text += continuation ? tokens[i].substr(prefix_.size()) : (i ? " " : "") + tokens[i];
  }
  return std::string(strip_space(text));
}

}  // namespace tfm::data
