// Image files and how a ViT takes them: PNG and JPEG decoding (every PNG colour type,
// bit depth and interlacing; grey and colour JPEG; CMYK and broken files refused),
// Pillow's convert and bilinear/bicubic resize reproduced exactly, and Hugging Face's
// ViTImageProcessor against the pixel_values transformers computed (the vit_tiny fixture).
#include <gtest/gtest.h>
#include <png.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "data/image.h"
#include "data/image_processor.h"
#include "data/resize.h"
#include "io/safetensors.h"
#include "ops/convert.h"
#include "support/fixture.h"
#include "support/images.h"
#include "support/process.h"

namespace tfm {
namespace {

using data::Image;
using testing::error_of;
using testing::PngSpec;

// A tensor of the fixture's reference.safetensors (F32 or U8) as doubles, and its shape.
struct Reference {
  std::vector<int64_t> shape;
  std::vector<double> values;
};

std::map<std::string, Reference> read_reference(const std::string& path) {
  std::map<std::string, Reference> out;
  for (const auto& [name, t] : io::read_safetensors(path).tensors) {
    const std::vector<float> v = ops::to(t, DType::f32).to_vector();
    out[name] = {t.shape(), std::vector<double>(v.begin(), v.end())};
  }
  return out;
}

Image grey(int64_t h, int64_t w, std::vector<uint8_t> v) { return {h, w, 1, std::move(v)}; }

// ---- decoding ----

TEST(ImageFiles, DecodesTheFixturePngsExactly) {
  const std::map<std::string, Reference> ref = read_reference(testing::hf_fixture_path("vit_tiny/reference.safetensors"));
  for (const char* name : {"image0", "image1"}) {
    const Image image = data::read_image(testing::hf_fixture_path(std::string("vit_tiny/") + name + ".png"));
    const Reference& raw = ref.at(std::string(name) + ".uint8_hwc");
    EXPECT_EQ((std::vector<int64_t>{image.height, image.width, image.channels}), raw.shape) << name;
    EXPECT_EQ(std::vector<double>(image.pixels.begin(), image.pixels.end()), raw.values) << name;
  }
}

// 4 x 3 RGB samples 0, 10, 20, ... as every PNG layout stores them.
std::vector<uint8_t> ramp(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 10);
  return v;
}

std::vector<std::string> rows_of(const std::vector<uint8_t>& v, size_t row_bytes) {
  std::vector<std::string> rows;
  for (size_t i = 0; i < v.size(); i += row_bytes) rows.emplace_back(v.begin() + static_cast<long>(i), v.begin() + static_cast<long>(i + row_bytes));
  return rows;
}

Image decoded(const PngSpec& spec) { return data::decode_image(testing::png_bytes(spec), "test.png"); }

TEST(ImageFiles, DecodesEveryPngColourTypeToGreyOrRgb) {
  const std::vector<uint8_t> rgb = ramp(4 * 3 * 3), g = ramp(4 * 3);
  EXPECT_EQ(decoded({4, 3, PNG_COLOR_TYPE_RGB, 8, false, rows_of(rgb, 12)}).pixels, rgb);
  EXPECT_EQ(decoded({4, 3, PNG_COLOR_TYPE_RGB, 8, true, rows_of(rgb, 12)}).pixels, rgb) << "interlaced";
  const Image gray = decoded({4, 3, PNG_COLOR_TYPE_GRAY, 8, true, rows_of(g, 4)});
  EXPECT_EQ(gray.channels, 1);
  EXPECT_EQ(gray.pixels, g);
  std::vector<uint8_t> rgba, ga;  // alpha 7 everywhere: dropped, not composited
  for (size_t p = 0; p < 12; ++p) rgba.insert(rgba.end(), {rgb[3 * p], rgb[3 * p + 1], rgb[3 * p + 2], 7}), ga.insert(ga.end(), {g[p], 7});
  EXPECT_EQ(decoded({4, 3, PNG_COLOR_TYPE_RGBA, 8, false, rows_of(rgba, 16)}).pixels, rgb);
  const Image grey_alpha = decoded({4, 3, PNG_COLOR_TYPE_GRAY_ALPHA, 8, false, rows_of(ga, 8)});
  EXPECT_EQ(grey_alpha.channels, 1);
  EXPECT_EQ(grey_alpha.pixels, g);
  std::vector<uint8_t> wide;  // 16-bit: the high byte is the sample, the low one is noise
  for (uint8_t v : rgb) wide.insert(wide.end(), {v, static_cast<uint8_t>(255 - v)});
  EXPECT_EQ(decoded({4, 3, PNG_COLOR_TYPE_RGB, 16, true, rows_of(wide, 24)}).pixels, rgb);
  // 16-bit grey, as Pillow reads it (mode I, clipped to 0..255 in L or RGB): 0..255 stays, more is 255 (the review's W7)
  std::vector<uint8_t> grey16, clipped;
  for (size_t p = 0; p < 12; ++p) {
    const int v = p < 6 ? g[p] : 256 * static_cast<int>(p) + 3;
    grey16.insert(grey16.end(), {static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v & 255)});
    clipped.push_back(static_cast<uint8_t>(std::min(v, 255)));
  }
  EXPECT_EQ(decoded({4, 3, PNG_COLOR_TYPE_GRAY, 16, false, rows_of(grey16, 8)}).pixels, clipped);
}

