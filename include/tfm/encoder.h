#pragma once
// tfm::Encoder: sentence vectors from an encoder trained by `tfm bert train`, as
// `tfm embed` writes them.
//
//   tfm::Encoder encoder("runs/bert/best.safetensors");
//   tfm::Embeddings e = encoder.embed({"To be, or not to be", "that is the question"});
//   // e.values: [e.count, e.dim], row-major
//
// Safe to call from many threads at once.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tfm/attention.h"
#include "tfm/model_options.h"

#include "tfm/export.h"

namespace tfm {

struct Embeddings {
  int64_t count = 0, dim = 0;
  std::vector<float> values;  // [count, dim], row-major
  int64_t truncated = 0;      // sentences longer than the model's input, cut to fit
};

class TFM_API Encoder {
 public:
  // Loads the checkpoint; throws std::runtime_error with one line saying what is wrong.
  explicit Encoder(const std::string& checkpoint, const ModelOptions& options = {});
  ~Encoder();
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;

  // One vector per sentence: "mean" of its token vectors, or the "cls" vector.
  Embeddings embed(const std::vector<std::string>& sentences, const std::string& pool = "mean") const;
  // Every layer's and head's attention over the sentence's tokens ([CLS] first, then
  // at most max_tokens()), on the calling thread.
  TextAttention attention(const std::string& sentence) const;
  int64_t dim() const;
  int64_t max_tokens() const;  // a sentence's tokens past this many are cut off

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tfm
