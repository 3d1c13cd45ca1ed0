#include "train/vit.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <utility>

#include "autograd/autograd.h"
#include "data/idx.h"
#include "data/image_folder.h"
#include "decode/family_checkpoint.h"
#include "ops/convert.h"
#include "ops/loss.h"
#include "ops/shape.h"
#include "tensor/error.h"
#include "train/data_parallel.h"
#include "train/schedule.h"
#include "train/model_settings.h"
#include "train/progress.h"

namespace tfm::training {

models::StackConfig default_vit() {
  models::StackConfig c;
  c.family = "vit";
  c.image_size = 28, c.channels = 1, c.patch = 7, c.classes = 10;
  c.d_model = 128, c.heads = 4, c.d_ff = 256, c.layers = 6, c.dropout = 0.0f;
  return c.validated("the ViT defaults");
}


Tensor image_batch(const data::ImageSet& set, const std::vector<int64_t>& indices, const std::vector<bool>& flip) {
  const int64_t n = static_cast<int64_t>(indices.size()), C = set.channels, R = set.rows, W = set.cols;
  Tensor x = Tensor::empty({n, C, R, W}, DType::u8);
  uint8_t* d = x.data_as<uint8_t>();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* img = set.pixels.data() + indices[static_cast<size_t>(i)] * C * R * W;
    const bool mirror = !flip.empty() && flip[static_cast<size_t>(i)];
    for (int64_t r = 0; r < C * R; ++r)  // the rows of every channel
      for (int64_t c = 0; c < W; ++c) d[(i * C * R + r) * W + c] = img[r * W + (mirror ? W - 1 - c : c)];
  }
  if (!set.processor) return ops::from_pixels(x);
  return Tensor::from_values({n, C, R, W}, set.processor->normalise(std::vector<uint8_t>(d, d + n * C * R * W), C, R, W));
}

std::vector<std::string> idx_class_names(const std::string& data_dir, int64_t classes) {
  if (classes != 10 || data_dir.find("fashion") == std::string::npos) return {};
  return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
}

Evaluation evaluate_images(models::ViT& model, const data::ImageSet& set, int64_t first, int64_t count) {
  autograd::NoGradGuard no_grad;
  const int64_t classes = model.config().classes;
  Evaluation e;
  e.confusion.assign(static_cast<size_t>(classes * classes), 0);
  for (int64_t start = first; start < first + count; start += 500) {
    std::vector<int64_t> idx(static_cast<size_t>(std::min<int64_t>(500, first + count - start)));
    std::iota(idx.begin(), idx.end(), start);
    Tensor logits = ops::contiguous(ops::to(model.forward(image_batch(set, idx)), Device::CPU));  // [n, classes]
    e.finite = e.finite && std::all_of(logits.data(), logits.data() + logits.numel(), [](float x) { return std::isfinite(x); });
    std::vector<int> labels;
    for (int64_t i : idx) labels.push_back(set.labels[static_cast<size_t>(i)]);
    e.loss += ops::cross_entropy(logits, Tensor::from_values(labels), 0.0f, -1).item() * static_cast<double>(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) {
      const float* row = logits.data() + static_cast<int64_t>(i) * classes;
      const int64_t predicted = std::max_element(row, row + classes) - row;
      e.correct += predicted == labels[i];
      ++e.confusion[static_cast<size_t>(labels[i] * classes + predicted)];
    }
    e.images += static_cast<int64_t>(idx.size());
  }
  e.loss /= static_cast<double>(std::max<int64_t>(e.images, 1));
  return e;
}

