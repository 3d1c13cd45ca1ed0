#pragma once
// The pictures tfm draws: attention heatmaps (as in the Annotated Transformer's
// figures) and training curves.
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tfm::viz {

// weights: [heads, tq, tk] attention probabilities of one sentence. One panel per
// head in a grid, keys labelled along x (top), queries along y (left).
void attention_heatmap(const Tensor& weights, const std::vector<std::string>& query_tokens, const std::vector<std::string>& key_tokens,
                       const std::string& title, const std::string& path);

struct Series {
  std::string name;
  std::vector<double> x, y;
};

// Panels of line plots side by side (e.g. loss against step, BLEU against step).
void line_plots(const std::vector<Series>& panels, const std::string& path);

}  // namespace tfm::viz