TEST(ImageFiles, DecodesPalettesAndLowBitDepths) {
  PngSpec palette{2, 2, PNG_COLOR_TYPE_PALETTE, 2, false, {std::string(1, '\x10'), std::string(1, '\xb0')}, {}, {}};  // 00 01, 10 11
  palette.palette = {255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 9, 9};
  palette.transparency = {0, 128};  // alpha of entries 0 and 1: dropped
  EXPECT_EQ(decoded(palette).pixels, (std::vector<uint8_t>{255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 9, 9}));
  const PngSpec bits{8, 1, PNG_COLOR_TYPE_GRAY, 1, false, {std::string(1, '\xa5')}, {}, {}};  // 10100101
  EXPECT_EQ(decoded(bits).pixels, (std::vector<uint8_t>{255, 0, 255, 0, 0, 255, 0, 255}));
  const PngSpec two{4, 1, PNG_COLOR_TYPE_GRAY, 2, false, {std::string(1, '\x1b')}, {}, {}};  // 0 1 2 3
  EXPECT_EQ(decoded(two).pixels, (std::vector<uint8_t>{0, 85, 170, 255}));
}

TEST(ImageFiles, DecodesJpegsGreyAndColourAndRefusesCmyk) {
  Image rgb{8, 16, 3, std::vector<uint8_t>(8 * 16 * 3)};
  for (size_t i = 0; i < rgb.pixels.size(); ++i) rgb.pixels[i] = static_cast<uint8_t>(60 + (i % 3) * 50 + (i / 48) * 4);  // smooth
  const Image colour = data::decode_image(testing::jpeg_bytes(rgb, 100), "c.jpg");
  ASSERT_EQ((std::vector<int64_t>{colour.height, colour.width, colour.channels}), (std::vector<int64_t>{8, 16, 3}));
  for (size_t i = 0; i < rgb.pixels.size(); ++i) EXPECT_NEAR(colour.pixels[i], rgb.pixels[i], 3) << i;
  const Image g = data::with_channels(rgb, 1);
  const Image back = data::decode_image(testing::jpeg_bytes(g, 100), "g.jpg");
  EXPECT_EQ(back.channels, 1);
  for (size_t i = 0; i < g.pixels.size(); ++i) EXPECT_NEAR(back.pixels[i], g.pixels[i], 1) << i;
  EXPECT_NE(error_of([&] { data::decode_image(testing::jpeg_bytes(rgb, 90, /*cmyk=*/true), "ink.jpg"); }).find("ink.jpg: a CMYK JPEG"),
            std::string::npos);
}

