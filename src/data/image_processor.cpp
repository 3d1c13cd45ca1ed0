#include "data/image_processor.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "data/text.h"
#include "io/input_file.h"
#include "tensor/error.h"

namespace tfm::data {

std::vector<uint8_t> vit_pixels(const Image& image, int64_t channels, int64_t size) {
  return channel_major(resize(with_channels(image, channels), size, size, Resample::Bilinear));
}

namespace {

using nlohmann::json;

bool flag(const json& j, const char* key, bool fallback, const std::string& origin) {
  if (!j.contains(key)) return fallback;
  TFM_CHECK(j[key].is_boolean(), origin << ": '" << key << "' must be true or false, not " << j[key].dump());
  return j[key].get<bool>();
}

double number(const json& v, const std::string& what, const std::string& origin) {
  TFM_CHECK(v.is_number() && std::isfinite(v.get<double>()), origin << ": " << what << " must be a number, not " << v.dump());
  return v.get<double>();
}

int64_t side(const json& v, const std::string& what, const std::string& origin) {
  TFM_CHECK(v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= 8192,
            origin << ": " << what << " must be a whole number from 1 to 8192, not " << v.dump());
  return v.get<int64_t>();
}

// A "size" or "crop_size": one number for both sides, {"height": H, "width": W}, or (size
// only) {"shortest_edge": N}.
void read_sides(const json& j, const char* key, int64_t& height, int64_t& width, int64_t* shortest, const std::string& origin) {
  if (!j.contains(key)) return;
  const json& s = j[key];
  const std::string name = std::string("'") + key + "'";
  if (s.is_number()) {
    height = width = side(s, name, origin);
    return;
  }
  if (shortest && s.is_object() && s.size() == 1 && s.contains("shortest_edge")) {
    *shortest = side(s["shortest_edge"], name + " shortest_edge", origin);
    return;
  }
  TFM_CHECK(s.is_object() && s.contains("height") && s.contains("width"),
            origin << ": " << name << " must be {\"height\": H, \"width\": W}" << (shortest ? ", {\"shortest_edge\": N}" : "")
                   << " or a number, not " << s.dump() << " (other forms are not supported)");
  height = side(s["height"], name + " height", origin), width = side(s["width"], name + " width", origin);
}

Resample read_resample(const json& j, Resample fallback, const std::string& origin) {
  if (!j.contains("resample")) return fallback;
  const json& r = j["resample"];
  static const char* const kNames[] = {"nearest", "Lanczos", "bilinear", "bicubic", "box", "Hamming"};
  const bool known = r.is_number_integer() && r.get<int64_t>() >= 0 && r.get<int64_t>() <= 5;
  TFM_CHECK(known && (r == 2 || r == 3), origin << ": 'resample' " << r.dump() << (known ? std::string(" (") + kNames[r.get<int>()] + ")" : "")
                                                << " is not supported: tfm resizes with Pillow's bilinear (2) or bicubic (3) filter");
  return static_cast<Resample>(r.get<int>());
}

// A value per channel: a list, or one number for every channel.
std::vector<float> per_channel(const json& j, const char* key, std::vector<float> fallback, const std::string& origin) {
  if (!j.contains(key)) return fallback;
  const json& v = j[key];
  if (!v.is_array()) return {static_cast<float>(number(v, std::string("'") + key + "'", origin))};
  TFM_CHECK(!v.empty() && v.size() <= 16, origin << ": '" << key << "' must hold 1 to 16 numbers, not " << v.size());
  std::vector<float> out;
  for (const json& x : v) out.push_back(static_cast<float>(number(x, std::string("each of '") + key + "'", origin)));
  return out;
}

// Whether the file names DeiT's processor (the model's own where it names none, as
// AutoImageProcessor falls back on the model_type); any other type is refused.
bool is_deit(const json& j, const std::string& model_type, const std::string& origin) {
  bool deit = model_type == "deit";
  for (const char* key : {"image_processor_type", "feature_extractor_type"}) {
    if (!j.contains(key)) continue;
    const json& type = j[key];
    const bool vit = type == "ViTImageProcessor" || type == "ViTFeatureExtractor";
    deit = type == "DeiTImageProcessor" || type == "DeiTFeatureExtractor";
    TFM_CHECK(vit || deit, origin << ": " << key << " " << type.dump() << " is not supported: tfm reproduces ViTImageProcessor and "
                                     "DeiTImageProcessor (resize, centre crop, rescale, normalise)");
  }
  return deit;
}

// DeiTImageProcessor's defaults where they differ from ViTImageProcessor's.
void deit_defaults(ImageProcessor& p) {
  p.deit = true, p.do_center_crop = true;
  p.height = p.width = 256;
  p.resample = Resample::Bicubic;
}

// The resize's size: height x width, or (shortest_edge) transformers' get_resize_output_image_size
// with default_to_square false: the short side to N, the long one N * long / short rounded down.
std::pair<int64_t, int64_t> resized_size(const ImageProcessor& p, int64_t h, int64_t w) {
  if (!p.shortest_edge) return {p.height, p.width};
  const double n = static_cast<double>(p.shortest_edge);
  const int64_t longer = static_cast<int64_t>(n * static_cast<double>(std::max(h, w)) / static_cast<double>(std::min(h, w)));
  return w <= h ? std::pair{longer, p.shortest_edge} : std::pair{p.shortest_edge, longer};
}

// transformers' center_crop on an image at least as large: the offsets rounded down.
Image center_crop(const Image& in, int64_t height, int64_t width) {
  TFM_CHECK(in.height >= height && in.width >= width, "an image of " << in.width << "x" << in.height << " pixels is smaller than the image processor's "
                                                                     << "crop_size " << width << "x" << height << " (transformers pads it with zeros; tfm does not)");
  const int64_t top = (in.height - height) / 2, left = (in.width - width) / 2, C = in.channels;
  Image out{height, width, C, {}};
  for (int64_t y = top; y < top + height; ++y) {
    const auto row = in.pixels.begin() + (y * in.width + left) * C;
    out.pixels.insert(out.pixels.end(), row, row + width * C);
  }
  return out;
}

}  // namespace

// One channel-`c` sample rescaled and normalised: the rescale as NumPy multiplies a uint8
// array by a Python float (in double), rounded to float32, the normalisation in float32.
float ImageProcessor::value(uint8_t v, size_t c) const {
  float x = do_rescale ? static_cast<float>(v * rescale_factor) : static_cast<float>(v);
  if (do_normalize) x = (x - image_mean[image_mean.size() == 1 ? 0 : c]) / image_std[image_std.size() == 1 ? 0 : c];
  return x;
}

ImageProcessor ImageProcessor::from_json(const std::string& text, const std::string& origin, const std::string& model_type) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  TFM_CHECK(j.is_object(), origin << ": not a JSON object");
  ImageProcessor p;
  if (is_deit(j, model_type, origin)) deit_defaults(p);
  p.do_resize = flag(j, "do_resize", p.do_resize, origin);
  read_sides(j, "size", p.height, p.width, &p.shortest_edge, origin);
  p.resample = read_resample(j, p.resample, origin);
  if (p.deit) {  // ViTImageProcessor has no crop step, and ignores these keys
    p.do_center_crop = flag(j, "do_center_crop", p.do_center_crop, origin);
    read_sides(j, "crop_size", p.crop_height, p.crop_width, nullptr, origin);
  }
  p.do_rescale = flag(j, "do_rescale", p.do_rescale, origin);
  if (j.contains("rescale_factor")) p.rescale_factor = number(j["rescale_factor"], "'rescale_factor'", origin);
  p.do_normalize = flag(j, "do_normalize", p.do_normalize, origin);
  p.image_mean = per_channel(j, "image_mean", p.image_mean, origin);
  p.image_std = per_channel(j, "image_std", p.image_std, origin);
  for (float s : p.image_std) TFM_CHECK(s != 0.0f, origin << ": 'image_std' holds a zero");
  return p;
}

