// libFuzzer target: tokenizer.json (Hugging Face's tokenizers library's file), read as
// BERT's WordPiece, as GPT-2's byte-level BPE and as the BPE of Llama, Mistral and Qwen2
// (BpeTokenizer), as a Hugging Face directory is read: it
// must load or be refused with one error, and a tokenizer it gives must encode text into
// ids of its vocabulary and decode them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/byte_bpe.h"
#include "data/wordpiece.h"
#include "scratch.h"
#include "tensor/error.h"

namespace {

std::string g_dir;  // where each input is written as tokenizer.json

const char* const kTexts[] = {"A man, a plan: Café naïve 中文 😀", "  runs of   spaces\tand [MASK] <|endoftext|> <s>", "",
                              "I'LL 123456 \r\n\n x<|begin_of_text|>y <0xE4>\u2581 \u00A0"};

void check(const tfm::data::HfTokenizer& tokenizer) {
  for (const char* text : kTexts) {
    const std::vector<int> ids = tokenizer.encode(text);
    for (int id : ids)
      if (id < 0 || id >= tokenizer.size()) __builtin_trap();  // every id must index the embedding table
    tokenizer.decode(ids);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_dir = tfm::fuzz::scratch_dir("tokenizer_json");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tfm::fuzz::write_file(g_dir + "/tokenizer.json", reinterpret_cast<const char*>(data), size);
  try {
    check(tfm::data::WordPiece::load(g_dir));
  } catch (const tfm::Error&) {
  }
  try {
    check(tfm::data::ByteLevelBpe::load(g_dir));
  } catch (const tfm::Error&) {
  }
  try {
    check(tfm::data::BpeTokenizer::load(g_dir));
  } catch (const tfm::Error&) {
  }
  return 0;
}
