#pragma once
// Image folders, torchvision's ImageFolder convention: DIR/<class>/<image>. The classes
// are the sub-folders in sorted order; a class's images are its PNG and JPEG files
// (.png, .jpg, .jpeg in any case; in its folder or below it) in sorted order. Other
// files, and names starting with a dot, are passed over.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/image_set.h"

namespace tfm::data {

struct ImageFolder {
  std::string dir;
  std::vector<std::string> classes;  // sorted
  std::vector<std::string> files;    // class by class
  std::vector<int32_t> labels;       // files[i]'s class: an index into `classes`
  // Entries named as images that are not files (FIFOs, devices, directories, broken or
  // looping links), left out: the training log names them.
  std::vector<std::string> skipped;
};

// Refuses a directory without class folders and a class folder without images.
ImageFolder scan_image_folder(const std::string& dir);

// The folder with its labels indexing `classes` (a model's) instead of its own; a class
// folder not among them is refused, naming `whose` ("the model").
ImageFolder relabelled(ImageFolder folder, const std::vector<std::string>& classes, const std::string& whose);

// {kept, held out}: in each class, `fraction` of the images (0 < fraction < 1) held out,
// evenly spaced in sorted order: with 0.1, the 10th, 20th, ... of each class.
std::pair<ImageFolder, ImageFolder> hold_out(const ImageFolder& folder, double fraction);

// Every image decoded, converted and resized as a ViT takes it (vit_pixels, or a Hugging Face
// model's `processor`, whose images must come out size x size), on every thread; an image
// that cannot be read is an error naming it.
ImageSet load_images(const ImageFolder& folder, int64_t channels, int64_t size, const std::optional<ImageProcessor>& processor = std::nullopt);

}  // namespace tfm::data