namespace {

namespace fs = std::filesystem;

// Images [first, first + count) of `set`.
data::ImageSet slice(const data::ImageSet& set, int64_t first, int64_t count) {
  const int64_t bytes = set.channels * set.rows * set.cols;
  const auto pixels = set.pixels.begin() + first * bytes;
  const auto labels = set.labels.begin() + first;
  return {count, set.channels, set.rows, set.cols, {pixels, pixels + count * bytes}, {labels, labels + count}, set.processor};
}

// The images a ViT trains and validates on, as the model takes them.
struct VitData {
  data::ImageSet train, valid;
  std::string origin;  // where they come from, for the log
};

// MNIST-style files: the last `valid_images` training images held out.
VitData idx_data(const tfm::VitTask& o, const models::StackConfig& config) {
  data::ImageSet all = data::read_image_split(o.data_dir, /*train=*/true, config.classes);
  TFM_CHECK(all.rows == config.image_size && all.cols == config.image_size && config.channels == 1,
            o.data_dir << ": images are " << all.rows << "x" << all.cols << " grey, the model expects " << config.image_size << "x"
                       << config.image_size << " with " << config.channels << " channel(s)");
  TFM_CHECK(o.valid_images > 0 && o.valid_images < all.count, "--valid-images must be between 1 and " << all.count - 1);
  const int64_t kept = all.count - o.valid_images;
  return {slice(all, 0, kept), slice(all, kept, o.valid_images), o.data_dir};
}

using Folders = std::pair<data::ImageFolder, data::ImageFolder>;  // training and validation images

// An image folder's training and validation images: DIR/train and DIR/val where both
// exist, else DIR with `valid_fraction` of each class held out.
Folders split_folder(const tfm::VitTask& o) {
  const fs::path train = fs::path(o.data_dir) / "train", val = fs::path(o.data_dir) / "val";
  if (!fs::is_directory(train) || !fs::is_directory(val)) return data::hold_out(data::scan_image_folder(o.data_dir), o.valid_fraction);
  data::ImageFolder t = data::scan_image_folder(train.string());
  return {t, data::relabelled(data::scan_image_folder(val.string()), t.classes, train.string())};
}

// The classes and channels an image folder gives the model, unless the settings give them
// (the classes must then agree): colour, since a folder's images are PNG or JPEG photos.
void fit_to_folder(models::StackConfig& config, const ModelSettings& settings, const data::ImageFolder& train) {
  const int64_t classes = static_cast<int64_t>(train.classes.size());
  TFM_CHECK(classes >= 2, train.dir << ": one class folder; a classifier needs two or more");
  TFM_CHECK(!settings.gives("classes") || config.classes == classes,
            train.dir << " has " << classes << " class folders, the model settings say " << config.classes << " classes");
  config.classes = classes;
  if (!settings.gives("channels")) config.channels = 3;
}

// "the classes cat, dog" or, for MNIST-style files, "numbered classes".
std::string classes_named(const std::vector<std::string>& names) {
  if (names.empty()) return "numbered classes (MNIST-style files)";
  std::string s = "the classes ";
  for (const std::string& n : names) s += (&n == &names.front() ? "" : ", ") + n;
  return s;
}

// An image folder's images, or none for MNIST-style files; a directory that is neither is refused.
std::optional<Folders> image_folders(const tfm::VitTask& o) {
  if (data::holds_idx_files(o.data_dir)) return std::nullopt;
  TFM_CHECK(fs::is_directory(o.data_dir), o.data_dir << ": not found (MNIST-style files {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz], "
                                                        "which the Debian package dataset-fashion-mnist installs, or an image folder "
                                                        "DIR/<class>/<image>.png|jpg|jpeg)");
  return split_folder(o);
}

bool is_base(const io::Checkpoint& c, const std::string& path) { return models::StackConfig::from_json(c.config_json, path, "vit").classes == 0; }

// A resumed run's model: the checkpoint's, which every setting given must agree with. A
// base (ViTModel) gets a new classifier of the chosen classes (an image folder's) and loses
// its pooler, as ViTForImageClassification.from_pretrained(base) does.
models::StackConfig resumed_config(const io::Checkpoint& resumed, const ModelSettings& settings, const models::StackConfig& chosen,
                                   const std::string& path, bool initialising) {
  io::check_model_kind(resumed.model_kind, {"vit"}, path, "a vit one");
  models::StackConfig saved = models::StackConfig::from_json(resumed.config_json, path, "vit");
  if (saved.classes == 0) {
    TFM_CHECK(initialising, path << ": is a ViT base without a classifier; start a fine-tune from it with --init-from, not --resume");
    saved.classes = chosen.classes, saved.pooler = false;
  }
  return settings.kept(chosen, saved, path);
}

class VitTraining : public TrainingTask {
 public:
  // `initialising`: `resumed` is --init-from's, not --resume's.
  VitTraining(const tfm::VitTask& o, const std::optional<io::Checkpoint>& resumed, const std::string& resume_path, bool initialising,
              std::ostream& out)
      : o_(o) {
    const ModelSettings settings(o.config, o.model);
    models::StackConfig config = settings.over(default_vit());
    const std::optional<Folders> folders = image_folders(o);
    if (folders) {
      classes_ = folders->first.classes;
      fit_to_folder(config, settings, folders->first);
    }
    config = resumed ? resumed_config(*resumed, settings, config, resume_path, initialising) : config.validated(settings.origin());
    TFM_CHECK(config.classes > 0, settings.origin() << ": classes 0 is a base without a classifier, which cannot be trained; give 2 or more");
    // A Hugging Face model's images are prepared by its own processor (DeiT's crop, ImageNet's mean), and its checkpoints keep it.
    if (resumed) processor_ = decode::recorded_image_processor(resumed->metadata, resume_path);
    TFM_CHECK(folders || !processor_, o.data_dir << ": MNIST-style files, but " << resume_path
                                                 << " prepares images by its image processor (give it an image folder: DIR/<class>/<image>.png|jpg|jpeg)");
    data_ = folders ? folder_data(*folders, config, out) : idx_data(o, config);
    model_ = std::make_unique<models::ViT>(config);
    out << "images: " << data_.train.count << " for training, " << data_.valid.count << " for validation from " << data_.origin << " ("
        << config.image_size << "x" << config.image_size << (config.channels == 3 ? " RGB" : " grey") << ", "
        << count_of(config.patches(), "patch", "patches") << " of " << config.patch << "x" << config.patch << ", "
        << count_of(config.classes, "class", "classes") << ")\n";
  }

