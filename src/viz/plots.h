#pragma once
// The pictures tfm draws: attention heatmaps (as in the Annotated Transformer's
// figures) and training curves.
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tfm::viz {

// weights: [heads, tq, tk] attention probabilities of one sentence. One panel per
// head in a grid, keys labelled along x (top), queries along y (left), a colour scale
// from 0 to 1 below.
void attention_heatmap(const Tensor& weights, const std::vector<std::string>& query_tokens, const std::vector<std::string>& key_tokens,
                       const std::string& title, const std::string& path);

// Where a ViT's [CLS] looks: the grey image, the attention over its patch grid
// (grid_h x grid_w values, scaled to their maximum) and the two overlaid, side by side,
// with a colour scale from 0 to that maximum.
void image_attention(const std::vector<uint8_t>& pixels, int rows, int cols, const std::vector<float>& attention, int grid_h,
                     int grid_w, const std::string& title, const std::string& path);

struct Series {
  std::string name;
  std::vector<double> x, y;
};

// Panels of line plots side by side (e.g. loss against step, BLEU against step). Few
// points are marked; a panel without points says "no <name> logged yet".
void line_plots(const std::vector<Series>& panels, const std::string& path);

struct Tick {
  double value;
  std::string label;  // compact: "20", "0.03", "1.5", "2e+30"
};

// Axis ticks at a round step (1, 2 or 5 x 10^k, about five of them) within [lo, hi], lo < hi.
std::vector<Tick> nice_ticks(double lo, double hi);

}  // namespace tfm::viz
