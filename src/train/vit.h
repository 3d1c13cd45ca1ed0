#pragma once
// Training (tfm::VitTask) and evaluating a Vision Transformer on an MNIST-style image set
// (Fashion-MNIST from the Debian package dataset-fashion-mnist by default) or a folder of
// PNG and JPEG images (data/image_folder.h), resized to the model's size as Pillow does.
// Pixels are scaled to [-1, 1]; held-out images validate (accuracy picks the best
// checkpoint); training images are flipped left-right at random. The loop is the shared
// Trainer's.
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "data/image_set.h"
#include "models/stack_config.h"
#include "models/vit.h"
#include "tfm/training.h"
#include "train/trainer.h"

namespace tfm::training {

using tfm::kFashionMnistDir;

// Patch 7 (16 patches + [CLS]), 6 layers, 128 dims, 4 heads, feed-forward 256.
models::StackConfig default_vit();


tfm::TrainingResult run_vit_training(const TrainerOptions& options, const tfm::VitTask& task, std::ostream& out);

// Images [indices] as a batch [n, channels, rows, cols] scaled to [-1, 1], each mirrored
// left-right where flip[i] is set (flip may be empty).
Tensor image_batch(const data::ImageSet& set, const std::vector<int64_t>& indices, const std::vector<bool>& flip = {});

struct Evaluation {
  int64_t images = 0, correct = 0;
  double loss = 0;
  std::vector<int64_t> confusion;  // [true class][predicted class], classes x classes
  bool finite = true;              // every class score was (a report needs it; training's validation records the NaN)
  double accuracy() const { return images ? static_cast<double>(correct) / static_cast<double>(images) : 0.0; }
};

// The names of the classes of the MNIST-style files in `data_dir`: Fashion-MNIST's for a
// directory of 10 classes named *fashion* (the Debian package's), else none.
std::vector<std::string> idx_class_names(const std::string& data_dir, int64_t classes);

// Accuracy, mean cross-entropy and confusion matrix of `model` on images [first, first + count) of `set`.
Evaluation evaluate_images(models::ViT& model, const data::ImageSet& set, int64_t first, int64_t count);

// The family's settings of the training loop (tfm::VitTask::training_defaults()).
tfm::TrainingOptions vit_training_defaults();

}  // namespace tfm::training
