#pragma once
// How a Vision Transformer takes an image: tfm's own (vit_pixels), and Hugging Face's
// ViTImageProcessor and DeiTImageProcessor (transformers 4.39) read from a checkpoint's
// preprocessor_config.json.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/image.h"
#include "data/resize.h"

namespace tfm::data {

// A tfm ViT's input: `channels` channels (Pillow's convert), size x size pixels (Pillow's
// bilinear resize), channel-major bytes [channels, size, size]; ops::from_pixels then
// scales them to [-1, 1], as ViTImageProcessor's defaults do.
std::vector<uint8_t> vit_pixels(const Image& image, int64_t channels, int64_t size);

// ViTImageProcessor's and DeiTImageProcessor's preprocess(): resize (Pillow's), centre crop
// (DeiT's), rescale, normalise, channel-major floats. The defaults are ViTImageProcessor's;
// DeiT's (resize to 256 x 256, bicubic, crop to 224 x 224) where the file names DeiT's.
struct ImageProcessor {
  bool deit = false;  // DeiTImageProcessor, which crops; ViTImageProcessor ignores the crop settings
  bool do_resize = true;
  int64_t height = 224, width = 224;  // "size": {"height": H, "width": W}, or one number for both
  int64_t shortest_edge = 0;  // "size": {"shortest_edge": N}: the short side to N, the aspect kept (0: height x width)
  Resample resample = Resample::Bilinear;  // "resample": 2 (bilinear) or 3 (bicubic)
  bool do_center_crop = false;
  int64_t crop_height = 224, crop_width = 224;  // "crop_size", as "size"
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255;
  bool do_normalize = true;
  std::vector<float> image_mean{0.5f, 0.5f, 0.5f}, image_std{0.5f, 0.5f, 0.5f};  // one per channel, or one for all

  // The settings of a preprocessor_config.json; keys of no step (e.g. _valid_processor_keys)
  // are ignored, a processor type other than ViT's or DeiT's and a filter other than 2 or 3
  // refused. A file naming no type is the model's: `model_type` "deit" gives DeiT's.
  static ImageProcessor from_json(const std::string& json, const std::string& origin, const std::string& model_type = "vit");
  static ImageProcessor read(const std::string& path, const std::string& model_type = "vit");
  // Every setting, as from_json reads it back (what a converted checkpoint records).
  std::string to_json() const;

  // The steps on 8-bit pixels: the image converted to `channels` (the model's: 3 for RGB, as
  // Hugging Face's pipelines convert("RGB")), resized and cropped; channel-major bytes.
  std::vector<uint8_t> pixels(const Image& image, int64_t channels = 3) const;
  // The rest, on one byte of channel `c`: rescaled and normalised as NumPy computes them
  // there: the rescale in double, rounded to float, the normalisation in float.
  float value(uint8_t v, size_t c) const;
  // value() of every byte of images [n, channels, H, W], channel-major as pixels() gives them.
  std::vector<float> normalise(const std::vector<uint8_t>& images, int64_t channels, int64_t height, int64_t width) const;
  // pixel_values for one image: [channels, H, W] floats, both of the above.
  std::vector<float> preprocess(const Image& image, int64_t channels = 3) const;
  // The side lengths pixels() gives an image of `height` x `width`.
  std::pair<int64_t, int64_t> output_size(int64_t height, int64_t width) const;
};

}  // namespace tfm::data