  nn::Module& model() override { return *model_; }
  void init_parameters(Rng& rng) override { model_->init_parameters(rng); }

  io::Checkpoint describe() const override {
    io::Checkpoint c{"vit", model_->config().to_json(), {}, "", {}};
    if (!classes_.empty()) c.metadata[decode::kImageFolderKey] = decode::classes_record(classes_);
    if (processor_) c.metadata[decode::kImageProcessorKey] = processor_->to_json();
    const std::vector<std::string> idx = classes_.empty() ? idx_class_names(o_.data_dir, model_->config().classes) : std::vector<std::string>{};
    if (!idx.empty()) c.metadata[decode::kIdxClassesKey] = decode::classes_record(idx);  // named in `vit eval` and an export
    return c;
  }

  void check_resumable(const io::Checkpoint& saved, const std::string& origin) const override {
    if (is_base(saved, origin)) return;  // its classifier is new: any classes
    const std::vector<std::string> trained_on = decode::recorded_classes(saved.metadata, model_->config().classes, origin);
    TFM_CHECK(trained_on == classes_, origin << ": trained on " << classes_named(trained_on) << ", not " << classes_named(classes_));
  }

  // A base's weights under a new classifier, drawn from `rng` (its pooler left out).
  std::string init_from(const io::SafeTensors& file, const std::string& origin, Rng& rng) override {
    if (file.find("head.weight")) return TrainingTask::init_from(file, origin, rng);
    model_->init_parameters(rng);
    io::NamedTensors kept;
    for (const auto& [name, p] : model_->named_parameters())
      if (!name.starts_with("head.")) kept.emplace_back(name, p);
    io::SafeTensors base = file;
    std::erase_if(base.tensors, [](const auto& t) { return t.first.starts_with("pooler."); });
    io::load_parameters(kept, base, origin);
    return ": a base, under a new classifier of " + count_of(model_->config().classes, "class", "classes");
  }

  std::string unit() const override { return "img"; }
  std::string data_fingerprint() const override {
    const data::ImageSet& t = data_.train;
    return fingerprint(static_cast<size_t>(t.count), "training images",
                       fnv1a(t.labels.data(), t.labels.size() * sizeof(int32_t), fnv1a(t.pixels.data(), t.pixels.size())));
  }

  int64_t begin_epoch(int64_t epoch, uint64_t seed) override {
    seed_ = seed, epoch_ = epoch;
    order_.resize(static_cast<size_t>(data_.train.count));
    std::iota(order_.begin(), order_.end(), 0);
    Rng rng = substream(seed, static_cast<uint64_t>(epoch));
    for (size_t i = order_.size() - 1; i > 0; --i) std::swap(order_[i], order_[static_cast<size_t>(rng.randint(0, static_cast<int64_t>(i) + 1))]);
    return (data_.train.count + o_.batch - 1) / o_.batch;
  }

