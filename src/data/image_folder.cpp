#include "data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <filesystem>

#include "data/image.h"
#include "data/image_processor.h"
#include "tensor/error.h"
#include "threads/parallel.h"

namespace tfm::data {

namespace fs = std::filesystem;

namespace {

bool hidden(const fs::path& p) { return p.filename().string().starts_with("."); }

bool image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

// The images in `dir` and below it, sorted (symbolic links to files followed, to folders
// not: a loop cannot trap the walk); entries named as images that are not files go to `skipped`.
std::vector<std::string> images_under(const fs::path& dir, std::vector<std::string>& skipped) {
  std::vector<std::string> files;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    if (hidden(it->path())) {
      it.disable_recursion_pending();
      continue;
    }
    if (!image_name(it->path())) continue;
    std::error_code ec;
    (fs::is_regular_file(it->path(), ec) ? files : skipped).push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> class_folders(const fs::path& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.is_directory() && !hidden(e.path())) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

ImageFolder scan(const std::string& dir) {
  TFM_CHECK(fs::is_directory(dir), dir << ": not a directory");
  ImageFolder f{dir, class_folders(dir), {}, {}, {}};
  TFM_CHECK(!f.classes.empty(), dir << ": no class folders (an image folder holds " << dir << "/<class>/<image>.png|jpg|jpeg)");
  for (size_t c = 0; c < f.classes.size(); ++c) {
    const std::vector<std::string> files = images_under(fs::path(dir) / f.classes[c], f.skipped);
    TFM_CHECK(!files.empty(), (fs::path(dir) / f.classes[c]).string() << ": a class folder without images (.png, .jpg or .jpeg)");
    f.files.insert(f.files.end(), files.begin(), files.end());
    f.labels.insert(f.labels.end(), files.size(), static_cast<int32_t>(c));
  }
  std::sort(f.skipped.begin(), f.skipped.end());
  return f;
}

// The images of `f` at `indices`, in that order.
ImageFolder subset(const ImageFolder& f, const std::vector<size_t>& indices) {
  ImageFolder out{f.dir, f.classes, {}, {}, f.skipped};
  for (size_t i : indices) out.files.push_back(f.files[i]), out.labels.push_back(f.labels[i]);
  return out;
}

}  // namespace

ImageFolder scan_image_folder(const std::string& dir) {
  try {
    return scan(dir);
  } catch (const fs::filesystem_error& e) {  // a folder that cannot be listed
    throw Error(e.path1().string() + ": cannot list the image folder (" + e.code().message() + ")");
  }
}

ImageFolder relabelled(ImageFolder folder, const std::vector<std::string>& classes, const std::string& whose) {
  for (int32_t& label : folder.labels) {
    const std::string& name = folder.classes[static_cast<size_t>(label)];
    const auto it = std::find(classes.begin(), classes.end(), name);
    TFM_CHECK(it != classes.end(), (fs::path(folder.dir) / name).string() << ": " << whose << " has no class '" << name << "'");
    label = static_cast<int32_t>(it - classes.begin());
  }
  folder.classes = classes;
  return folder;
}

std::pair<ImageFolder, ImageFolder> hold_out(const ImageFolder& folder, double fraction) {
  TFM_CHECK(fraction > 0 && fraction < 1, "the fraction of images held out must be between 0 and 1, not " << fraction);
  std::vector<size_t> kept, held;
  for (size_t i = 0, place = 0; i < folder.files.size(); ++i) {
    place = i > 0 && folder.labels[i] == folder.labels[i - 1] ? place + 1 : 0;  // the image's place in its class
    const bool out = std::floor(static_cast<double>(place + 1) * fraction) > std::floor(static_cast<double>(place) * fraction);
    (out ? held : kept).push_back(i);
  }
  return {subset(folder, kept), subset(folder, held)};
}

ImageSet load_images(const ImageFolder& folder, int64_t channels, int64_t size, const std::optional<ImageProcessor>& processor) {
  const int64_t n = static_cast<int64_t>(folder.files.size()), bytes = channels * size * size;
  ImageSet set{n, channels, size, size, std::vector<uint8_t>(static_cast<size_t>(n * bytes)), folder.labels, processor};
  std::vector<std::string> errors(static_cast<size_t>(n));  // an exception must not leave an OpenMP region
  parallel_for(n, n > 1, [&](int64_t i) {
    try {
      const std::string& file = folder.files[static_cast<size_t>(i)];
      const std::vector<uint8_t> pixels = processor ? processor->pixels(read_image(file), channels) : vit_pixels(read_image(file), channels, size);
      TFM_CHECK(static_cast<int64_t>(pixels.size()) == bytes, file << ": the model's image processor does not make it " << size << "x" << size << " pixels");
      std::copy(pixels.begin(), pixels.end(), set.pixels.begin() + i * bytes);
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(i)] = e.what();
    }
  });
  for (const std::string& e : errors) TFM_CHECK(e.empty(), e);
  return set;
}

}  // namespace tfm::data
