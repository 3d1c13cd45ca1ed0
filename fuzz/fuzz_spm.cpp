// libFuzzer target: SentencePiece input. The first byte picks what the rest is:
//   even: text tokenized with a small BPE model (trained once, at start-up) through
//         the corpus reader, the subword vocabulary and the single-stream tokenizer,
//         as `tfm translate`, `tfm lm train --vocab` and `tfm embed` do;
//   odd:  a SentencePiece model file given to `--vocab`, which must load or be
//         refused with one error.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/text.h"
#include "data/tokenizer.h"
#include "data/vocab.h"
#include "scratch.h"
#include "tensor/error.h"

namespace {

std::string g_model_path;  // the trained model
std::string g_input_path;  // where odd inputs are written for Vocab::load
std::string g_text_path;   // where even inputs are written for the corpus reader

void check_ids(const std::vector<int>& ids, int size) {
  for (int id : ids)
    if (id < 0 || id >= size) __builtin_trap();  // every id must index the embedding table
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string dir = tfm::fuzz::scratch_dir("spm");
  g_model_path = dir + "/bpe.model";
  g_input_path = dir + "/input.model";
  g_text_path = dir + "/input.txt";
  std::vector<std::string> sentences;
  const char* seeds[] = {"Ein Mann fährt Fahrrad über die Brücke.", "A man rides a bike across the bridge.",
                         "Zwei Hunde spielen im Schnee – 雪 ❄️", "Two dogs play in the snow, naïvely."};
  for (int i = 0; i < 50; ++i)
    for (const char* s : seeds) sentences.push_back(s);
  tfm::data::VocabOptions options;
  options.size = 80;
  tfm::data::Vocab::train(sentences, options, g_model_path);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const char* rest = reinterpret_cast<const char*>(data) + 1;
  const size_t rest_size = size - 1;
  try {
    if (data[0] % 2 == 0) {
      static const tfm::data::Vocab vocab = tfm::data::Vocab::load(g_model_path);
      static const tfm::data::Tokenizer tokenizer = tfm::data::Tokenizer::sentencepiece(g_model_path);
      std::string text;
      tfm::fuzz::write_file(g_text_path, rest, rest_size);
      for (const std::string& line : tfm::data::read_lines(g_text_path)) {
        const std::vector<int> ids = vocab.encode(line);
        check_ids(ids, vocab.size());
        vocab.decode(ids);
        text += line + "\n";
      }
      const std::vector<int> ids = tokenizer.encode(text);
      check_ids(ids, tokenizer.size());
      tokenizer.decode(ids);
    } else {
      tfm::fuzz::write_file(g_input_path, rest, rest_size);
      const tfm::data::Vocab vocab = tfm::data::Vocab::load(g_input_path);
      check_ids(vocab.encode("Ein Mann fährt Fahrrad."), vocab.size());
    }
  } catch (const tfm::Error&) {
  }
  return 0;
}