  BatchLoss batch_loss(int64_t index) override {
    const int64_t start = index * o_.batch, end = std::min(start + o_.batch, data_.train.count);
    std::vector<bool> flips(static_cast<size_t>(end - start));  // drawn for the whole batch, whichever share this process takes
    Rng rng = substream(seed_, static_cast<uint64_t>(epoch_), static_cast<uint64_t>(index) + 1);
    for (size_t i = 0; i < flips.size(); ++i) flips[i] = o_.flip && rng.uniform() < 0.5;
    const dist::Range mine = take_share(end - start);
    if (mine.size() == 0) return {};
    const std::vector<int64_t> idx(order_.begin() + start + mine.begin, order_.begin() + start + mine.end);
    const std::vector<bool> flip(flips.begin() + mine.begin, flips.begin() + mine.end);
    std::vector<int> labels;
    for (int64_t i : idx) labels.push_back(data_.train.labels[static_cast<size_t>(i)]);
    const Tensor logits = model_->forward(image_batch(data_.train, idx, flip));
    return {ops::cross_entropy(logits, Tensor::from_values(labels), 0.0f, -1), mine.size()};
  }

  // Each process evaluates its share of the held-out images.
  Validation validate() override {
    const dist::Range mine = share(data_.valid.count);
    const Evaluation e = evaluate_images(*model_, data_.valid, mine.begin, mine.size());
    const std::vector<double> sums =
        dist::sum_over(comm_, {e.loss * static_cast<double>(e.images), static_cast<double>(e.correct), static_cast<double>(e.images)});
    return {{{"valid_loss", sums[0] / sums[2]}, {"accuracy", 100.0 * sums[1] / sums[2]}}, "accuracy"};
  }

 private:
  // An image folder's images, decoded and resized to the model's size; `out` hears what was skipped.
  VitData folder_data(const Folders& folders, const models::StackConfig& config, std::ostream& out) const {
    TFM_CHECK(config.channels == 1 || config.channels == 3, "a model of an image folder takes 1 (grey) or 3 (RGB) channels, not " << config.channels);
    TFM_CHECK(!folders.second.files.empty(), o_.data_dir << ": no image held out for validation (each class needs at least "
                                                         << 1.0 / o_.valid_fraction << " images at --valid-fraction " << o_.valid_fraction
                                                         << "; or give " << o_.data_dir << "/train and " << o_.data_dir << "/val)");
    std::vector<std::string> skipped = folders.first.skipped;
    skipped.insert(skipped.end(), folders.second.skipped.begin(), folders.second.skipped.end());
    std::sort(skipped.begin(), skipped.end());
    skipped.erase(std::unique(skipped.begin(), skipped.end()), skipped.end());  // (a held-out split shares its folder's)
    if (!skipped.empty())
      out << "skipped " << skipped.size() << " entries named as images that are not files (a FIFO, a device, a directory, a broken link): "
           << skipped.front() << (skipped.size() > 1 ? ", ..." : "") << "\n";
    return {data::load_images(folders.first, config.channels, config.image_size, processor_),
            data::load_images(folders.second, config.channels, config.image_size, processor_), o_.data_dir};
  }

  const tfm::VitTask& o_;
  std::vector<std::string> classes_;  // an image folder's class names; empty for MNIST-style files
  std::optional<data::ImageProcessor> processor_;  // a Hugging Face model's, which prepares its images
  VitData data_;
  std::vector<int64_t> order_;
  std::unique_ptr<models::ViT> model_;
  uint64_t seed_ = 0;
  int64_t epoch_ = 0;
};

}  // namespace

tfm::TrainingResult run_vit_training(const TrainerOptions& options, const tfm::VitTask& o, std::ostream& out) {
  TFM_CHECK(o.batch >= 1, "batch must be at least 1");
  Trainer trainer(options, out);
  VitTraining task(o, trainer.started_from(), trainer.started_from_path(), !options.init_from.empty(), out);
  return trainer.run(task);
}

tfm::TrainingOptions vit_training_defaults() {
  tfm::TrainingOptions t = cosine_training("runs/vit", 1e-3f, 1e-5f, /*warmup=*/300, /*beta2=*/0.999f, /*weight_decay=*/0.05f);
  t.epochs = 16;
  t.validate_every = 430;  // about once an epoch at batch 128
  return t;
}

}  // namespace tfm::training
