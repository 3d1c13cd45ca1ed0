// Compiled with -ffp-contract=off (CMakeLists.txt): Pillow's weights are computed
// without fused multiply-adds, and one rounding more or less can move a fixed-point
// weight by one unit.
#include "data/resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/error.h"

namespace tfm::data {

namespace {

// 8 bits of result, 2 of headroom for the negative lobes and overshoot of bicubic.
constexpr int kPrecisionBits = 32 - 8 - 2;

struct Filter {
  double (*weight)(double distance);
  double support;  // the filter is zero beyond this distance (in input pixels, before widening)
};

double triangle(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Keys' cubic convolution with a = -0.5.
double cubic(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

Filter filter_of(Resample r) { return r == Resample::Bicubic ? Filter{cubic, 2.0} : Filter{triangle, 1.0}; }

// The input pixels one output pixel reads along an axis: [first, first + weights.size()),
// with fixed-point weights.
struct Taps {
  int64_t first = 0;
  std::vector<int32_t> weights;
};

// Pillow's rounding of a weight to fixed point: half away from zero.
int32_t fixed_point(double w) {
  const double scaled = w * (1 << kPrecisionBits);
  return static_cast<int32_t>(w < 0 ? -0.5 + scaled : 0.5 + scaled);
}

// Output pixel `i`'s taps when `in_size` pixels become `out_size` (precompute_coeffs and
// normalize_coeffs_8bpc). Pixel centres are at half-integers; the window's ends are
// rounded, then clipped to the image.
Taps taps_of(int64_t i, int64_t in_size, int64_t out_size, const Filter& f) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double widening = std::max(scale, 1.0);  // shrinking: every input pixel under the widened filter contributes
  const double support = f.support * widening, inverse = 1.0 / widening;
  const double center = (static_cast<double>(i) + 0.5) * scale;
  const int64_t first = std::max<int64_t>(static_cast<int>(center - support + 0.5), 0);
  const int64_t end = std::min<int64_t>(static_cast<int>(center + support + 0.5), in_size);
  std::vector<double> w;
  double sum = 0.0;
  for (int64_t x = first; x < end; ++x) sum += w.emplace_back(f.weight((static_cast<double>(x) - center + 0.5) * inverse));
  Taps t{first, {}};
  for (double v : w) t.weights.push_back(fixed_point(sum != 0.0 ? v / sum : v));
  return t;
}

std::vector<Taps> taps(int64_t in_size, int64_t out_size, const Filter& f) {
  std::vector<Taps> all;
  for (int64_t i = 0; i < out_size; ++i) all.push_back(taps_of(i, in_size, out_size, f));
  return all;
}

// One output sample from input samples `stride` apart: the fixed-point sum, rounded
// (half added), its integer part clipped to 0..255.
uint8_t convolve(const uint8_t* in, int64_t stride, const Taps& t) {
  int32_t sum = 1 << (kPrecisionBits - 1);
  for (size_t k = 0; k < t.weights.size(); ++k) sum += in[static_cast<int64_t>(k) * stride] * t.weights[k];
  return static_cast<uint8_t>(std::clamp(sum >> kPrecisionBits, 0, 255));
}

// The horizontal pass over rows [first, last) of `in`: [last - first, columns.size(), C].
Image resample_rows(const Image& in, int64_t first, int64_t last, const std::vector<Taps>& columns) {
  const int64_t W = static_cast<int64_t>(columns.size()), C = in.channels;
  Image out{last - first, W, C, std::vector<uint8_t>(static_cast<size_t>((last - first) * W * C))};
  for (int64_t y = first; y < last; ++y)
    for (int64_t x = 0; x < W; ++x)
      for (int64_t c = 0; c < C; ++c)
        out.pixels[static_cast<size_t>(((y - first) * W + x) * C + c)] =
            convolve(&in.pixels[static_cast<size_t>((y * in.width + columns[x].first) * C + c)], C, columns[x]);
  return out;
}

// The vertical pass: `in` holds the input's rows from `offset` on. [rows.size(), W, C].
Image resample_columns(const Image& in, int64_t offset, const std::vector<Taps>& rows) {
  const int64_t H = static_cast<int64_t>(rows.size()), W = in.width, C = in.channels;
  Image out{H, W, C, std::vector<uint8_t>(static_cast<size_t>(H * W * C))};
  for (int64_t y = 0; y < H; ++y)
    for (int64_t i = 0; i < W * C; ++i)  // every sample of a row: x and c together
      out.pixels[static_cast<size_t>(y * W * C + i)] =
          convolve(&in.pixels[static_cast<size_t>((rows[y].first - offset) * W * C + i)], W * C, rows[y]);
  return out;
}

}  // namespace

Image resize(const Image& image, int64_t height, int64_t width, Resample filter) {
  TFM_CHECK(height >= 1 && width >= 1 && height * width <= kMaxImagePixels,
            "cannot resize an image to " << width << "x" << height << " pixels");
  const Filter f = filter_of(filter);
  const std::vector<Taps> rows = taps(image.height, height, f);
  if (width == image.width) return height == image.height ? image : resample_columns(image, 0, rows);
  // The horizontal pass makes only the rows the vertical pass reads.
  const int64_t first = rows.front().first, last = rows.back().first + static_cast<int64_t>(rows.back().weights.size());
  const Image wide = resample_rows(image, first, last, taps(image.width, width, f));
  return height == image.height ? wide : resample_columns(wide, first, rows);
}

}  // namespace tfm::data