TEST(ImageFiles, RefusesBrokenFilesWithOneLineNamingThem) {
  EXPECT_EQ(error_of([] { data::decode_image("GIF89a....", "a.gif"); }), "a.gif: neither PNG nor JPEG (by its first bytes)");
  const std::string png = testing::png_bytes({4, 3, PNG_COLOR_TYPE_RGB, 8, false, rows_of(ramp(36), 12)});
  EXPECT_NE(error_of([&] { data::decode_image(png.substr(0, png.size() - 30), "cut.png"); }).find("cut.png: not a readable PNG ("),
            std::string::npos);
  const std::string jpeg = testing::jpeg_bytes({16, 16, 1, std::vector<uint8_t>(256, 90)});
  EXPECT_NE(error_of([&] { data::decode_image(jpeg.substr(0, jpeg.size() / 2), "cut.jpg"); }).find("cut.jpg: not a readable JPEG ("),
            std::string::npos);
  // A header claiming 60,000 x 60,000 pixels is refused before 10 GB are allocated for them.
  std::string huge = png.substr(0, 33);
  const unsigned char side[4] = {0, 0, 0xea, 0x60};
  std::memcpy(huge.data() + 16, side, 4), std::memcpy(huge.data() + 20, side, 4);
  const uint32_t crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(huge.data() + 12), 17));
  for (int i = 0; i < 4; ++i) huge[29 + i] = static_cast<char>(crc >> (24 - 8 * i));
  EXPECT_EQ(error_of([&] { data::decode_image(huge + png.substr(33), "huge.png"); }),
            "huge.png: 60000x60000 pixels, more than the 67108864 tfm reads");
  testing::TempDir dir;
  EXPECT_NE(error_of([&] { data::read_image(dir.path("missing.png")); }).find("missing.png: cannot open the image"), std::string::npos);
}

TEST(ImageFiles, ConvertsChannelsAsPillow) {
  const Image rgb{1, 3, 3, {255, 0, 0, 0, 255, 0, 10, 200, 30}};
  // L = (19595 R + 38470 G + 7471 B + 32768) >> 16
  EXPECT_EQ(data::with_channels(rgb, 1).pixels, (std::vector<uint8_t>{76, 150, 124}));
  EXPECT_EQ(data::with_channels(grey(1, 2, {7, 200}), 3).pixels, (std::vector<uint8_t>{7, 7, 7, 200, 200, 200}));
  EXPECT_EQ(data::channel_major(rgb), (std::vector<uint8_t>{255, 0, 10, 0, 255, 200, 0, 0, 30}));
  const Image back = data::decode_image(data::encode_png(rgb), "rgb.png");
  EXPECT_EQ(back.pixels, rgb.pixels);
}

// ---- Pillow's resize ----

TEST(ImageResize, KeepsAnImageOfTheSameSize) {
  const Image rgb{3, 2, 3, ramp(18)};
  EXPECT_EQ(data::resize(rgb, 3, 2).pixels, rgb.pixels);
  EXPECT_EQ(data::resize(rgb, 3, 2, data::Resample::Bicubic).pixels, rgb.pixels);
}

// The values below are worked by hand from Resample.c's arithmetic (weights in 22-bit
// fixed point, half added, the sum's integer part).
TEST(ImageResize, ShrinksWithAWidenedTriangle) {
  // 4 -> 2: the triangle spans 2 input pixels each side; output 0 sees inputs 0, 1, 2 with
  // weights 3/7, 3/7, 1/7: 500/7 = 71.4; output 1 sees 1, 2, 3 with 1/7, 3/7, 3/7: 209.3.
  EXPECT_EQ(data::resize(grey(1, 4, {0, 100, 200, 255}), 1, 2).pixels, (std::vector<uint8_t>{71, 209}));
  EXPECT_EQ(data::resize(grey(4, 1, {0, 100, 200, 255}), 2, 1).pixels, (std::vector<uint8_t>{71, 209})) << "the vertical pass";
  EXPECT_EQ(data::resize(grey(1, 3, {90, 90, 90}), 1, 1).pixels, (std::vector<uint8_t>{90}));
}

TEST(ImageResize, EnlargesBilinearAndBicubic) {
  // 2 -> 4: centres at 0.25, 0.75, 1.25, 1.75 input pixels; 0.25 * 200 = 50 exactly, and
  // the half added for rounding makes 50.5, whose integer part is 50.
  EXPECT_EQ(data::resize(grey(1, 2, {0, 200}), 1, 4).pixels, (std::vector<uint8_t>{0, 50, 150, 200}));
  // Keys' cubic (a = -0.5): weights -0.088 and 1.088 at the ends (clipped to 0; 217.6 stays
  // 218 by the fixed-point rounding), 0.793 and 0.207 inside.
  EXPECT_EQ(data::resize(grey(1, 2, {0, 200}), 1, 4, data::Resample::Bicubic).pixels, (std::vector<uint8_t>{0, 41, 159, 218}));
  // Both passes: the columns of an RGB image scale alike, each channel apart.
  const Image rgb{2, 2, 3, {0, 10, 200, 200, 10, 0, 0, 10, 200, 200, 10, 0}};
  const Image wide = data::resize(rgb, 4, 4);
  EXPECT_EQ(std::vector<uint8_t>(wide.pixels.begin(), wide.pixels.begin() + 12),
            (std::vector<uint8_t>{0, 10, 200, 50, 10, 150, 150, 10, 50, 200, 10, 0}));
  EXPECT_EQ(std::vector<uint8_t>(wide.pixels.end() - 12, wide.pixels.end()), std::vector<uint8_t>(wide.pixels.begin(), wide.pixels.begin() + 12));
}

