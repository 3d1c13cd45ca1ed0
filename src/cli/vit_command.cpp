// `tfm vit train` / `tfm vit eval`: a Vision Transformer on an MNIST-style image set or a
// folder of PNG and JPEG images.
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <memory>

#include "cli/commands.h"
#include "cli/trainer_flags.h"
#include "cli/validators.h"
#include "data/idx.h"
#include "data/image_folder.h"
#include "decode/family_checkpoint.h"
#include "io/checkpoint.h"
#include "io/output_file.h"
#include "ops/linear_products.h"
#include "tensor/error.h"
#include "tfm/classifier.h"
#include "tfm/images.h"
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
std::string evaluation_report(const training::Evaluation& e, const LoadedVit& vit, const std::string& data_dir) {
  const int64_t classes = vit.model->config().classes;
  std::string report = format("test accuracy %.2f%% (%ld of %ld images), loss %.4f\n", 100.0 * e.accuracy(), static_cast<long>(e.correct),
                              static_cast<long>(e.images), e.loss);
  report += "per class (rows: true class, columns: predicted)\n";
  for (int64_t t = 0; t < classes; ++t) {
    int64_t total = 0;
    for (int64_t p = 0; p < classes; ++p) total += e.confusion[static_cast<size_t>(t * classes + p)];
    const double acc = total ? 100.0 * static_cast<double>(e.confusion[static_cast<size_t>(t * classes + t)]) / static_cast<double>(total) : 0.0;
    const std::string name = class_name(t, vit.classes.names, classes, data_dir);
    report += format("%2ld %-12s %6.2f%% |", static_cast<long>(t), name == std::to_string(t) ? "" : name.c_str(), acc);
    for (int64_t p = 0; p < classes; ++p) report += format(" %4ld", static_cast<long>(e.confusion[static_cast<size_t>(t * classes + p)]));
    report += "\n";
  }
  return report;
}

// The images `vit` is evaluated on: every image of a folder whose class folders are among
// the model's classes, for a model trained on a folder; else the test split of MNIST-style files.
data::ImageSet test_images(const LoadedVit& vit, const std::string& data_dir) {
  const models::StackConfig& c = vit.model->config();
  if (vit.classes.resizes) {
    TFM_CHECK(!data::holds_idx_files(data_dir), data_dir << ": MNIST-style files, but the model was trained on an image folder "
                                                             "(evaluate it on one: --data DIR/<class>/<image>.png|jpg|jpeg)");
    return data::load_images(data::relabelled(data::scan_image_folder(data_dir), vit.classes.names, "the model"), c.channels, c.image_size,
                             vit.processor);
  }
  const data::ImageSet test = data::read_image_split(data_dir, /*train=*/false, c.classes);
  TFM_CHECK(test.rows == c.image_size && test.cols == c.image_size,
            data_dir << ": images are " << test.rows << "x" << test.cols << ", the model expects " << c.image_size);
  return test;
}

struct EvalOptions {
  std::string checkpoint, data_dir = training::kFashionMnistDir, output = "-";
  std::vector<std::string> inputs;  // image files to classify instead
};

// `file` as `classifier` takes it; every error names the file.
std::vector<uint8_t> file_pixels(const Classifier& classifier, const std::string& file) {
  const Image image = read_image(file);  // its errors name the file
  try {
    return classifier.pixels_of(image);
  } catch (const std::runtime_error& error) {  // a size the model does not take
    throw Error(file + ": " + error.what());
  }
}

// One line per image file: its most likely class and that class's probability.
std::string classify_files(const EvalOptions& e, const CLI::App& cmd) {
  const Classifier classifier(e.checkpoint, {"", to_string(precision_flag(cmd)), device_flag(cmd)});
  std::string lines;
  for (const std::string& file : e.inputs) {
    const Classification c = classifier.classify(file_pixels(classifier, file), 1);
    const std::string name = class_name(c.labels[0], classifier.class_names(), classifier.classes(), e.data_dir);
    lines += format("%s: %s (%.1f%%)\n", file.c_str(), name.c_str(), 100.0 * c.probabilities[static_cast<size_t>(c.labels[0])]);
  }
  return lines;
}

// A number as `tfm embed` writes its vectors: 6 significant digits.
std::string vector_line(const float* v, int64_t n) {
  std::ostringstream line;
  line << std::setprecision(6);
  for (int64_t i = 0; i < n; ++i) line << (i ? " " : "") << v[i];
  return line.str() + "\n";
}

