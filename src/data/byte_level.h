#pragma once
// Byte-level text, as GPT-2 introduced it and Llama 3 and Qwen2 keep it: each byte of a
// word's UTF-8 written as one printable character (GPT-2's bytes_to_unicode: `Ġ` for the
// space), so that a BPE over these 256 characters covers every text without an unknown
// token; and the patterns that cut text into words before BPE, matched by hand as Python's
// `regex` module matches them (tfm has no regular-expression engine with Unicode classes).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfm::data {

// UTF-8 bytes as byte-level characters (GPT-2's bytes_to_unicode), in UTF-8.
std::string to_byte_level(std::string_view bytes);
// A byte-level token's bytes; nullopt where one of its characters is not one of the 256.
std::optional<std::string> from_byte_level(std::string_view token);

// The pre-tokenizer patterns tfm knows, each as its model family ships it:
//   GPT-2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   Qwen2:   Llama 3's with \p{N} (one digit a word) for \p{N}{1,3}
enum class WordPattern { kGpt2, kLlama3, kQwen2 };
// The pattern whose text is exactly `regex`; nullopt for any other.
std::optional<WordPattern> word_pattern(std::string_view regex);
// The words of valid UTF-8 text, as regex.findall(pattern, text): every character is in
// one (each pattern's last alternative, \s+, takes what the others leave).
std::vector<std::string> split_words(WordPattern pattern, std::string_view text);

}  // namespace tfm::data