// ---- Hugging Face's ViTImageProcessor ----

TEST(ImageProcessor, ReproducesTheFixturesPixelValues) {
  const data::ImageProcessor p = data::ImageProcessor::read(testing::hf_fixture_path("vit_tiny/preprocessor_config.json"));
  EXPECT_EQ(p.height, 32);
  EXPECT_EQ(p.resample, data::Resample::Bilinear);
  const Reference want = read_reference(testing::hf_fixture_path("vit_tiny/reference.safetensors")).at("pixel_values");  // [2, 3, 32, 32]
  double worst = 0;
  for (int i = 0; i < 2; ++i) {
    const std::vector<float> got = p.preprocess(data::read_image(testing::hf_fixture_path("vit_tiny/image" + std::to_string(i) + ".png")));
    ASSERT_EQ(got.size(), 3u * 32 * 32);
    for (size_t k = 0; k < got.size(); ++k) worst = std::max(worst, std::abs(got[k] - want.values[i * got.size() + k]));
  }
  std::cout << "pixel_values: largest difference from transformers' " << worst << "\n";
  EXPECT_LE(worst, 1e-3);
  EXPECT_EQ(worst, 0.0) << "the same arithmetic as Pillow and NumPy";
}

TEST(ImageProcessor, ReadsEveryFieldAndRefusesWhatItCannotReproduce) {
  const data::ImageProcessor p = data::ImageProcessor::from_json(
      R"({"size": 8, "resample": 3, "do_rescale": false, "image_mean": 100, "image_std": [2, 4, 8], "crop_pct": 0.9})", "p.json");
  EXPECT_EQ(p.height, 8);
  EXPECT_EQ(p.width, 8);
  EXPECT_EQ(p.resample, data::Resample::Bicubic);
  const std::vector<float> v = p.preprocess(grey(1, 1, {120}));  // grey to RGB, resized to 8 x 8
  ASSERT_EQ(v.size(), 3u * 64);
  EXPECT_EQ((std::vector<float>{v[0], v[64], v[128]}), (std::vector<float>{10.0f, 5.0f, 2.5f}));
  EXPECT_EQ(data::ImageProcessor::from_json("{}", "p").height, 224);  // ViTImageProcessor's own defaults
  const std::pair<const char*, const char*> refused[] = {
      {R"({"resample": 1})", "p: 'resample' 1 (Lanczos) is not supported: tfm resizes with Pillow's bilinear (2) or bicubic (3) filter"},
      {R"({"size": {"longest_edge": 224}})", "p: 'size' must be {\"height\": H, \"width\": W}, {\"shortest_edge\": N} or a number"},
      {R"({"image_processor_type": "BeitImageProcessor"})", "p: image_processor_type \"BeitImageProcessor\" is not supported"},
      {R"({"do_resize": 1})", "p: 'do_resize' must be true or false, not 1"},
      {R"({"image_std": [0.5, 0]})", "p: 'image_std' holds a zero"},
      {"[1]", "p: not a JSON object"},
  };
  for (const auto& [json, message] : refused) {
    const std::string text = json;  // clang before 16 lets no lambda capture a structured binding
    EXPECT_NE(error_of([&] { data::ImageProcessor::from_json(text, "p"); }).find(message), std::string::npos) << json;
  }
  EXPECT_NE(error_of([&] { data::ImageProcessor{}.preprocess(grey(1, 1, {0}), 1); }).find("3 values for 1 channels"), std::string::npos);
}

}  // namespace
}  // namespace tfm
