#include "data/bpe_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "data/byte_level.h"
#include "data/unicode.h"
#include "tensor/error.h"

namespace tfm::data {

namespace {

using Parts = std::vector<std::string>;
using Prepend = BpePipeline::Metaspace::Prepend;

// The byte a byte-fallback token <0xXX> stands for.
std::optional<char> fallback_byte(const std::string& token) {
  const auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>' || hex(token[3]) < 0 || hex(token[4]) < 0) return std::nullopt;
  return static_cast<char>(hex(token[3]) * 16 + hex(token[4]));
}

// ByteFallback: each run of byte tokens as the text its bytes make, or where they are not
// UTF-8, as one U+FFFD per token.
Parts decode_bytes(Parts parts) {
  Parts out;
  std::string bytes;
  const auto flush = [&] {
    if (valid_utf8(bytes)) out.push_back(bytes);
    else out.insert(out.end(), bytes.size(), "\uFFFD");
    bytes.clear();
  };
  for (std::string& part : parts) {
    if (const std::optional<char> byte = fallback_byte(part)) {
      bytes += *byte;
      continue;
    }
    if (!bytes.empty()) flush();
    out.push_back(std::move(part));
  }
  if (!bytes.empty()) flush();
  return out;
}

// Strip: up to `start` leading and `stop` trailing copies of `c`.
std::string strip(const std::string& part, const std::string& c, size_t start, size_t stop) {
  size_t begin = 0, end = part.size();
  for (size_t k = 0; k < start && part.compare(begin, c.size(), c) == 0; ++k) begin += c.size();
  for (size_t k = 0; k < stop && end - begin >= c.size() && part.compare(end - c.size(), c.size(), c) == 0; ++k) end -= c.size();
  return part.substr(begin, end - begin);
}

// ByteLevel: every part's byte-level characters back to bytes (a part that is not
// byte-level text, an added token, as its own bytes), decoded as one text.
Parts decode_byte_level(const Parts& parts) {
  std::string bytes;
  for (const std::string& part : parts) bytes += from_byte_level(part).value_or(part);
  return {replace_invalid_utf8(bytes)};
}

Parts decode_step(const BpePipeline::Decode& step, Parts parts) {
  using Kind = BpePipeline::Decode::Kind;
  switch (step.kind) {
    case Kind::kReplace:
      for (std::string& part : parts) part = replace_all(part, step.text, step.by);
      return parts;
    case Kind::kByteFallback: return decode_bytes(std::move(parts));
    case Kind::kFuse: {
      std::string all;
      for (const std::string& part : parts) all += part;
      return {all};
    }
    case Kind::kStrip:
      for (std::string& part : parts) part = strip(part, step.text, step.start, step.stop);
      return parts;
    case Kind::kMetaspace:  // the first part's replacements are the prefix the pre-tokenizer put there
      for (size_t i = 0; i < parts.size(); ++i) parts[i] = replace_all(parts[i], step.text, i == 0 && !step.never ? "" : " ");
      return parts;
    case Kind::kByteLevel: return decode_byte_level(parts);
  }
  return parts;
}

}  // namespace

BpeTokenizer BpeTokenizer::load(const std::string& dir) {
  std::optional<TokenizerJson> file = TokenizerJson::read(dir);
  TFM_CHECK(file, dir << " has no tokenizer.json (the file of Llama's, Mistral's and Qwen2's tokenizers)");
  TFM_CHECK(file->model == TokenizerJson::Model::kBpe,
            file->path << ": " << (file->model == TokenizerJson::Model::kWordPiece ? "WordPiece" : "GPT-2's byte-level BPE")
                       << " is BERT's or GPT-2's tokenizer, not one of Llama's, Mistral's or Qwen2's");
  return BpeTokenizer(std::move(*file));
}

BpeTokenizer::BpeTokenizer(TokenizerJson file)
    : HfTokenizer(std::move(file.pieces), file.config, {}),
      pipeline_(std::move(file.pipeline)),
      ranks_(std::move(file.merge_ranks)),
      clean_up_spaces_(file.config.flag("clean_up_tokenization_spaces", true)),
      cache_(std::make_shared<WordCache>()) {
  const nlohmann::json tokenizer_class = file.config.json().value("tokenizer_class", nlohmann::json());
  if (tokenizer_class != "LlamaTokenizer" && tokenizer_class != "LlamaTokenizerFast") {
    set_frame(*file.settings.before, *file.settings.after);
    return;
  }
  // LlamaTokenizerFast (what transformers loads for either class) writes the
  // post-processor anew from add_bos_token (default true) and add_eos_token (default false).
  const auto token = [&](SpecialToken which, const char* flag, const char* name) {
    TFM_CHECK(special_id(which), file.config.path() << ": " << flag << " is true, but there is no " << name);
    return special_token(which);
  };
  std::vector<std::string> before, after;
  if (file.config.flag("add_bos_token", true)) before.push_back(token(SpecialToken::kBos, "add_bos_token", "bos_token"));
  if (file.config.flag("add_eos_token", false)) after.push_back(token(SpecialToken::kEos, "add_eos_token", "eos_token"));
  set_frame(before, after);
}

std::vector<std::string> BpeTokenizer::tokenize_plain(std::string_view text, bool at_start) const {
  std::vector<std::string> tokens;
  for (const std::string& word : words(normalize(std::string(text)), at_start))
    for (std::string& token : cache_->get(word, [&](const std::string& w) { return word_tokens(w); })) tokens.push_back(std::move(token));
  return tokens;
}

std::string BpeTokenizer::normalize(std::string text) const {
  using Kind = BpePipeline::Edit::Kind;
  for (const BpePipeline::Edit& edit : pipeline_.normalizer) {
    if (edit.kind == Kind::kNfc) text = to_utf8(unicode::nfc(code_points(text, "the text to tokenize")));
    else if (edit.kind == Kind::kPrepend && !text.empty()) text = edit.text + text;
    else if (edit.kind == Kind::kReplace) text = replace_all(text, edit.text, edit.by);
  }
  return text;
}

// The pre-tokenizer's words: Metaspace's, or the pattern's (the whole text without one),
// written as byte-level characters where the file says so.
std::vector<std::string> BpeTokenizer::words(std::string text, bool at_start) const {
  if (pipeline_.metaspace) return metaspace_words(std::move(text), at_start);
  std::vector<std::string> words = pipeline_.pattern ? split_words(*pipeline_.pattern, text) : std::vector<std::string>{std::move(text)};
  if (pipeline_.byte_level)
    for (std::string& word : words) word = to_byte_level(word);
  return words;
}

// Spaces become the replacement, which is put before the text where the prepend scheme
// says so ("first": only before the text's first part, as the library's offset 0), and,
// with split, starts each word.
std::vector<std::string> BpeTokenizer::metaspace_words(std::string text, bool at_start) const {
  const BpePipeline::Metaspace& m = *pipeline_.metaspace;
  text = replace_all(text, " ", m.replacement);
  const bool prepend = m.prepend == Prepend::kAlways || (m.prepend == Prepend::kFirst && at_start);
  if (prepend && !text.starts_with(m.replacement)) text = m.replacement + text;
  if (!m.split) return {text};
  std::vector<std::string> words;
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find(m.replacement, start + 1), text.size());
    words.push_back(text.substr(start, end - start));
    start = end;
  }
  return words;
}

