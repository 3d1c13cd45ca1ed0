#include "data/unicode.h"

#include <algorithm>
#include <iterator>

#include "tensor/error.h"

namespace tfm::data {

namespace {

constexpr char32_t kReplacement = 0xFFFD;

unsigned char byte_at(std::string_view s, size_t pos) { return static_cast<unsigned char>(s[pos]); }

// What a lead byte announces: the sequence's length, the bits it carries, and the range
// of the first continuation byte (narrower than 80..BF where the full range would allow
// overlong forms, surrogates or code points past U+10FFFF). Length 0: not a lead byte.
struct Lead {
  size_t length;
  char32_t bits;
  int low = 0x80, high = 0xBF;
};

Lead lead_of(unsigned char b) {
  if (b >= 0xC2 && b <= 0xDF) return {2, char32_t(b & 0x1F)};
  if (b >= 0xE0 && b <= 0xEF) return {3, char32_t(b & 0x0F), b == 0xE0 ? 0xA0 : 0x80, b == 0xED ? 0x9F : 0xBF};
  if (b >= 0xF0 && b <= 0xF4) return {4, char32_t(b & 0x07), b == 0xF0 ? 0x90 : 0x80, b == 0xF4 ? 0x8F : 0xBF};
  return {0, 0};
}

}  // namespace

Utf8Step next_utf8(std::string_view s, size_t pos) {
  const unsigned char first = byte_at(s, pos);
  if (first < 0x80) return {first, 1, true};
  const Lead lead = lead_of(first);
  if (lead.length == 0) return {kReplacement, 1, false};
  char32_t c = lead.bits;
  for (size_t k = 1; k < lead.length; ++k) {
    const bool in_range = pos + k < s.size() && byte_at(s, pos + k) >= (k == 1 ? lead.low : 0x80) &&
                          byte_at(s, pos + k) <= (k == 1 ? lead.high : 0xBF);
    if (!in_range) return {kReplacement, k, false};  // the bytes so far are the maximal invalid subpart
    c = (c << 6) | (byte_at(s, pos + k) & 0x3F);
  }
  return {c, lead.length, true};
}

namespace {

// Where the first invalid sequence of `s` starts, or npos.
size_t invalid_utf8_at(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Step step = next_utf8(s, pos);
    if (!step.valid) return pos;
    pos += step.length;
  }
  return std::string_view::npos;
}

}  // namespace

bool valid_utf8(std::string_view s) { return invalid_utf8_at(s) == std::string_view::npos; }

void check_utf8(std::string_view text, std::string_view origin) {
  const size_t at = invalid_utf8_at(text);
  TFM_CHECK(at == std::string_view::npos, origin << ": invalid UTF-8 at byte " << at);
}

std::u32string code_points(std::string_view text, std::string_view origin) {
  check_utf8(text, origin);
  std::u32string out;
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = next_utf8(text, pos);
    out.push_back(step.code_point);
    pos += step.length;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::string to_utf8(std::u32string_view text) {
  std::string out;
  for (char32_t c : text) append_utf8(out, c);
  return out;
}

std::string replace_invalid_utf8(std::string_view bytes) {
  std::string out;
  for (size_t pos = 0; pos < bytes.size();) {
    const Utf8Step step = next_utf8(bytes, pos);
    if (step.valid)
      out.append(bytes.substr(pos, step.length));
    else
      append_utf8(out, kReplacement);
    pos += step.length;
  }
  return out;
}

std::vector<std::string> utf8_characters(const std::string& text) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < text.size();) {
    const size_t length = next_utf8(text, pos).length;
    out.push_back(text.substr(pos, length));
    pos += length;
  }
  return out;
}

