#pragma once
// Training and evaluating a Vision Transformer on an MNIST-style image set
// (Fashion-MNIST from the Debian package dataset-fashion-mnist by default).
// Pixels are scaled to [-1, 1]; the last `valid_images` training images are held
// out for validation (accuracy picks the best checkpoint); training images are
// flipped left-right at random. The loop is the shared Trainer's.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "data/idx.h"
#include "models/stack_config.h"
#include "models/vit.h"
#include "train/trainer.h"

namespace tfm::train {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct VitOptions {
  std::string data_dir = kFashionMnistDir;
  models::StackConfig model = default_model();
  std::string config_origin = "model configuration";  // what errors in `model` name (e.g. its --config file)
  int64_t batch = 128;
  int64_t valid_images = 5000;
  bool flip = true;
  TrainerOptions trainer = default_trainer();

  // Patch 7 (16 patches + [CLS]), 6 layers, 128 dims, 4 heads, feed-forward 256.
  static models::StackConfig default_model();
  // AdamW 1e-3, weight decay 0.05, 300 warm-up steps, cosine decay over 16 epochs.
  static TrainerOptions default_trainer();
};

int run_vit_training(const VitOptions& options, std::ostream& out);

// Images [indices] as a batch [n, 1, rows, cols] scaled to [-1, 1], each mirrored
// left-right where flip[i] is set (flip may be empty).
Tensor image_batch(const data::ImageSet& set, const std::vector<int64_t>& indices, const std::vector<bool>& flip = {});

struct Evaluation {
  int64_t images = 0, correct = 0;
  double loss = 0;
  std::vector<int64_t> confusion;  // [true class][predicted class], classes x classes
  double accuracy() const { return images ? static_cast<double>(correct) / static_cast<double>(images) : 0.0; }
};

// Accuracy, mean cross-entropy and confusion matrix of `model` on images [first, first + count) of `set`.
Evaluation evaluate_images(models::ViT& model, const data::ImageSet& set, int64_t first, int64_t count);

}  // namespace tfm::train
