#pragma once
// The IDX format of MNIST and Fashion-MNIST (plain or gzip-compressed): a magic
// number (two zero bytes, a type byte, the number of dimensions), each dimension
// as a big-endian 32-bit count, then the values. Every field is validated: a
// truncated, oversized or foreign file gives one error naming it.
#include <cstdint>
#include <string>
#include <vector>

#include "data/image_set.h"

namespace tfm::data {

struct IdxArray {
  std::vector<int64_t> shape;
  std::vector<uint8_t> values;  // unsigned bytes (type 0x08), the only type the image sets use
};

IdxArray parse_idx(const std::string& bytes, const std::string& origin);
IdxArray read_idx(const std::string& path);

// Reads an images file and its labels file; checks that they agree and that every
// label is below `classes`.
ImageSet read_image_set(const std::string& images_path, const std::string& labels_path, int64_t classes);

// Whether `dir` holds an MNIST-style image set (train- or t10k-images-idx3-ubyte[.gz]).
bool holds_idx_files(const std::string& dir);

// The four files of an MNIST-style directory: {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz].
ImageSet read_image_split(const std::string& dir, bool train, int64_t classes);

}  // namespace tfm::data
