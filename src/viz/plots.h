#pragma once
// The pictures tfm draws: attention heatmaps (as in the Annotated Transformer's
// figures) and training curves.
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tfm::viz {

// weights: [heads, tq, tk] attention probabilities of one sentence. One panel per
// head in a grid, keys labelled along x (top), queries along y (left).
void attention_heatmap(const Tensor& weights, const std::vector<std::string>& query_tokens, const std::vector<std::string>& key_tokens,
                       const std::string& title, const std::string& path);

// Where a ViT's [CLS] looks: the grey image, the attention over its patch grid
// (grid_h x grid_w values, scaled to their maximum) and the two overlaid, side by side.
void image_attention(const std::vector<uint8_t>& pixels, int rows, int cols, const std::vector<float>& attention, int grid_h,
                     int grid_w, const std::string& title, const std::string& path);

struct Series {
  std::string name;
  std::vector<double> x, y;
};

// Panels of line plots side by side (e.g. loss against step, BLEU against step).
void line_plots(const std::vector<Series>& panels, const std::string& path);

}  // namespace tfm::viz
