#pragma once
// Small deterministic datasets that tests and the GPU check train on.
#include <cstdint>
#include <string>
#include <vector>

#include "support/process.h"

namespace tfm::testing {

// 300 sentence pairs over a 40-word lexicon: the "translation" maps each word and
// reverses the order, so the task is learnable and the data deterministic. Files (and a
// 60-piece SentencePiece vocabulary over both sides) in a directory of its own.
struct SyntheticCorpus {
  TempDir dir;
  std::string src, tgt, vocab;
  SyntheticCorpus();
};

// An IDX file's bytes: the magic (two zeros, the type, the rank), the dimensions, the values.
std::string idx_bytes(const std::vector<uint32_t>& shape, const std::vector<uint8_t>& values, uint8_t type = 0x08);

// An image set where the class is which quadrant holds a bright square (8x8 images):
// DIR/SPLIT-images-idx3-ubyte and DIR/SPLIT-labels-idx1-ubyte, Fashion-MNIST's layout.
void write_quadrant_set(const std::string& dir, const std::string& split, int count, uint64_t seed);

}  // namespace tfm::testing