// With ignore_merges (Llama 3), a word of the vocabulary is its own token.
std::vector<std::string> BpeTokenizer::word_tokens(const std::string& word) const {
  if (pipeline_.ignore_merges && in_vocabulary(word)) return {word};
  return bpe_merge(first_symbols(word), ranks_);
}

// The word's characters as BPE starts from them. One outside the vocabulary becomes its
// bytes' <0xXX> tokens (byte_fallback, where the vocabulary has them all), else the
// unknown token (consecutive ones a single one with fuse_unk), else nothing, as the
// tokenizers library drops it.
std::vector<std::string> BpeTokenizer::first_symbols(const std::string& word) const {
  std::vector<std::string> symbols;
  bool last_unknown = false;
  for (std::string& c : utf8_characters(word)) {
    const bool known = in_vocabulary(c);
    const std::vector<std::string> bytes = known || !pipeline_.byte_fallback ? std::vector<std::string>() : byte_tokens(c);
    const bool unknown = !known && bytes.empty();
    if (known) symbols.push_back(std::move(c));
    symbols.insert(symbols.end(), bytes.begin(), bytes.end());
    if (unknown && pipeline_.unk_token && !(pipeline_.fuse_unk && last_unknown)) symbols.push_back(*pipeline_.unk_token);
    last_unknown = unknown;
  }
  return symbols;
}

// A character's byte-fallback tokens, or none where the vocabulary lacks one of them.
std::vector<std::string> BpeTokenizer::byte_tokens(const std::string& c) const {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::vector<std::string> tokens;
  for (unsigned char byte : c) {
    tokens.push_back(std::string("<0x") + kHex[byte >> 4] + kHex[byte & 15] + ">");
    if (!in_vocabulary(tokens.back())) return {};
  }
  return tokens;
}

std::string BpeTokenizer::join_tokens(const std::vector<std::string>& tokens) const {
  Parts parts = tokens;
  for (const BpePipeline::Decode& step : pipeline_.decoder) parts = decode_step(step, std::move(parts));
  std::string text;
  for (const std::string& part : parts) text += part;
  return text;
}

std::string BpeTokenizer::decode(const std::vector<int>& ids, bool skip_special) const {
  std::vector<std::string> tokens;
  for (int id : ids)
    if (!skip_special || !is_special(id)) tokens.push_back(piece(id));
  const std::string text = join_tokens(tokens);
  return clean_up_spaces_ ? clean_up_tokenization(text) : text;
}

}  // namespace tfm::data
