#include "train/curves.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "tensor/error.h"
#include "viz/plots.h"

namespace tfm::train {

void plot_training_curves(const std::string& metrics_path, const std::string& png_path) {
  std::ifstream f(metrics_path);
  TFM_CHECK(f, metrics_path << ": cannot open");
  viz::Series train{"training loss", {}, {}}, valid{"validation loss", {}, {}}, bleu{"validation BLEU", {}, {}};
  int64_t line_no = 0;
  for (std::string line; std::getline(f, line);) {
    ++line_no;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    TFM_CHECK(!j.is_discarded() && j.is_object() && j.contains("step") && j["step"].is_number(),
              metrics_path << ":" << line_no << ": not a metrics record");
    const double step = j["step"].get<double>();
    // Non-finite values are logged as null (JSON has no NaN) and left out of the plot.
    if (j.contains("train_loss") && j["train_loss"].is_number()) train.x.push_back(step), train.y.push_back(j["train_loss"].get<double>());
    if (j.contains("bleu") && j["bleu"].is_number() && j["valid_loss"].is_number()) {
      valid.x.push_back(step), valid.y.push_back(j["valid_loss"].get<double>());
      bleu.x.push_back(step), bleu.y.push_back(j["bleu"].get<double>());
    }
  }
  viz::line_plots({train, valid, bleu}, png_path);
}

}  // namespace tfm::train
