// `tfm vit train` / `tfm vit eval`: a Vision Transformer on an MNIST-style image set.
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "decode/family_checkpoint.h"
#include "cli/trainer_flags.h"
#include "cli/validators.h"
#include "io/checkpoint.h"
#include "io/output_file.h"
#include "ops/linear_products.h"
#include "tensor/error.h"
#include "train/vit.h"

namespace tfm::cli {

namespace {

// printf's formatting, into a string.
template <class... Args>
std::string format(const char* fmt, Args... args) {
  std::string s(static_cast<size_t>(std::snprintf(nullptr, 0, fmt, args...)), '\0');
  std::snprintf(s.data(), s.size() + 1, fmt, args...);
  return s;
}

// Accuracy, then the confusion matrix with each class's accuracy.
std::string evaluation_report(const training::Evaluation& e, int64_t classes, const std::string& data_dir) {
  std::string report = format("test accuracy %.2f%% (%ld of %ld images), loss %.4f\n", 100.0 * e.accuracy(), static_cast<long>(e.correct),
                              static_cast<long>(e.images), e.loss);
  report += "per class (rows: true class, columns: predicted)\n";
  for (int64_t t = 0; t < classes; ++t) {
    int64_t total = 0;
    for (int64_t p = 0; p < classes; ++p) total += e.confusion[static_cast<size_t>(t * classes + p)];
    const double acc = total ? 100.0 * static_cast<double>(e.confusion[static_cast<size_t>(t * classes + t)]) / static_cast<double>(total) : 0.0;
    const std::string name = class_name(t, classes, data_dir);
    report += format("%2ld %-12s %6.2f%% |", static_cast<long>(t), name == std::to_string(t) ? "" : name.c_str(), acc);
    for (int64_t p = 0; p < classes; ++p) report += format(" %4ld", static_cast<long>(e.confusion[static_cast<size_t>(t * classes + p)]));
    report += "\n";
  }
  return report;
}

}  // namespace

std::string class_name(int64_t label, int64_t classes, const std::string& data_dir) {
  static const char* const kFashion[] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                         "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  const bool fashion = classes == 10 && data_dir.find("fashion") != std::string::npos && label >= 0 && label < 10;
  return fashion ? kFashion[label] : std::to_string(label);
}

// A ViT checkpoint from `tfm vit train`, loaded.
std::unique_ptr<models::ViT> load_vit(const std::string& path) {
  decode::FamilyCheckpoint c = decode::open_family_checkpoint(path, "vit", "a ViT from `tfm vit train`");
  auto model = std::make_unique<models::ViT>(c.config);
  io::load_parameters(model->named_parameters(), c.file, path);
  model->eval();
  return model;
}

void add_vit_command(CLI::App& app, int& exit_code) {
  CLI::App* vit = app.add_subcommand("vit", "Vision Transformer image classifiers (Fashion-MNIST by default)");
  help_without_subcommand(*vit, exit_code);

  CLI::App* cmd = vit->add_subcommand("train", "Train a ViT on an MNIST-style image set");
  auto c = std::make_shared<StackTrainCommand<tfm::VitTask>>(cmd, training::default_vit());
  cmd->add_option("--data", c->task.data_dir, "Directory with {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]")->capture_default_str();
  c->model_flags.bind(c->model_flags.group()->add_option("--patch", c->model.patch, "Patch size in pixels")->capture_default_str()
                          ->check(at_least<int64_t>(1)),
                      "patch");
  cmd->add_option("--batch", c->task.batch, "Images per batch")->capture_default_str()->check(at_least<int64_t>(1));
  cmd->add_option("--valid-images", c->task.valid_images, "Training images held out for validation")->capture_default_str()
      ->check(at_least<int64_t>(1));
  cmd->add_flag("!--no-flip", c->task.flip, "Do not mirror training images at random");
  add_training_flags_and_run(cmd, c, exit_code);

  struct EvalOptions {
    std::string checkpoint, data_dir = training::kFashionMnistDir, output = "-";
  };
  auto e = std::make_shared<EvalOptions>();
  CLI::App* eval = vit->add_subcommand("eval", "Test accuracy and confusion matrix of a trained ViT");
  add_model_flag(eval, e->checkpoint, "Checkpoint from `tfm vit train` (e.g. runs/vit/best.safetensors)");
  eval->add_option("--data", e->data_dir, "Directory with t10k-{images-idx3,labels-idx1}-ubyte[.gz]")->capture_default_str();
  eval->add_option("--output,-o", e->output, "The report ('-': standard output); a file is replaced only once evaluation completes")
      ->capture_default_str();
  eval->callback([e, eval, &exit_code] {
    io::TextOutput out(e->output);  // first: a bad path is refused before the model loads
    std::unique_ptr<models::ViT> model = load_vit(e->checkpoint);
    use_for_inference(*model, *eval);
    const data::ImageSet test = data::read_image_split(e->data_dir, /*train=*/false, model->config().classes);
    TFM_CHECK(test.rows == model->config().image_size && test.cols == model->config().image_size,
              e->data_dir << ": images are " << test.rows << "x" << test.cols << ", the model expects " << model->config().image_size);
    out.write(evaluation_report(training::evaluate_images(*model, test, 0, test.count), model->config().classes, e->data_dir));
    out.finish();
    exit_code = 0;
  });
}

}  // namespace tfm::cli
