#include "viz/plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tensor/error.h"
#include "viz/image.h"

namespace tfm::viz {

namespace {

constexpr Color kBlack{0, 0, 0}, kGrey{200, 200, 200}, kBlue{31, 119, 180};

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, std::abs(v) >= 100 || v == std::floor(v) ? "%.0f" : "%.2f", v);
  return buf;
}

}  // namespace

void attention_heatmap(const Tensor& weights, const std::vector<std::string>& query_tokens, const std::vector<std::string>& key_tokens,
                       const std::string& title, const std::string& path) {
  TFM_CHECK(weights.dim() == 3 && weights.size(1) == static_cast<int64_t>(query_tokens.size()) &&
                weights.size(2) == static_cast<int64_t>(key_tokens.size()),
            "attention_heatmap: weights " << shape_str(weights.shape()) << " do not match " << query_tokens.size() << " x "
                                          << key_tokens.size() << " tokens");
  const int heads = static_cast<int>(weights.size(0)), tq = static_cast<int>(weights.size(1)), tk = static_cast<int>(weights.size(2));
  const int cell = 18, margin = 10;
  int label_w = 0, label_h = 0;
  for (const auto& t : query_tokens) label_w = std::max(label_w, Image::text_width(t));
  for (const auto& t : key_tokens) label_h = std::max(label_h, Image::text_width(t));
  const int cols = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(heads))));
  const int rows = (heads + cols - 1) / cols;
  const int panel_w = label_w + 6 + tk * cell + margin, panel_h = 20 + label_h + 6 + tq * cell + margin;
  Image img(margin + cols * panel_w, 24 + rows * panel_h);
  img.text(margin, 4, title, kBlack);
  std::vector<float> w = weights.to_vector();
  for (int h = 0; h < heads; ++h) {
    const int ox = margin + (h % cols) * panel_w, oy = 24 + (h / cols) * panel_h;
    if (heads > 1) img.text(ox + label_w + 6, oy, "head " + std::to_string(h), kBlack);
    const int gx = ox + label_w + 6, gy = oy + 20 + label_h + 6;
    for (int j = 0; j < tk; ++j) img.text(gx + j * cell + 1, gy - 4, key_tokens[j], kBlack, /*vertical=*/true);
    for (int i = 0; i < tq; ++i) {
      img.text(ox + label_w - Image::text_width(query_tokens[i]), gy + i * cell + 1, query_tokens[i], kBlack);
      for (int j = 0; j < tk; ++j) img.fill_rect(gx + j * cell, gy + i * cell, cell - 1, cell - 1, viridis(w[(h * tq + i) * tk + j]));
    }
  }
  img.save_png(path);
}

void image_attention(const std::vector<uint8_t>& pixels, int rows, int cols, const std::vector<float>& attention, int grid_h,
                     int grid_w, const std::string& title, const std::string& path) {
  TFM_CHECK(pixels.size() == static_cast<size_t>(rows) * static_cast<size_t>(cols) &&
                attention.size() == static_cast<size_t>(grid_h) * static_cast<size_t>(grid_w) && grid_h > 0 && grid_w > 0,
            "image_attention: " << pixels.size() << " pixels for " << rows << "x" << cols << ", " << attention.size()
                                << " attention values for " << grid_h << "x" << grid_w);
  const int scale = std::max(1, 224 / std::max(rows, cols)), margin = 10, top = 28;
  const int pw = cols * scale, ph = rows * scale;
  Image img(margin + 3 * (pw + margin), top + ph + 24);
  img.text(margin, 4, title, kBlack);
  const float peak = std::max(*std::max_element(attention.begin(), attention.end()), 1e-12f);
  const char* captions[] = {"image", "[CLS] attention", "overlay"};
  for (int panel = 0; panel < 3; ++panel) {
    const int ox = margin + panel * (pw + margin);
    img.text(ox, top + ph + 4, captions[panel], kBlack);
    for (int y = 0; y < rows; ++y)
      for (int x = 0; x < cols; ++x) {
        const float grey = pixels[static_cast<size_t>(y * cols + x)] / 255.0f;
        const float a = attention[static_cast<size_t>((y * grid_h / rows) * grid_w + x * grid_w / cols)] / peak;
        const Color heat = viridis(a);
        const auto mix = [&](uint8_t channel) { return static_cast<uint8_t>(std::lround(channel * (0.35f + 0.65f * grey))); };
        const uint8_t g = static_cast<uint8_t>(std::lround(255 * grey));
        const Color c = panel == 0 ? Color{g, g, g} : panel == 1 ? heat : Color{mix(heat.r), mix(heat.g), mix(heat.b)};
        img.fill_rect(ox + x * scale, top + y * scale, scale, scale, c);
      }
  }
  img.save_png(path);
}

void line_plots(const std::vector<Series>& panels, const std::string& path) {
  const int pw = 420, ph = 300, left = 60, bottom = 40, top = 28;
  Image img(static_cast<int>(panels.size()) * pw, ph);
  for (size_t p = 0; p < panels.size(); ++p) {
    const Series& s = panels[p];
    const int ox = static_cast<int>(p) * pw;
    const int x0 = ox + left, x1 = ox + pw - 20, y0 = ph - bottom, y1 = top;
    img.text(ox + left, 6, s.name, kBlack);
    img.line(x0, y0, x1, y0, kBlack);
    img.line(x0, y0, x0, y1, kBlack);
    if (s.x.empty()) continue;
    double xmin = *std::min_element(s.x.begin(), s.x.end()), xmax = *std::max_element(s.x.begin(), s.x.end());
    double ymin = *std::min_element(s.y.begin(), s.y.end()), ymax = *std::max_element(s.y.begin(), s.y.end());
    if (xmax == xmin) xmax = xmin + 1;
    if (ymax == ymin) ymax = ymin + 1;
    auto px = [&](double v) { return x0 + static_cast<int>((v - xmin) / (xmax - xmin) * (x1 - x0)); };
    auto py = [&](double v) { return y0 - static_cast<int>((v - ymin) / (ymax - ymin) * (y0 - y1)); };
    for (int t = 0; t <= 4; ++t) {  // grid and tick labels
      const double yv = ymin + (ymax - ymin) * t / 4, xv = xmin + (xmax - xmin) * t / 4;
      img.line(x0 + 1, py(yv), x1, py(yv), kGrey);
      img.text(ox + 4, py(yv) - 8, number(yv), kBlack);
      img.text(px(xv) - Image::text_width(number(xv)) / 2, y0 + 6, number(xv), kBlack);
    }
    img.text(x1 - Image::text_width("step"), y0 + 22, "step", kBlack);
    for (size_t i = 1; i < s.x.size(); ++i) img.line(px(s.x[i - 1]), py(s.y[i - 1]), px(s.x[i]), py(s.y[i]), kBlue);
    if (s.x.size() == 1) img.fill_rect(px(s.x[0]) - 1, py(s.y[0]) - 1, 3, 3, kBlue);
  }
  img.save_png(path);
}

}  // namespace tfm::viz
