#pragma once
// A small RGB canvas with the drawing tfm's pictures need (filled rectangles,
// lines, text in a console bitmap font), saved as PNG through libpng.
#include <cstdint>
#include <string>
#include <vector>

namespace tfm::viz {

struct Color {
  uint8_t r, g, b;
};

// The perceptually uniform "viridis" ramp, t in [0, 1].
Color viridis(float t);

// A PSF console font (Debian's console-setup-linux ships them), glyphs by code point.
class Font {
 public:
  static const Font& standard();  // Terminus 8x16 from /usr/share/consolefonts
  static Font load(const std::string& path);
  int width() const { return 8; }
  int height() const { return height_; }
  const uint8_t* glyph(uint32_t code_point) const;  // rows of 8 pixels, one byte each

 private:
  int height_ = 16;
  std::vector<uint8_t> bitmaps_;
  std::vector<std::pair<uint32_t, uint32_t>> map_;  // code point -> glyph index, sorted
};

class Image {
 public:
  Image(int width, int height, Color background = {255, 255, 255});
  int width() const { return width_; }
  int height() const { return height_; }
  void set(int x, int y, Color c);
  void fill_rect(int x, int y, int w, int h, Color c);
  void line(int x0, int y0, int x1, int y1, Color c);
  // UTF-8 text with its top-left corner at (x, y); vertical text runs upwards from (x, y).
  void text(int x, int y, const std::string& utf8, Color c, bool vertical = false);
  static int text_width(const std::string& utf8);
  // Writes a PNG through io::OutputFile (a regular file is replaced atomically), where
  // expect_picture_path allows.
  void save_png(const std::string& path) const;

 private:
  int width_, height_;
  std::vector<uint8_t> rgb_;
};

// A clear error unless `path` may take a picture: a new file, an earlier PNG, an empty
// file, or no regular file (a FIFO, /dev/null). A checkpoint or a metrics file named by
// mistake is never replaced by a drawing of it.
void expect_picture_path(const std::string& path);

}  // namespace tfm::viz
