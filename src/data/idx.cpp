#include "data/idx.h"

#include <filesystem>

#include "data/text.h"
#include "tensor/error.h"

namespace tfm::data {

IdxArray parse_idx(const std::string& bytes, const std::string& origin) {
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  TFM_CHECK(bytes.size() >= 4 && b[0] == 0 && b[1] == 0, origin << ": not an IDX file (bad magic number)");
  TFM_CHECK(b[2] == 0x08, origin << ": IDX value type 0x" << std::hex << int(b[2]) << " is not supported (expected unsigned bytes, 0x08)");
  const int dims = b[3];
  TFM_CHECK(dims >= 1 && dims <= 4, origin << ": IDX file with " << dims << " dimensions (expected 1 to 4)");
  TFM_CHECK(bytes.size() >= 4 + 4 * static_cast<size_t>(dims), origin << ": truncated IDX header");
  IdxArray a;
  uint64_t total = 1;
  for (int d = 0; d < dims; ++d) {
    const unsigned char* p = b + 4 + 4 * d;
    const uint64_t n = (uint64_t{p[0]} << 24) | (uint64_t{p[1]} << 16) | (uint64_t{p[2]} << 8) | p[3];
    TFM_CHECK(n > 0, origin << ": IDX dimension " << d << " is zero");
    total *= n;
    TFM_CHECK(total <= (uint64_t{1} << 34), origin << ": IDX dimensions are implausibly large");
    a.shape.push_back(static_cast<int64_t>(n));
  }
  const size_t header = 4 + 4 * static_cast<size_t>(dims);
  TFM_CHECK(bytes.size() - header == total, origin << ": IDX header promises " << total << " values but the file holds "
                                                   << bytes.size() - header << (bytes.size() - header < total ? " (truncated)" : ""));
  a.values.assign(b + header, b + bytes.size());
  return a;
}

IdxArray read_idx(const std::string& path) { return parse_idx(read_file(path), path); }

ImageSet read_image_set(const std::string& images_path, const std::string& labels_path, int64_t classes) {
  IdxArray images = read_idx(images_path), labels = read_idx(labels_path);
  TFM_CHECK(images.shape.size() == 3, images_path << ": expected images [count, rows, cols], found " << images.shape.size() << " dimensions");
  TFM_CHECK(labels.shape.size() == 1, labels_path << ": expected labels [count], found " << labels.shape.size() << " dimensions");
  TFM_CHECK(images.shape[0] == labels.shape[0],
            images_path << " holds " << images.shape[0] << " images but " << labels_path << " " << labels.shape[0] << " labels");
  for (size_t i = 0; i < labels.values.size(); ++i)
    TFM_CHECK(labels.values[i] < classes, labels_path << ": label " << int(labels.values[i]) << " of item " << i << " is not below " << classes);
  return {images.shape[0], 1, images.shape[1], images.shape[2], std::move(images.values), {labels.values.begin(), labels.values.end()}, std::nullopt};  // (tfm's own pixels)
}

bool holds_idx_files(const std::string& dir) {
  for (const char* split : {"/train", "/t10k"})
    for (const char* suffix : {"-images-idx3-ubyte", "-images-idx3-ubyte.gz"})
      if (std::filesystem::exists(dir + split + suffix)) return true;
  return false;
}

ImageSet read_image_split(const std::string& dir, bool train, int64_t classes) {
  const std::string prefix = dir + "/" + (train ? "train" : "t10k");
  auto find = [&](const std::string& stem) {
    for (const std::string& name : {prefix + stem + ".gz", prefix + stem})
      if (std::filesystem::exists(name)) return name;
    throw Error(prefix + stem + "[.gz]: not found (Fashion-MNIST comes with the Debian package dataset-fashion-mnist)");
  };
  return read_image_set(find("-images-idx3-ubyte"), find("-labels-idx1-ubyte"), classes);
}

}  // namespace tfm::data
