#pragma once
// UTF-8 and the Unicode character data that tokenizers need: general categories,
// Python's notion of whitespace and lower case, and canonical normalization (NFD, NFC).
// The data come from Python's unicodedata (scripts/make_unicode_tables.py), so that
// tokenizers whose reference implementation is Python code (Hugging Face's) agree with
// it character for character.
#include <string>
#include <string_view>
#include <vector>

namespace tfm::data {

// ---- UTF-8 ----

// One step of UTF-8 decoding at s[pos]: a code point and its length in bytes, or, for
// invalid input, the length of the maximal invalid subpart (Unicode's definition, which
// Python's decoder follows): what one U+FFFD replaces.
struct Utf8Step {
  char32_t code_point;  // U+FFFD where !valid
  size_t length;        // 1 to 4
  bool valid;
};
Utf8Step next_utf8(std::string_view s, size_t pos);

bool valid_utf8(std::string_view s);
// Throws tfm::Error naming `origin` and the byte offset unless `text` is valid UTF-8.
void check_utf8(std::string_view text, std::string_view origin);
// The code points of `text`; invalid UTF-8 is an error naming `origin` and the byte offset.
std::u32string code_points(std::string_view text, std::string_view origin);
std::string to_utf8(std::u32string_view text);
void append_utf8(std::string& out, char32_t c);
// Python's bytes.decode("utf-8", errors="replace"), re-encoded: each maximal invalid
// subpart becomes U+FFFD.
std::string replace_invalid_utf8(std::string_view bytes);
// Splits valid UTF-8 into characters.
std::vector<std::string> utf8_characters(const std::string& text);

// ---- Character data ----
namespace unicode {

// The general categories the tokenizers tell apart.
enum class Category : unsigned char {
  kLetter,          // L*
  kNumber,          // N*
  kPunctuation,     // P*
  kNonspacingMark,  // Mn
  kSpaceSeparator,  // Zs
  kOther,           // C*: control, format, surrogate, private use, unassigned
  kRest,            // Mc, Me, S*, Zl, Zp
};
Category category(char32_t c);

// Python's str.isspace(): Unicode's White_Space plus U+001C..U+001F.
bool is_python_space(char32_t c);
// Unicode's White_Space property, what the `regex` module's \s matches.
bool is_white_space(char32_t c);

// Python's str.lower() of each character alone (whole strings would also apply the
// final-sigma rule, which Hugging Face's tokenizers never reach: they lower character by
// character).
std::u32string lower(std::u32string_view text);

// Canonical decomposition (NFD) and composition (NFC), as unicodedata.normalize.
std::u32string nfd(std::u32string_view text);
std::u32string nfc(std::u32string_view text);

}  // namespace unicode

// Python's str.strip(), lstrip() and rstrip() of UTF-8 text: whitespace as str.isspace().
std::string_view strip_space(std::string_view text);
std::string_view lstrip_space(std::string_view text);
std::string_view rstrip_space(std::string_view text);

}  // namespace tfm::data
