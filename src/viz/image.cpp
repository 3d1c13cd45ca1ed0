#include "viz/image.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "data/image.h"
#include "data/text.h"
#include "io/output_file.h"
#include "tensor/error.h"

namespace tfm::viz {

Color viridis(float t) {
  static const Color stops[] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  t = std::clamp(t, 0.0f, 1.0f) * 4.0f;
  const int i = std::min(3, static_cast<int>(t));
  const float f = t - static_cast<float>(i);
  auto mix = [f](uint8_t a, uint8_t b) { return static_cast<uint8_t>(std::lround(a + (b - a) * f)); };
  return {mix(stops[i].r, stops[i + 1].r), mix(stops[i].g, stops[i + 1].g), mix(stops[i].b, stops[i + 1].b)};
}

namespace {

std::vector<uint32_t> code_points(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (int k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(cp);
    i += static_cast<size_t>(len);
  }
  return out;
}

}  // namespace

Font Font::load(const std::string& path) {
  TFM_CHECK(std::filesystem::exists(path), path << ": cannot open the font (install console-setup-linux: scripts/install-deps.sh)");
  const std::string b = data::read_file(path);
  // PSF1: magic 36 04, mode, glyph height; 256 or 512 glyphs of `height` bytes; then
  // (with mode bit 2) for each glyph, UCS-2 code points up to 0xFFFF.
  TFM_CHECK(b.size() >= 4 && static_cast<uint8_t>(b[0]) == 0x36 && static_cast<uint8_t>(b[1]) == 0x04, path << ": not a PSF1 font");
  const int mode = static_cast<uint8_t>(b[2]);
  Font font;
  font.height_ = static_cast<uint8_t>(b[3]);
  const size_t glyphs = (mode & 1) ? 512 : 256, size = glyphs * static_cast<size_t>(font.height_);
  TFM_CHECK(font.height_ > 0 && b.size() >= 4 + size, path << ": truncated PSF font");
  font.bitmaps_.assign(b.begin() + 4, b.begin() + 4 + static_cast<std::ptrdiff_t>(size));
  if (mode & 2) {
    size_t pos = 4 + size;
    for (uint32_t g = 0; g < glyphs && pos + 1 < b.size(); ++g) {
      while (pos + 1 < b.size()) {
        const uint32_t cp = static_cast<uint8_t>(b[pos]) | (static_cast<uint8_t>(b[pos + 1]) << 8);
        pos += 2;
        if (cp == 0xFFFF) break;
        if (cp != 0xFFFE) font.map_.push_back({cp, g});
      }
    }
  } else {
    for (uint32_t g = 0; g < glyphs; ++g) font.map_.push_back({g, g});
  }
  std::sort(font.map_.begin(), font.map_.end());
  return font;
}

const Font& Font::standard() {
  static const Font font = load("/usr/share/consolefonts/Uni2-Terminus16.psf.gz");
  return font;
}

const uint8_t* Font::glyph(uint32_t cp) const {
  auto find = [&](uint32_t c) {
    auto it = std::lower_bound(map_.begin(), map_.end(), std::pair<uint32_t, uint32_t>{c, 0});
    return it != map_.end() && it->first == c ? bitmaps_.data() + it->second * static_cast<size_t>(height_) : nullptr;
  };
  const uint8_t* g = find(cp);
  return g ? g : find('?');
}

Image::Image(int width, int height, Color bg) : width_(width), height_(height), rgb_(static_cast<size_t>(width) * height * 3) {
  fill_rect(0, 0, width, height, bg);
}

void Image::set(int x, int y, Color c) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  uint8_t* p = rgb_.data() + (static_cast<size_t>(y) * width_ + x) * 3;
  p[0] = c.r, p[1] = c.g, p[2] = c.b;
}

void Image::fill_rect(int x, int y, int w, int h, Color c) {
  for (int yy = y; yy < y + h; ++yy)
    for (int xx = x; xx < x + w; ++xx) set(xx, yy, c);
}

void Image::line(int x0, int y0, int x1, int y1, Color c) {
  const int steps = std::max({std::abs(x1 - x0), std::abs(y1 - y0), 1});
  for (int i = 0; i <= steps; ++i)
    set(x0 + (x1 - x0) * i / steps, y0 + (y1 - y0) * i / steps, c);
}

int Image::text_width(const std::string& utf8) { return static_cast<int>(code_points(utf8).size()) * 8; }

void Image::text(int x, int y, const std::string& utf8, Color c, bool vertical) {
  const Font& font = Font::standard();
  int offset = 0;
  for (uint32_t cp : code_points(utf8)) {
    const uint8_t* g = font.glyph(cp == 0x2581 ? '_' : cp);  // SentencePiece's word marker
    if (g)
      for (int row = 0; row < font.height(); ++row)
        for (int col = 0; col < 8; ++col)
          if (g[row] & (0x80 >> col)) {
            if (vertical)
              set(x + row, y - offset - col, c);
            else
              set(x + offset + col, y + row, c);
          }
    offset += font.width();
  }
}

void Image::save_png(const std::string& path) const {
  expect_picture_path(path);
  io::write_file_atomic(path, data::encode_png({height_, width_, 3, rgb_}));
}

void expect_picture_path(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) || std::filesystem::file_size(path, ec) == 0) return;
  std::ifstream in(path, std::ios::binary);
  char head[8] = {};
  in.read(head, sizeof head);
  const bool png = in.gcount() == 8 && std::memcmp(head, "\x89PNG\r\n\x1a\n", 8) == 0;
  TFM_CHECK(png, path << ": exists and is not a PNG picture; tfm replaces only an earlier picture (give another --output)");
}

}  // namespace tfm::viz
