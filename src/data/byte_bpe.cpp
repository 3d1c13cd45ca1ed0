#include "data/byte_bpe.h"

#include <array>
#include <climits>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "data/text.h"
#include "data/unicode.h"
#include "tensor/error.h"

namespace tfm::data {

namespace {

// GPT-2's bytes_to_unicode(): each byte as a printable character. The printable Latin-1
// bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves, the other 68 become U+0100,
// U+0101, ... in byte order (the space, 0x20, is U+0120 'Ġ').
struct ByteSymbols {
  std::array<std::string, 256> utf8;                     // byte -> its symbol in UTF-8
  std::unordered_map<char32_t, unsigned char> byte_of;  // symbol -> byte
};

const ByteSymbols& byte_symbols() {
  static const ByteSymbols symbols = [] {
    ByteSymbols s;
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t symbol = printable ? static_cast<char32_t>(b) : next++;
      append_utf8(s.utf8[static_cast<size_t>(b)], symbol);
      s.byte_of[symbol] = static_cast<unsigned char>(b);
    }
    return s;
  }();
  return symbols;
}

// GPT-2's pre-tokenizer, the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// matched by hand as Python's `regex` module matches it (\s is Unicode's White_Space):
// each function below is the length of one alternative's match at `pos`, 0 for none.
enum class CharClass { kLetter, kNumber, kSpace, kOther };

CharClass class_of(char32_t c) {
  if (unicode::is_white_space(c)) return CharClass::kSpace;
  switch (unicode::category(c)) {
    case unicode::Category::kLetter: return CharClass::kLetter;
    case unicode::Category::kNumber: return CharClass::kNumber;
    default: return CharClass::kOther;
  }
}

// 's|'t|'re|'ve|'m|'ll|'d (lower case only, whatever follows)
size_t contraction_length(std::u32string_view s, size_t pos) {
  if (s[pos] != U'\'') return 0;
  for (std::u32string_view suffix : {U"s", U"t", U"re", U"ve", U"m", U"ll", U"d"})
    if (s.substr(pos + 1).starts_with(suffix)) return 1 + suffix.size();
  return 0;
}

// ` ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+`: a run of letters, digits or other characters
// (not whitespace), with the one space before it.
size_t run_length(std::u32string_view s, size_t pos) {
  const size_t start = s[pos] == U' ' && pos + 1 < s.size() ? pos + 1 : pos;
  const CharClass run = class_of(s[start]);
  if (run == CharClass::kSpace) return 0;
  size_t end = start + 1;
  while (end < s.size() && class_of(s[end]) == run) ++end;
  return end - pos;
}

// `\s+(?!\S)|\s+`: whitespace, less its last character where more text follows: that one
// starts the next match (" word", where it is a space).
size_t space_length(std::u32string_view s, size_t pos) {
  size_t end = pos;
  while (end < s.size() && class_of(s[end]) == CharClass::kSpace) ++end;
  return end < s.size() && end - pos > 1 ? end - pos - 1 : end - pos;
}

size_t word_length(std::u32string_view s, size_t pos) {
  if (const size_t n = contraction_length(s, pos)) return n;
  if (const size_t n = run_length(s, pos)) return n;
  return space_length(s, pos);
}

// Every occurrence of the pair (first, second) joined, left to right.
std::vector<std::string> join_pair(const std::vector<std::string>& symbols, const std::string& first, const std::string& second) {
  std::vector<std::string> out;
  for (size_t i = 0; i < symbols.size(); ++i) {
    if (i + 1 < symbols.size() && symbols[i] == first && symbols[i + 1] == second) {
      out.push_back(first + second);
      ++i;
    } else {
      out.push_back(symbols[i]);
    }
  }
  return out;
}

// merges.txt: one merge a line, "first second", the first merges first; a first line
// "#version: ..." is a header. The rank of a merge listed twice is its later line's, as HF's.
MergeRanks read_merges(const std::string& path) {
  const std::vector<std::string> lines = read_lines(path);
  MergeRanks ranks;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i == 0 && lines[i].starts_with("#version")) continue;
    std::istringstream words(lines[i]);
    std::string first, second, extra;
    const bool pair = (words >> first >> second) && !(words >> extra);
    TFM_CHECK(pair, path << ":" << i + 1 << ": expected two symbols separated by a space, got \"" << lines[i] << "\"");
    ranks[first + " " + second] = static_cast<int>(i);
  }
  return ranks;
}

// A word's tokens are kept for the next time it occurs, up to this many words.
constexpr size_t kMaxCachedWords = 100000;

}  // namespace

struct ByteLevelBpe::WordCache {
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<std::string>> tokens;
};

