#pragma once
// Training curves from a run's metrics.jsonl: training loss, validation loss and
// the validation score (BLEU, accuracy...) against step, side by side in one PNG.
#include <string>

namespace tfm::training {

void plot_training_curves(const std::string& metrics_path, const std::string& png_path);

}  // namespace tfm::training
