#include "support/datasets.h"

#include "data/vocab.h"
#include "tensor/rng.h"

namespace tfm::testing {

SyntheticCorpus::SyntheticCorpus() : src(dir.path("train.src")), tgt(dir.path("train.tgt")), vocab(dir.path("vocab.model")) {
  const char* a[] = {"haus", "baum", "katze", "hund", "blau", "rot", "gross", "klein", "lauft", "sitzt"};
  const char* b[] = {"house", "tree", "cat", "dog", "blue", "red", "big", "small", "runs", "sits"};
  Rng rng(5);
  std::string s, t;
  std::vector<std::string> both;
  for (int i = 0; i < 300; ++i) {
    std::vector<int> words(static_cast<size_t>(rng.randint(2, 7)));
    for (int& w : words) w = static_cast<int>(rng.randint(0, 10));
    std::string ls, lt;
    for (size_t k = 0; k < words.size(); ++k) {
      ls += (k ? " " : "") + std::string(a[words[k]]);
      lt += (k ? " " : "") + std::string(b[words[words.size() - 1 - k]]);
    }
    s += ls + "\n", t += lt + "\n";
    both.push_back(ls), both.push_back(lt);
  }
  write_file(src, s);
  write_file(tgt, t);
  data::VocabOptions vo;
  vo.size = 60;
  data::Vocab::train(both, vo, vocab);
}

std::string idx_bytes(const std::vector<uint32_t>& shape, const std::vector<uint8_t>& values, uint8_t type) {
  std::string b{'\0', '\0', static_cast<char>(type), static_cast<char>(shape.size())};
  for (uint32_t n : shape)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<char>((n >> s) & 0xff));
  b.append(values.begin(), values.end());
  return b;
}

void write_quadrant_set(const std::string& dir, const std::string& split, int count, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> pixels, labels;
  for (int i = 0; i < count; ++i) {
    const int label = static_cast<int>(rng.randint(0, 4));
    for (int y = 0; y < 8; ++y)
      for (int x = 0; x < 8; ++x) {
        const bool bright = (y / 4) * 2 + (x / 4) == label && y % 4 > 0 && x % 4 > 0;
        pixels.push_back(static_cast<uint8_t>(bright ? 200 + rng.randint(0, 55) : rng.randint(0, 60)));
      }
    labels.push_back(static_cast<uint8_t>(label));
  }
  write_file(dir + "/" + split + "-images-idx3-ubyte", idx_bytes({static_cast<uint32_t>(count), 8, 8}, pixels));
  write_file(dir + "/" + split + "-labels-idx1-ubyte", idx_bytes({static_cast<uint32_t>(count)}, labels));
}

}  // namespace tfm::testing