ImageProcessor ImageProcessor::read(const std::string& path, const std::string& model_type) {
  io::check_input_file(path, int64_t{1} << 20, "image processor configuration");
  return from_json(read_file(path), path, model_type);
}

std::string ImageProcessor::to_json() const {
  const json size = shortest_edge ? json{{"shortest_edge", shortest_edge}} : json{{"height", height}, {"width", width}};
  json j = {{"image_processor_type", deit ? "DeiTImageProcessor" : "ViTImageProcessor"}, {"do_resize", do_resize}, {"size", size},
            {"resample", static_cast<int>(resample)}, {"do_rescale", do_rescale}, {"rescale_factor", rescale_factor},
            {"do_normalize", do_normalize}, {"image_mean", image_mean}, {"image_std", image_std}};
  if (deit) j.update({{"do_center_crop", do_center_crop}, {"crop_size", {{"height", crop_height}, {"width", crop_width}}}});
  return j.dump();
}

std::pair<int64_t, int64_t> ImageProcessor::output_size(int64_t h, int64_t w) const {
  if (do_center_crop) return {crop_height, crop_width};
  return do_resize ? resized_size(*this, h, w) : std::pair{h, w};
}

std::vector<uint8_t> ImageProcessor::pixels(const Image& image, int64_t channels) const {
  Image x = with_channels(image, channels);
  if (do_resize) {
    const auto [h, w] = resized_size(*this, x.height, x.width);
    x = resize(x, h, w, resample);
  }
  return channel_major(do_center_crop ? center_crop(x, crop_height, crop_width) : x);
}

std::vector<float> ImageProcessor::normalise(const std::vector<uint8_t>& images, int64_t channels, int64_t height, int64_t width) const {
  const size_t plane = static_cast<size_t>(height * width);
  std::vector<float> out(images.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = value(images[i], (i / plane) % static_cast<size_t>(channels));
  return out;
}

std::vector<float> ImageProcessor::preprocess(const Image& image, int64_t channels) const {
  for (const std::vector<float>* v : {&image_mean, &image_std})
    TFM_CHECK(v->size() == 1 || static_cast<int64_t>(v->size()) == channels,
              "the image processor's mean and standard deviation have " << v->size() << " values for " << channels << " channels");
  const std::vector<uint8_t> planes = pixels(image, channels);
  const auto [h, w] = output_size(image.height, image.width);
  return normalise(planes, channels, h, w);
}

}  // namespace tfm::data
