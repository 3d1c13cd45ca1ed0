// The pictures: round axis ticks, few or no points, empty metrics, heatmap titles and
// colour scales, checked on the pixels of the PNGs written.
#include <gtest/gtest.h>
#include <png.h>

#include "support/process.h"
#include "train/curves.h"
#include "viz/image.h"
#include "viz/plots.h"

namespace tfm {
namespace {

using testing::error_of;
using testing::TempDir;

struct Pixels {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  bool is(int x, int y, viz::Color c) const {
    const uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
    return p[0] == c.r && p[1] == c.g && p[2] == c.b;
  }
  bool contains(viz::Color c) const {
    for (int y = 0; y < height; ++y)
      for (int x = 0; x < width; ++x)
        if (is(x, y, c)) return true;
    return false;
  }
};

Pixels read_png(const std::string& path) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  EXPECT_TRUE(png_image_begin_read_from_file(&image, path.c_str())) << path;
  image.format = PNG_FORMAT_RGB;
  Pixels p{static_cast<int>(image.width), static_cast<int>(image.height), std::vector<uint8_t>(PNG_IMAGE_SIZE(image))};
  EXPECT_TRUE(png_image_finish_read(&image, nullptr, p.rgb.data(), 0, nullptr)) << path;
  return p;
}

std::vector<std::string> labels(double lo, double hi) {
  std::vector<std::string> out;
  for (const viz::Tick& t : viz::nice_ticks(lo, hi)) out.push_back(t.label);
  return out;
}

TEST(Plots, TicksAreRoundNumbersWithCompactLabels) {
  EXPECT_EQ(labels(0, 23.75), (std::vector<std::string>{"0", "5", "10", "15", "20"}));
  EXPECT_EQ(labels(0.0005, 0.031), (std::vector<std::string>{"0.005", "0.010", "0.015", "0.020", "0.025", "0.030"}));
  EXPECT_EQ(labels(1e30, 3e30), (std::vector<std::string>{"1e+30", "1.5e+30", "2e+30", "2.5e+30", "3e+30"}));
  EXPECT_EQ(labels(-0.3, 0.3), (std::vector<std::string>{"-0.3", "-0.2", "-0.1", "0.0", "0.1", "0.2", "0.3"}));
  EXPECT_EQ(viz::nice_ticks(0, 23.75)[1].value, 5.0);
}

TEST(Plots, RefusesAnEmptyMetricsFile) {
  TempDir dir;
  testing::write_file(dir.path("metrics.jsonl"), "");
  EXPECT_EQ(error_of([&] { training::plot_training_curves(dir.path("metrics.jsonl"), dir.path("c.png")); }),
            "no metrics to plot in " + dir.path("metrics.jsonl"));
  testing::CliResult r = testing::run_tfm("plot " + dir.path("metrics.jsonl") + " --out " + dir.path("c.png"));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.output, "tfm: error: no metrics to plot in " + dir.path("metrics.jsonl") + "\n");
}

// A run shorter than --log-every has validation points but no training loss yet.
TEST(Plots, MarksFewPointsAndSaysWhenAPanelHasNone) {
  TempDir dir;
  viz::line_plots({{"training loss", {}, {}}, {"validation loss", {0, 1, 2}, {0, 1, 0}}}, dir.path("c.png"));
  const Pixels p = read_png(dir.path("c.png"));
  const viz::Color black{0, 0, 0}, blue{31, 119, 180};
  bool note = false, marker = false;
  for (int y = 40; y < 250; ++y)
    for (int x = 70; x < 400; ++x) note = note || p.is(x, y, black);  // text right of where the y axis was
  for (int y = 0; y < p.height; ++y)
    for (int x = 420; x + 5 <= p.width; ++x) {
      bool run = true;  // five blue pixels in a row: a marker, not the steep line
      for (int i = 0; i < 5; ++i) run = run && p.is(x + i, y, blue);
      marker = marker || run;
    }
  EXPECT_TRUE(note);
  EXPECT_TRUE(marker);
}

TEST(Plots, HeatmapFitsItsTitleAndShowsItsColourScale) {
  TempDir dir;
  const std::string title = "decoder self-attention, layer 5, head 7 of a one-token sentence";
  viz::attention_heatmap(Tensor::full({1, 1, 1}, 0.5f), {"a"}, {"b"}, title, dir.path("h.png"));
  const Pixels p = read_png(dir.path("h.png"));
  EXPECT_GE(p.width, viz::Image::text_width(title) + 10);
  EXPECT_TRUE(p.contains(viz::viridis(0.0f)));  // only the scale has them: the one cell is 0.5
  EXPECT_TRUE(p.contains(viz::viridis(1.0f)));
}

// 3,000 tokens in 8 heads once asked 24 GB of a picture: a clear error before any of it,
// which names the way out; one head of 400 tokens still draws.
TEST(Plots, AHeatmapTooLargeToDrawIsAClearError) {
  TempDir dir;
  const std::vector<std::string> tokens(600, "w");
  EXPECT_NE(error_of([&] { viz::attention_heatmap(Tensor::full({8, 600, 600}, 0.1f), tokens, tokens, "t", dir.path("h.png")); })
                .find("600 x 600 tokens in 8 heads make a picture of"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.path("h.png")));
  const std::vector<std::string> fewer(400, "w");
  viz::attention_heatmap(Tensor::full({1, 400, 400}, 0.1f), fewer, fewer, "t", dir.path("one.png"));
  EXPECT_EQ(read_png(dir.path("one.png")).width, 10 + viz::Image::text_width("w") + 6 + 400 * 18 + 10);  // (18 pixels a cell)
}

}  // namespace
}  // namespace tfm
