// libFuzzer target: corpus lines and the character tokenizer. The first half of the
// input is the training text the vocabulary is built from, the second half the text
// encoded and decoded with it, both read by the corpus reader (plain or gzip lines,
// UTF-8 checked); the input as a whole is also read as a tokenizer record (checkpoint
// metadata).
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/text.h"
#include "data/tokenizer.h"
#include "scratch.h"
#include "tensor/error.h"

namespace {

std::string g_dir;  // this process's scratch directory

// The lines of `bytes` as the corpus reader gives them, joined with "\n" after each.
std::string read_corpus(const std::string& name, const char* bytes, size_t size) {
  const std::string path = g_dir + "/" + name;
  tfm::fuzz::write_file(path, bytes, size);
  std::string text;
  for (const std::string& line : tfm::data::read_lines(path)) text += line + "\n";
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_dir = tfm::fuzz::scratch_dir("text");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const std::string train = read_corpus("train.txt", bytes.data(), size / 2);
    const std::string text = read_corpus("text.txt", bytes.data() + size / 2, size - size / 2);
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
