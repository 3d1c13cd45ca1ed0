// libFuzzer target: corpus lines and the character tokenizer. The first half of the
// input is the training text the vocabulary is built from, the second half the text
// encoded and decoded with it; the input as a whole is also read as a tokenizer
// record (checkpoint metadata).
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/text.h"
#include "data/tokenizer.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    std::string train, text;
    for (const std::string& line : tfm::data::split_lines(bytes.substr(0, size / 2), "fuzz")) train += line + "\n";
    for (const std::string& line : tfm::data::split_lines(bytes.substr(size / 2), "fuzz")) text += line + "\n";
    const tfm::data::Tokenizer t = tfm::data::Tokenizer::characters(train);
    t.decode(t.encode(text));
    if (t.decode(t.encode(train)) != train) __builtin_trap();  // the training text survives a round trip
  } catch (const tfm::Error&) {
  }
  // SentencePiece records name a file to load: the fuzzer must not open paths it invents.
  if (bytes.find("sentencepiece") != std::string::npos) return 0;
  try {
    tfm::data::Tokenizer::from_record(bytes, "fuzz");
  } catch (const tfm::Error&) {
  }
  return 0;
}
