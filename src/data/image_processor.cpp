#include "data/image_processor.h"

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

// "size": one number for both sides, or {"height": H, "width": W}.
void read_size(const json& j, ImageProcessor& p, const std::string& origin) {
  if (!j.contains("size")) return;
  const json& s = j["size"];
  if (s.is_number()) {
    p.height = p.width = side(s, "'size'", origin);
    return;
  }
  TFM_CHECK(s.is_object() && s.contains("height") && s.contains("width"),
            origin << ": 'size' must be {\"height\": H, \"width\": W} or a number, not " << s.dump()
                   << " (ViTImageProcessor's resize takes both sides)");
  p.height = side(s["height"], "'size' height", origin), p.width = side(s["width"], "'size' width", origin);
}

Resample read_resample(const json& j, const std::string& origin) {
  if (!j.contains("resample")) return Resample::Bilinear;
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

void check_type(const json& j, const std::string& origin) {
  for (const char* key : {"image_processor_type", "feature_extractor_type"}) {
    if (!j.contains(key)) continue;
    const json& type = j[key];
    TFM_CHECK(type == "ViTImageProcessor" || type == "ViTFeatureExtractor",
              origin << ": " << key << " " << type.dump() << " is not ViTImageProcessor, whose steps (resize, rescale, normalise) tfm reproduces");
  }
}

// One channel-`c` sample rescaled and normalised: the rescale as NumPy multiplies a uint8
// array by a Python float (in double), rounded to float32, the normalisation in float32.
float value_of(const ImageProcessor& p, uint8_t v, size_t c) {
  float x = p.do_rescale ? static_cast<float>(v * p.rescale_factor) : static_cast<float>(v);
  if (p.do_normalize) x = (x - p.image_mean[p.image_mean.size() == 1 ? 0 : c]) / p.image_std[p.image_std.size() == 1 ? 0 : c];
  return x;
}

}  // namespace

ImageProcessor ImageProcessor::from_json(const std::string& text, const std::string& origin) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  TFM_CHECK(j.is_object(), origin << ": not a JSON object");
  check_type(j, origin);
  ImageProcessor p;
  p.do_resize = flag(j, "do_resize", p.do_resize, origin);
  read_size(j, p, origin);
  p.resample = read_resample(j, origin);
  p.do_rescale = flag(j, "do_rescale", p.do_rescale, origin);
  if (j.contains("rescale_factor")) p.rescale_factor = number(j["rescale_factor"], "'rescale_factor'", origin);
  p.do_normalize = flag(j, "do_normalize", p.do_normalize, origin);
  p.image_mean = per_channel(j, "image_mean", p.image_mean, origin);
  p.image_std = per_channel(j, "image_std", p.image_std, origin);
  for (float s : p.image_std) TFM_CHECK(s != 0.0f, origin << ": 'image_std' holds a zero");
  return p;
}

ImageProcessor ImageProcessor::read(const std::string& path) {
  io::check_input_file(path, int64_t{1} << 20, "image processor configuration");
  return from_json(read_file(path), path);
}

std::vector<float> ImageProcessor::preprocess(const Image& image, int64_t channels) const {
  for (const std::vector<float>* v : {&image_mean, &image_std})
    TFM_CHECK(v->size() == 1 || static_cast<int64_t>(v->size()) == channels,
              "the image processor's mean and standard deviation have " << v->size() << " values for " << channels << " channels");
  const Image converted = with_channels(image, channels);
  const std::vector<uint8_t> planes = channel_major(do_resize ? resize(converted, height, width, resample) : converted);
  const size_t plane = planes.size() / static_cast<size_t>(channels);
  std::vector<float> out(planes.size());  // [channels, height, width]
  for (size_t i = 0; i < out.size(); ++i) out[i] = value_of(*this, planes[i], i / plane);
  return out;
}

}  // namespace tfm::data
