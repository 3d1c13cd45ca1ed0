#pragma once
// How a Vision Transformer takes an image: tfm's own (vit_pixels), and Hugging Face's
// ViTImageProcessor (transformers 4.39) read from a checkpoint's preprocessor_config.json.
#include <cstdint>
#include <string>
#include <vector>

#include "data/image.h"
#include "data/resize.h"

namespace tfm::data {

// A tfm ViT's input: `channels` channels (Pillow's convert), size x size pixels (Pillow's
// bilinear resize), channel-major bytes [channels, size, size]; ops::from_pixels then
// scales them to [-1, 1], as ViTImageProcessor's defaults do.
std::vector<uint8_t> vit_pixels(const Image& image, int64_t channels, int64_t size);

// ViTImageProcessor's preprocess(): resize (Pillow's), rescale, normalise, channel-major
// floats. The defaults are its own.
struct ImageProcessor {
  bool do_resize = true;
  int64_t height = 224, width = 224;  // "size": {"height": H, "width": W}, or one number for both
  Resample resample = Resample::Bilinear;  // "resample": 2 (bilinear) or 3 (bicubic)
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255;
  bool do_normalize = true;
  std::vector<float> image_mean{0.5f, 0.5f, 0.5f}, image_std{0.5f, 0.5f, 0.5f};  // one per channel, or one for all

  // The settings of a preprocessor_config.json; keys of no step (e.g. _valid_processor_keys)
  // are ignored, a processor type other than ViT's and a filter other than 2 or 3 refused.
  static ImageProcessor from_json(const std::string& json, const std::string& origin);
  static ImageProcessor read(const std::string& path);

  // pixel_values for one image: [channels, height, width] floats, the image first converted to
  // `channels` (the model's: 3 for RGB, as Hugging Face's pipelines convert("RGB")). Computed as
  // NumPy does there: the rescale in double, rounded to float, the normalisation in float.
  std::vector<float> preprocess(const Image& image, int64_t channels = 3) const;
};

}  // namespace tfm::data
