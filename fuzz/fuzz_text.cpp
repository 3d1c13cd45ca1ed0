// libFuzzer target: corpus lines and the character tokenizer. The first half of the
// input is the training text the vocabulary is built from, the second half the text
// encoded and decoded with it; the input as a whole is also read as a tokenizer
// record (checkpoint metadata).
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "data/text.h"
#include "data/tokenizer.h"
#include "tensor/error.h"

namespace {

// The bytes as the corpus readers accept them: lines ending in "\n" ("\r\n" too), or
// false where a line has a problem the readers refuse (NUL byte, invalid UTF-8).
bool corpus_text(std::string_view bytes, std::string& text) {
  while (!bytes.empty()) {
    const size_t end = std::min(bytes.find('\n'), bytes.size());
    std::string_view line = bytes.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (tfm::data::text_problem(line)) return false;
    text.append(line).push_back('\n');
    bytes.remove_prefix(std::min(end + 1, bytes.size()));
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::string train, text;
  const std::string_view all(bytes);
  if (corpus_text(all.substr(0, size / 2), train) && corpus_text(all.substr(size / 2), text)) {
    try {
      const tfm::data::Tokenizer t = tfm::data::Tokenizer::characters(train);
      t.decode(t.encode(text));
      if (t.decode(t.encode(train)) != train) __builtin_trap();  // the training text survives a round trip
    } catch (const tfm::Error&) {
    }
  }
  // SentencePiece records name a file to load: the fuzzer must not open paths it invents.
  if (bytes.find("sentencepiece") != std::string::npos) return 0;
  try {
    tfm::data::Tokenizer::from_record(bytes, "fuzz");
  } catch (const tfm::Error&) {
  }
  return 0;
}
