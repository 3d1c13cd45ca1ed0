#pragma once
// Labelled images of one size, as a ViT trains on them: an MNIST-style set (data/idx.h)
// or an image folder's images resized (data/image_folder.h).
#include <cstdint>
#include <optional>
#include <vector>

#include "data/image_processor.h"

namespace tfm::data {

struct ImageSet {
  int64_t count = 0, channels = 1, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // [count, channels, rows, cols]
  std::vector<int32_t> labels;  // [count]: class indices
  // A Hugging Face ViT's processor, which made the pixels and normalises them (its mean and
  // standard deviation); none: tfm's own pixels, normalised to [-1, 1] (ops::from_pixels).
  std::optional<ImageProcessor> processor;
};

}  // namespace tfm::data