void add_eval_command(CLI::App* vit, int& exit_code) {
  auto e = std::make_shared<EvalOptions>();
  CLI::App* eval = vit->add_subcommand("eval", "Test accuracy and confusion matrix of a trained ViT, or the classes of image files");
  add_model_flag(eval, e->checkpoint, "Checkpoint from `tfm vit train` (e.g. runs/vit/best.safetensors)");
  CLI::Option* data = eval->add_option("--data", e->data_dir, "MNIST-style files (t10k-{images-idx3,labels-idx1}-ubyte[.gz]) or an image "
                                                               "folder (DIR/<class>/<image>.png|jpg|jpeg) to evaluate on")
                          ->capture_default_str();
  eval->add_option("--input,-i", e->inputs, "PNG or JPEG files to classify instead (resized as training did)")->excludes(data);
  eval->add_option("--output,-o", e->output, "The report ('-': standard output); a file is replaced only once evaluation completes")
      ->capture_default_str();
  eval->callback([e, eval, &exit_code] {
    io::TextOutput out(e->output);  // first: a bad path is refused before the model loads
    if (!e->inputs.empty()) {
      out.write(classify_files(*e, *eval));
    } else {
      const LoadedVit vit = load_vit(e->checkpoint);
      TFM_CHECK(vit.model->has_classifier(), e->checkpoint << ": " << Classifier::kNoClassifier);
      use_for_inference(*vit.model, *eval);
      const data::ImageSet test = test_images(vit, e->data_dir);
      const training::Evaluation evaluation = training::evaluate_images(*vit.model, test, 0, test.count);
      if (!evaluation.finite) fail_not_finite("class scores");
      out.write(evaluation_report(evaluation, vit, e->data_dir));
    }
    out.finish();
    exit_code = 0;
  });
}

}  // namespace

std::string class_name(int64_t label, const std::vector<std::string>& names, int64_t classes, const std::string& data_dir) {
  if (!names.empty()) return names[static_cast<size_t>(label)];
  const std::vector<std::string> idx = training::idx_class_names(data_dir, classes);
  return label >= 0 && label < static_cast<int64_t>(idx.size()) ? idx[static_cast<size_t>(label)] : std::to_string(label);
}

std::string image_features(const std::string& checkpoint, const std::vector<std::string>& files, const std::string& pool, const CLI::App& cmd) {
  TFM_CHECK(pool != "mean", "--pool mean is for text; a ViT's image vectors are pooled by pooler or cls");
  const Classifier vit(checkpoint, {"", to_string(precision_flag(cmd)), device_flag(cmd)});
  std::string lines;
  for (const std::string& file : files) {
    const Embeddings e = vit.embed(file_pixels(vit, file), 1, pool);
    lines += vector_line(e.values.data(), e.dim);
  }
  return lines;
}

LoadedVit load_vit(const std::string& path) {
  decode::FamilyCheckpoint c = decode::open_family_checkpoint(path, "vit", "a ViT from `tfm vit train`");
  LoadedVit vit{std::make_unique<models::ViT>(c.config), decode::recorded_vit_classes(c.file.metadata, c.config.classes, path),
                decode::recorded_image_processor(c.file.metadata, path)};
  io::load_parameters(vit.model->named_parameters(), c.file, path);
  vit.model->eval();
  return vit;
}

void add_vit_command(CLI::App& app, int& exit_code) {
  CLI::App* vit = app.add_subcommand("vit", "Vision Transformer image classifiers (Fashion-MNIST by default, or a folder of images)");
  help_without_subcommand(*vit, exit_code);

  CLI::App* cmd = vit->add_subcommand("train", "Train a ViT on an MNIST-style image set or a folder of PNG and JPEG images");
  auto c = std::make_shared<StackTrainCommand<tfm::VitTask>>(cmd, training::default_vit());
  cmd->add_option("--data", c->task.data_dir,
                  "MNIST-style files ({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]), or an image folder: DIR/<class>/<image>.png|jpg|jpeg, "
                  "or DIR/train/<class>/... and DIR/val/<class>/...")
      ->capture_default_str();
  CLI::Option_group* model = c->model_flags.group();
  c->model_flags.bind(model->add_option("--image-size", c->model.image_size, "Image side in pixels (a folder's images are resized to it)")
                          ->capture_default_str()->check(in_range<int64_t>(1, 4096)),
                      "image_size");
  c->model_flags.bind(model->add_option("--channels", c->model.channels, "1 (grey) or 3 (RGB); default: 1 for MNIST-style files, 3 for a folder")
                          ->check(either<int64_t>(1, 3)),
                      "channels");
  c->model_flags.bind(model->add_option("--patch", c->model.patch, "Patch size in pixels")->capture_default_str()->check(at_least<int64_t>(1)),
                      "patch");
  cmd->add_option("--batch", c->task.batch, "Images per batch")->capture_default_str()->check(at_least<int64_t>(1));
  cmd->add_option("--valid-images", c->task.valid_images, "MNIST-style files: training images held out for validation")
      ->capture_default_str()->check(at_least<int64_t>(1));
  cmd->add_option("--valid-fraction", c->task.valid_fraction,
                  "An image folder without train/ and val/: the part of each class held out for validation")
      ->capture_default_str()->check(strictly_between(0.0, 1.0));
  cmd->add_flag("!--no-flip", c->task.flip, "Do not mirror training images at random");
  add_training_flags_and_run(cmd, c, exit_code);

  add_eval_command(vit, exit_code);
}

}  // namespace tfm::cli