ByteLevelBpe ByteLevelBpe::load(const std::string& dir) {
  if (std::optional<TokenizerJson> file = TokenizerJson::read(dir)) {
    TFM_CHECK(file->model == TokenizerJson::Model::kByteLevelBpe, file->path << ": model.type \"WordPiece\" is not GPT-2's tokenizer (byte-level BPE)");
    return ByteLevelBpe(std::move(file->pieces), file->config, std::move(file->merge_ranks), file->settings);
  }
  const std::filesystem::path d(dir);
  return ByteLevelBpe(read_vocab_json((d / "vocab.json").string()), TokenizerConfig::read((d / "tokenizer_config.json").string()),
                      read_merges((d / "merges.txt").string()), {});
}

ByteLevelBpe::ByteLevelBpe(std::vector<std::string> pieces, const TokenizerConfig& config, MergeRanks ranks, const TokenizerSettings& settings)
    : HfTokenizer(std::move(pieces), config,
                  {{SpecialToken::kBos, "<|endoftext|>"}, {SpecialToken::kEos, "<|endoftext|>"}, {SpecialToken::kUnk, "<|endoftext|>"}}),
      ranks_(std::move(ranks)),
      add_prefix_space_(config.flag("add_prefix_space", false)),
      add_bos_token_(config.flag("add_bos_token", false)),
      use_regex_(settings.use_regex),
      cache_(std::make_shared<WordCache>()) {
  TFM_CHECK(!add_bos_token_ || special_id(SpecialToken::kBos), config.path() << ": add_bos_token is true, but there is no bos_token");
  if (!settings.before) return;
  // GPT2TokenizerFast leaves add_bos_token to the post-processor, GPT2Tokenizer does not:
  // where they would differ, neither is taken.
  TFM_CHECK(!add_bos_token_ || (!settings.before->empty() && settings.before->front() == special_token(SpecialToken::kBos)),
            config.path() << ": tokenizer_config.json's add_bos_token is true, but tokenizer.json's post-processor adds no "
                          << special_token(SpecialToken::kBos) << " (make it a TemplateProcessing that does, or set add_bos_token false)");
  set_frame(*settings.before, *settings.after);
}

std::string ByteLevelBpe::prepare(std::string_view text) const {
  std::string prepared(add_prefix_space_ ? " " : "");
  return prepared.append(text);
}

std::vector<std::string> ByteLevelBpe::add_special_tokens(std::vector<std::string> tokens) const {
  if (add_bos_token_) tokens.insert(tokens.begin(), special_token(SpecialToken::kBos));
  return tokens;
}

std::vector<std::string> ByteLevelBpe::tokenize_plain(std::string_view text) const {
  const std::u32string chars = code_points(text, "the text to tokenize");
  std::vector<std::string> tokens;
  for (size_t pos = 0; pos < chars.size();) {
    const size_t length = use_regex_ ? word_length(chars, pos) : chars.size() - pos;  // without the pattern: one word
    std::string word;
    for (char byte : to_utf8(std::u32string_view(chars).substr(pos, length))) word += byte_symbols().utf8[static_cast<unsigned char>(byte)];
    for (std::string& token : cached_merge(word)) tokens.push_back(std::move(token));
    pos += length;
  }
  return tokens;
}

std::vector<std::string> ByteLevelBpe::cached_merge(const std::string& word) const {
  {
    std::lock_guard lock(cache_->mutex);
    const auto it = cache_->tokens.find(word);
    if (it != cache_->tokens.end()) return it->second;
  }
  std::vector<std::string> tokens = merge(word);
  std::lock_guard lock(cache_->mutex);
  if (cache_->tokens.size() >= kMaxCachedWords) cache_->tokens.clear();  // bounded, for long-running servers
  cache_->tokens.emplace(word, tokens);
  return tokens;
}

// HF's GPT2Tokenizer.bpe: join the adjacent pair of lowest rank, everywhere in the word,
// until no adjacent pair is a merge.
std::vector<std::string> ByteLevelBpe::merge(const std::string& word) const {
  std::vector<std::string> symbols = utf8_characters(word);
  while (symbols.size() > 1) {
    int best = INT_MAX;
    size_t at = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = ranks_.find(symbols[i] + " " + symbols[i + 1]);
      if (it != ranks_.end() && it->second < best) best = it->second, at = i;
    }
    if (best == INT_MAX) break;
    symbols = join_pair(symbols, symbols[at], symbols[at + 1]);
  }
  return symbols;
}

// The tokens' symbols back to bytes, decoded as Python's bytes.decode("utf-8", "replace").
std::string ByteLevelBpe::join_tokens(const std::vector<std::string>& tokens) const {
  std::string bytes;
  for (const std::string& token : tokens) {
    for (char32_t c : code_points(token, "a token")) {
      const auto it = byte_symbols().byte_of.find(c);
      TFM_CHECK(it != byte_symbols().byte_of.end(), "cannot decode the token \"" << token << "\": it is not byte-level text");
      bytes += static_cast<char>(it->second);
    }
  }
  return replace_invalid_utf8(bytes);
}

}  // namespace tfm::data
