#pragma once
// Pillow's Image.resize on 8-bit images, reproduced exactly (Pillow 9.4's
// libImaging/Resample.c), since a model trained on images resized by Pillow (every
// Hugging Face image processor) must be given pixels resized the same way.
//
// A separable convolution: the horizontal pass, then the vertical one, each output
// sample a weighted sum of the input samples under the filter centred on it. When
// shrinking, the filter is widened by the shrink factor (antialiasing: every input pixel
// contributes). Weights are normalised to sum to 1, then held in fixed point with 22
// fractional bits; each sum is rounded and clipped to 0..255, and the intermediate image
// between the passes is 8-bit too.
#include <cstdint>

#include "data/image.h"

namespace tfm::data {

// The filters by their numbers in PIL.Image.Resampling (an image processor's "resample").
enum class Resample { Bilinear = 2, Bicubic = 3 };

// `image` as height x width pixels (Pillow's resize((width, height), filter)).
Image resize(const Image& image, int64_t height, int64_t width, Resample filter = Resample::Bilinear);

}  // namespace tfm::data
