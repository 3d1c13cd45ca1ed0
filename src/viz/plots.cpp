#include "viz/plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "tensor/error.h"
#include "viz/image.h"

namespace tfm::viz {

namespace {

constexpr Color kBlack{0, 0, 0}, kGrey{200, 200, 200}, kBlue{31, 119, 180};

constexpr int kScaleWidth = 100;

// The exponent of v's leading digit: 2 for 150, -2 for 0.03.
int decade(double v) { return static_cast<int>(std::floor(std::log10(v))); }

// As many decimals as the step needs, or %g's exponent form beyond a million or below 1e-4.
std::string tick_label(double v, double step) {
  char buf[32];
  if (std::abs(v) < 1e6 && step >= 1e-4)
    std::snprintf(buf, sizeof buf, "%.*f", std::max(0, -decade(step)), v);
  else
    std::snprintf(buf, sizeof buf, "%.*g", std::max(1, decade(std::max(std::abs(v), step)) - decade(step) + 1), v);
  return buf;
}

// The width of colour_scale() with `max_label` at its right end.
int colour_scale_width(const std::string& max_label) { return Image::text_width("0") + kScaleWidth + 8 + Image::text_width(max_label); }

// A viridis ramp with its top-left at (x, y), 16 pixels high, labelled 0 and `max_label`:
// what the colours of a heatmap mean.
void colour_scale(Image& img, int x, int y, const std::string& max_label) {
  img.text(x, y, "0", kBlack);
  const int bx = x + Image::text_width("0") + 4;
  for (int i = 0; i < kScaleWidth; ++i) img.fill_rect(bx + i, y + 3, 1, 10, viridis(static_cast<float>(i) / (kScaleWidth - 1)));
  img.text(bx + kScaleWidth + 4, y, max_label, kBlack);
}

// A range of nonzero width around [lo, hi], for an axis (a constant series gets ±10%, or ±1 at 0).
std::pair<double, double> axis_range(double lo, double hi) {
  if (lo < hi) return {lo, hi};
  const double pad = lo == 0 ? 1 : std::abs(lo) / 10;
  return {lo - pad, hi + pad};
}

constexpr int kPanelWidth = 420, kPanelHeight = 300;

// One panel of line_plots with its left edge at ox: grid lines at round values, the
// series as a line, each point marked while they are few enough to tell apart.
void draw_panel(Image& img, const Series& s, int ox) {
  img.text(ox + 20, 6, s.name, kBlack);
  if (s.x.empty()) {  // e.g. a run shorter than --log-every: no blank axes that look broken
    const std::string note = "no " + s.name + " logged yet";
    img.text(ox + (kPanelWidth - Image::text_width(note)) / 2, kPanelHeight / 2 - 8, note, kBlack);
    return;
  }
  // Plain names, not structured bindings: the lambdas below capture them (clang 14 cannot capture a binding).
  const std::pair<double, double> xs = axis_range(*std::min_element(s.x.begin(), s.x.end()), *std::max_element(s.x.begin(), s.x.end()));
  const std::pair<double, double> ys = axis_range(*std::min_element(s.y.begin(), s.y.end()), *std::max_element(s.y.begin(), s.y.end()));
  const double xmin = xs.first, xmax = xs.second, ymin = ys.first, ymax = ys.second;
  const std::vector<Tick> x_ticks = nice_ticks(xmin, xmax), y_ticks = nice_ticks(ymin, ymax);
  int label_width = 0;
  for (const Tick& t : y_ticks) label_width = std::max(label_width, Image::text_width(t.label));
  const int x0 = ox + label_width + 12, x1 = ox + kPanelWidth - 20, y0 = kPanelHeight - 40, y1 = 28;
  auto px = [&](double v) { return x0 + static_cast<int>((v - xmin) / (xmax - xmin) * (x1 - x0)); };
  auto py = [&](double v) { return y0 - static_cast<int>((v - ymin) / (ymax - ymin) * (y0 - y1)); };
  for (const Tick& t : y_ticks) {
    img.line(x0 + 1, py(t.value), x1, py(t.value), kGrey);
    img.text(x0 - 6 - Image::text_width(t.label), py(t.value) - 8, t.label, kBlack);
  }
  int free_x = 0;  // long labels may not all fit: those that would overlap are left out
  for (const Tick& t : x_ticks) {
    const int at = px(t.value) - Image::text_width(t.label) / 2;
    if (at < free_x) continue;
    img.text(at, y0 + 6, t.label, kBlack);
    free_x = at + Image::text_width(t.label) + 8;
  }
  img.line(x0, y0, x1, y0, kBlack);
  img.line(x0, y0, x0, y1, kBlack);
  img.text(x1 - Image::text_width("step"), y0 + 22, "step", kBlack);
  for (size_t i = 1; i < s.x.size(); ++i) img.line(px(s.x[i - 1]), py(s.y[i - 1]), px(s.x[i]), py(s.y[i]), kBlue);
  if (s.x.size() <= 50)
    for (size_t i = 0; i < s.x.size(); ++i) img.fill_rect(px(s.x[i]) - 2, py(s.y[i]) - 2, 5, 5, kBlue);
}

}  // namespace

std::vector<Tick> nice_ticks(double lo, double hi) {
  TFM_CHECK(lo < hi && std::isfinite(hi - lo), "cannot draw an axis from " << lo << " to " << hi);
  const double raw = (hi - lo) / 5, magnitude = std::pow(10.0, decade(raw)), norm = raw / magnitude;
  const double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * magnitude;  // the nearest round step: 4 to 8 ticks
  std::vector<Tick> ticks;
  // Multiples of the step (no accumulated rounding); + 0.0 turns -0 into 0.
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; ++k) ticks.push_back({k * step + 0.0, tick_label(k * step + 0.0, step)});
  return ticks;
}

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
  const int64_t panel_w64 = label_w + 6 + int64_t{tk} * cell + margin, panel_h64 = 20 + label_h + 6 + int64_t{tq} * cell + margin;
  // A picture of 8,192 pixels a side takes 200 MB before its PNG: about 450 tokens for
  // one head (3,000 tokens, all heads, would take 24 GB).
  constexpr int64_t kMaxSide = 8192;
  TFM_CHECK(cols * panel_w64 <= kMaxSide && 24 + rows * panel_h64 + 24 <= kMaxSide,
            "attention: " << tq << " x " << tk << " tokens" << (heads > 1 ? " in " + std::to_string(heads) + " heads" : std::string())
                          << " make a picture of " << cols * panel_w64 << " x " << 48 + rows * panel_h64 << " pixels, more than "
                          << kMaxSide << " a side; give a shorter sentence" << (heads > 1 ? " or one --head" : ""));
  const int panel_w = static_cast<int>(panel_w64), panel_h = static_cast<int>(panel_h64);
  // Wide enough for the title and the scale, however few the tokens.
  const int width = std::max({margin + cols * panel_w, 2 * margin + Image::text_width(title), 2 * margin + colour_scale_width("1")});
  Image img(width, 24 + rows * panel_h + 24);
  img.text(margin, 4, title, kBlack);
  colour_scale(img, margin, 24 + rows * panel_h, "1");
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
  const float peak = std::max(*std::max_element(attention.begin(), attention.end()), 1e-12f);
  char peak_label[32];
  std::snprintf(peak_label, sizeof peak_label, "%.3g", peak);
  Image img(std::max(margin + 3 * (pw + margin), 2 * margin + Image::text_width(title)), top + ph + 48);
  img.text(margin, 4, title, kBlack);
  colour_scale(img, margin + pw + margin, top + ph + 24, peak_label);
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
  Image img(static_cast<int>(panels.size()) * kPanelWidth, kPanelHeight);
  for (size_t p = 0; p < panels.size(); ++p) draw_panel(img, panels[p], static_cast<int>(p) * kPanelWidth);
  img.save_png(path);
}

}  // namespace tfm::viz
