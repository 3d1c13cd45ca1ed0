#pragma once
// tfm::Classifier: a Vision Transformer from `tfm vit train`, classifying images.
//
//   tfm::Classifier classifier("runs/vit/best.safetensors");
//   tfm::Classification c = classifier.classify(pixels, 2);  // two 28x28 grey images, u8
//   // c.labels[i]: the most likely class; c.probabilities: [count, classes]
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

struct Classification {
  int64_t count = 0, classes = 0;
  std::vector<int64_t> labels;       // the most likely class of each image
  std::vector<float> probabilities;  // [count, classes], row-major: softmax of the logits
};

class TFM_API Classifier {
 public:
  // Loads the checkpoint; throws std::runtime_error with one line saying what is wrong.
  explicit Classifier(const std::string& checkpoint, const ModelOptions& options = {});
  ~Classifier();
  Classifier(const Classifier&) = delete;
  Classifier& operator=(const Classifier&) = delete;

  // `count` images of channels() x image_size() x image_size() pixels (0-255), one after another.
  Classification classify(const std::vector<uint8_t>& pixels, int64_t count) const;
  // Every layer's and head's attention for one image (channels() x image_size() x
  // image_size() pixels): queries and keys are [CLS], then the patches row by row.
  AttentionWeights attention(const std::vector<uint8_t>& pixels) const;
  int64_t image_size() const;
  int64_t patch_size() const;
  int64_t channels() const;
  int64_t classes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tfm
