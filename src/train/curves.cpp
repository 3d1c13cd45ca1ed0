#include "train/curves.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "tensor/error.h"
#include "viz/plots.h"

namespace tfm::training {

void plot_training_curves(const std::string& metrics_path, const std::string& png_path) {
  std::ifstream f(metrics_path);
  TFM_CHECK(f, metrics_path << ": cannot open");
  viz::Series train{"training loss", {}, {}}, valid{"validation loss", {}, {}}, score{"validation score", {}, {}};
  int64_t line_no = 0;
  for (std::string line; std::getline(f, line);) {
    ++line_no;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    TFM_CHECK(!j.is_discarded() && j.is_object() && j.contains("step") && j["step"].is_number(),
              metrics_path << ":" << line_no << ": not a metrics record");
    const double step = j["step"].get<double>();
    // Non-finite values are logged as null (JSON has no NaN) and left out of the plot.
    if (j.contains("train_loss") && j["train_loss"].is_number()) train.x.push_back(step), train.y.push_back(j["train_loss"].get<double>());
    if (j.contains("valid_loss") && j["valid_loss"].is_number()) valid.x.push_back(step), valid.y.push_back(j["valid_loss"].get<double>());
    // The score that picks the best checkpoint (BLEU, accuracy...), when it is not the loss itself.
    const std::string name = j.contains("score_name") && j["score_name"].is_string() ? j["score_name"].get<std::string>() : "";
    if (!name.empty() && name != "valid_loss" && j.contains(name) && j[name].is_number()) {
      score.name = "validation " + name;
      score.x.push_back(step), score.y.push_back(j[name].get<double>());
    }
  }
  TFM_CHECK(line_no > 0, "no metrics to plot in " << metrics_path);
  std::vector<viz::Series> panels{train, valid};
  if (!score.x.empty()) panels.push_back(score);
  viz::line_plots(panels, png_path);
}

}  // namespace tfm::training
