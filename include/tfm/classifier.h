#pragma once
// tfm::Classifier: a Vision Transformer from `tfm vit train` or Hugging Face (ViT, DeiT),
// classifying images or giving their feature vectors.
//
//   tfm::Classifier classifier("runs/vit/best.safetensors");
//   tfm::Classification c = classifier.classify(pixels, 2);  // two 28x28 grey images, u8
//   // c.labels[i]: the most likely class; c.probabilities: [count, classes]
//   c = classifier.classify(classifier.pixels_of(tfm::read_image("shoe.png")), 1);  // an image file
//
// Safe to call from many threads at once.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tfm/attention.h"
#include "tfm/encoder.h"
#include "tfm/images.h"
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
  // Refused for a base without a classifier (has_classifier()).
  Classification classify(const std::vector<uint8_t>& pixels, int64_t count) const;
  // One feature vector of dim() numbers per image: "pooler", the pooler's output (Hugging
  // Face's pooler_output: tanh(dense([CLS]))), or "cls", the final [CLS] state after the
  // last LayerNorm (last_hidden_state[:, 0]); "" chooses pooler where the model has one.
  Embeddings embed(const std::vector<uint8_t>& pixels, int64_t count, const std::string& pool = "") const;
  // Every layer's and head's attention for one image (channels() x image_size() x
  // image_size() pixels): queries and keys are [CLS], then the patches row by row.
  AttentionWeights attention(const std::vector<uint8_t>& pixels) const;
  // `image` as the model takes it (channels() x image_size() x image_size(), channel-major),
  // prepared as its training images were: converted to its channels (Pillow's convert) and,
  // for a model trained on an image folder, resized (Pillow's bilinear filter); for a Hugging
  // Face model, resized and cropped as its preprocessor_config.json says (its normalisation
  // then comes in classify and embed). A model trained on MNIST-style files, which were
  // never resized, takes only images of its size.
  std::vector<uint8_t> pixels_of(const Image& image) const;
  int64_t image_size() const;
  int64_t patch_size() const;
  int64_t channels() const;
  int64_t classes() const;  // 0 for a base
  bool has_classifier() const;  // false for a base (ViTModel, DeiTModel): features only
  bool has_pooler() const;
  int64_t dim() const;  // the feature vectors' size
  // What classify says of a base, after its path.
  static constexpr const char* kNoClassifier =
      "is a ViT base without a classifier (ViTModel); fine-tune one first (tfm vit train --init-from MODEL --data IMAGE_FOLDER), "
      "or take its image features (tfm embed --model MODEL --image FILE)";
  // The class names of a model trained on an image folder, in label order; empty for one
  // trained on MNIST-style files, whose classes are numbers.
  const std::vector<std::string>& class_names() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tfm
