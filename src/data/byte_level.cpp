#include "data/byte_level.h"

#include <array>
#include <unordered_map>

#include "data/unicode.h"

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

// ---- The patterns, alternative by alternative ----
// Each function below is the length of one alternative's match at `pos` (pos < s.size()),
// 0 for none; \s is Unicode's White_Space (the `regex` module's), \p{L} and \p{N} the
// general categories L* and N*.
enum class CharClass { kLetter, kNumber, kSpace, kOther };

CharClass class_of(char32_t c) {
  if (unicode::is_white_space(c)) return CharClass::kSpace;
  switch (unicode::category(c)) {
    case unicode::Category::kLetter: return CharClass::kLetter;
    case unicode::Category::kNumber: return CharClass::kNumber;
    default: return CharClass::kOther;
  }
}

bool is_line_break(char32_t c) { return c == U'\r' || c == U'\n'; }

// The case-insensitive match of `regex`'s (?i:...): ASCII letters, and the long s (ſ),
// which case-folds to s.
char32_t folded(char32_t c) {
  if (c >= U'A' && c <= U'Z') return c - U'A' + U'a';
  return c == U'\u017F' ? U's' : c;
}

// 's|'t|'re|'ve|'m|'ll|'d, in lower case only (GPT-2) or in any case (Llama 3, Qwen2).
size_t contraction_length(std::u32string_view s, size_t pos, bool any_case) {
  if (s[pos] != U'\'') return 0;
  for (std::u32string_view suffix : {U"s", U"t", U"re", U"ve", U"m", U"ll", U"d"}) {
    if (pos + 1 + suffix.size() > s.size()) continue;
    size_t k = 0;
    while (k < suffix.size() && (any_case ? folded(s[pos + 1 + k]) : s[pos + 1 + k]) == suffix[k]) ++k;
    if (k == suffix.size()) return 1 + suffix.size();
  }
  return 0;
}

// GPT-2's ` ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+`: a run of letters, digits or other
// characters (not whitespace), with the one space before it.
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

size_t gpt2_length(std::u32string_view s, size_t pos) {
  if (const size_t n = contraction_length(s, pos, /*any_case=*/false)) return n;
  if (const size_t n = run_length(s, pos)) return n;
  return space_length(s, pos);
}

// `[^\r\n\p{L}\p{N}]?\p{L}+`: letters, with the one character before them that is no line
// break, letter or number (a space, a tab, punctuation).
size_t letters_length(std::u32string_view s, size_t pos) {
  size_t start = pos;
  if (class_of(s[pos]) != CharClass::kLetter) {
    const bool prefix = !is_line_break(s[pos]) && class_of(s[pos]) != CharClass::kNumber;
    if (!prefix || pos + 1 == s.size() || class_of(s[pos + 1]) != CharClass::kLetter) return 0;
    start = pos + 1;
  }
  size_t end = start;
  while (end < s.size() && class_of(s[end]) == CharClass::kLetter) ++end;
  return end - pos;
}

// `\p{N}{1,most}`
size_t digits_length(std::u32string_view s, size_t pos, size_t most) {
  size_t end = pos;
  while (end < s.size() && end - pos < most && class_of(s[end]) == CharClass::kNumber) ++end;
  return end - pos;
}

// ` ?[^\s\p{L}\p{N}]+[\r\n]*`: other characters, with the one space before them and the
// line breaks after them.
size_t symbols_length(std::u32string_view s, size_t pos) {
  const bool space_first = s[pos] == U' ' && pos + 1 < s.size() && class_of(s[pos + 1]) == CharClass::kOther;
  size_t end = space_first ? pos + 1 : pos;
  if (class_of(s[end]) != CharClass::kOther) return 0;
  while (end < s.size() && class_of(s[end]) == CharClass::kOther) ++end;
  while (end < s.size() && is_line_break(s[end])) ++end;
  return end - pos;
}

// `\s*[\r\n]+`: whitespace up to its last line break (the regex backtracks to it).
size_t line_breaks_length(std::u32string_view s, size_t pos) {
  size_t length = 0;
  for (size_t end = pos; end < s.size() && class_of(s[end]) == CharClass::kSpace; ++end)
    if (is_line_break(s[end])) length = end + 1 - pos;
  return length;
}

// Llama 3's pattern; Qwen2's where most_digits is 1.
size_t llama3_length(std::u32string_view s, size_t pos, size_t most_digits) {
  if (const size_t n = contraction_length(s, pos, /*any_case=*/true)) return n;
  if (const size_t n = letters_length(s, pos)) return n;
  if (const size_t n = digits_length(s, pos, most_digits)) return n;
  if (const size_t n = symbols_length(s, pos)) return n;
  if (const size_t n = line_breaks_length(s, pos)) return n;
  return space_length(s, pos);
}

size_t word_length(WordPattern pattern, std::u32string_view s, size_t pos) {
  switch (pattern) {
    case WordPattern::kGpt2: return gpt2_length(s, pos);
    case WordPattern::kLlama3: return llama3_length(s, pos, 3);
    case WordPattern::kQwen2: return llama3_length(s, pos, 1);
  }
  return s.size() - pos;
}

}  // namespace

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  for (char byte : bytes) out += byte_symbols().utf8[static_cast<unsigned char>(byte)];
  return out;
}

std::optional<std::string> from_byte_level(std::string_view token) {
  std::string bytes;
  for (size_t pos = 0; pos < token.size();) {
    const Utf8Step step = next_utf8(token, pos);
    const auto it = byte_symbols().byte_of.find(step.code_point);
    if (!step.valid || it == byte_symbols().byte_of.end()) return std::nullopt;
    bytes += static_cast<char>(it->second);
    pos += step.length;
  }
  return bytes;
}

std::optional<WordPattern> word_pattern(std::string_view regex) {
  static constexpr std::pair<std::string_view, WordPattern> kKnown[] = {
      {R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", WordPattern::kGpt2},
      {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)", WordPattern::kLlama3},
      {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)", WordPattern::kQwen2}};
  for (const auto& [text, pattern] : kKnown)
    if (regex == text) return pattern;
  return std::nullopt;
}

std::vector<std::string> split_words(WordPattern pattern, std::string_view text) {
  const std::u32string chars = code_points(text, "the text to tokenize");
  std::vector<std::string> words;
  for (size_t pos = 0; pos < chars.size();) {
    const size_t length = word_length(pattern, chars, pos);
    words.push_back(to_utf8(std::u32string_view(chars).substr(pos, length)));
    pos += length;
  }
  return words;
}

}  // namespace tfm::data