namespace unicode {

namespace {

// The rows of the generated tables.
struct CategoryRun {
  char32_t first;  // the run lasts until the next row's first
  Category category;
};
struct LowerRun {  // lower(c) = c + offset for c = first, first + step, ..., last
  char32_t first, last;
  int step, offset;
};
struct LowerExpansion {
  char32_t code_point;
  int length;
  char32_t lower[3];
};
struct CombiningClassRun {
  char32_t first, last;
  int combining_class;
};
struct Decomposition {
  char32_t code_point;
  int start, length;  // in kDecompositionData
};
struct Composition {
  char32_t first, second, composite;
};

#include "data/unicode_tables.inc"

// The last row whose key is at most `c`, or nullptr: the row of a run that may hold `c`.
template <class Row, size_t N, class Key>
const Row* last_row_at_most(const Row (&rows)[N], char32_t c, Key key) {
  const Row* it = std::upper_bound(std::begin(rows), std::end(rows), c, [&](char32_t v, const Row& r) { return v < key(r); });
  return it == std::begin(rows) ? nullptr : it - 1;
}

int combining_class(char32_t c) {
  const CombiningClassRun* run = last_row_at_most(kCombiningClassRuns, c, [](const CombiningClassRun& r) { return r.first; });
  return run && c <= run->last ? run->combining_class : 0;
}

// Hangul syllables decompose and compose by arithmetic (Unicode's chapter 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

bool is_hangul_syllable(char32_t c) { return c >= kSBase && c < kSBase + kSCount; }

void append_decomposition(std::u32string& out, char32_t c) {
  if (is_hangul_syllable(c)) {
    const char32_t index = c - kSBase;
    out += kLBase + index / kNCount;
    out += kVBase + (index % kNCount) / kTCount;
    if (index % kTCount) out += kTBase + index % kTCount;
    return;
  }
  const Decomposition* d = last_row_at_most(kDecompositions, c, [](const Decomposition& r) { return r.code_point; });
  if (d && d->code_point == c)
    out.append(kDecompositionData + d->start, static_cast<size_t>(d->length));
  else
    out += c;
}

// Puts each run of combining characters in order of combining class, stably.
void reorder_canonically(std::u32string& text) {
  for (size_t i = 1; i < text.size(); ++i) {
    const int cc = combining_class(text[i]);
    for (size_t j = i; cc != 0 && j > 0 && combining_class(text[j - 1]) > cc; --j) std::swap(text[j - 1], text[j]);
  }
}

// The primary composite of a pair, or 0 where they do not compose.
char32_t compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount)
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  if (is_hangul_syllable(first) && (first - kSBase) % kTCount == 0 && second > kTBase && second < kTBase + kTCount)
    return first + (second - kTBase);
  const Composition* it = std::lower_bound(std::begin(kCompositions), std::end(kCompositions), Composition{first, second, 0},
                                           [](const Composition& a, const Composition& b) {
                                             return a.first != b.first ? a.first < b.first : a.second < b.second;
                                           });
  return it != std::end(kCompositions) && it->first == first && it->second == second ? it->composite : 0;
}

}  // namespace

Category category(char32_t c) {
  const CategoryRun* run = last_row_at_most(kCategoryRuns, c, [](const CategoryRun& r) { return r.first; });
  return run && c <= 0x10FFFF ? run->category : Category::kOther;
}

bool is_python_space(char32_t c) { return std::binary_search(std::begin(kPythonSpaces), std::end(kPythonSpaces), c); }

bool is_white_space(char32_t c) { return is_python_space(c) && !(c >= 0x1C && c <= 0x1F); }

std::u32string lower(std::u32string_view text) {
  std::u32string out;
  for (char32_t c : text) {
    const LowerExpansion* e = last_row_at_most(kLowerExpansions, c, [](const LowerExpansion& r) { return r.code_point; });
    if (e && e->code_point == c) {
      out.append(e->lower, static_cast<size_t>(e->length));
      continue;
    }
    const LowerRun* run = last_row_at_most(kLowerRuns, c, [](const LowerRun& r) { return r.first; });
    const bool mapped = run && c <= run->last && (c - run->first) % run->step == 0;
    out += mapped ? static_cast<char32_t>(static_cast<int>(c) + run->offset) : c;
  }
  return out;
}

std::u32string nfd(std::u32string_view text) {
  std::u32string out;
  for (char32_t c : text) append_decomposition(out, c);
  reorder_canonically(out);
  return out;
}

// Unicode's composition algorithm (UAX #15): each character joins the last starter
// before it unless a character between them blocks it (one of class 0, or of a class
// not below its own).
std::u32string nfc(std::u32string_view text) {
  std::u32string out = nfd(text);
  if (out.empty()) return out;
  size_t starter = 0, kept = 1;
  int last_class = combining_class(out[0]) == 0 ? 0 : 256;  // text that starts with a mark has no starter
  for (size_t i = 1; i < out.size(); ++i) {
    const char32_t c = out[i];
    const int cc = combining_class(c);
    const char32_t composite = compose(out[starter], c);
    if (composite && (last_class < cc || last_class == 0)) {
      out[starter] = composite;
      continue;
    }
    if (cc == 0) starter = kept;
    last_class = cc;
    out[kept++] = c;
  }
  out.resize(kept);
  return out;
}

}  // namespace unicode

namespace {

// The start of the last character of non-empty valid UTF-8.
size_t last_character_start(std::string_view text) {
  size_t pos = text.size() - 1;
  while (pos > 0 && (byte_at(text, pos) & 0xC0) == 0x80) --pos;
  return pos;
}

}  // namespace

std::string_view lstrip_space(std::string_view text) {
  while (!text.empty()) {
    const Utf8Step step = next_utf8(text, 0);
    if (!unicode::is_python_space(step.code_point)) break;
    text.remove_prefix(step.length);
  }
  return text;
}

std::string_view rstrip_space(std::string_view text) {
  while (!text.empty()) {
    const size_t start = last_character_start(text);
    if (!unicode::is_python_space(next_utf8(text, start).code_point)) break;
    text = text.substr(0, start);
  }
  return text;
}

std::string_view strip_space(std::string_view text) { return lstrip_space(rstrip_space(text)); }

}  // namespace tfm::data
