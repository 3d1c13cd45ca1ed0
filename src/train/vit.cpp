#include "train/vit.h"

#include <algorithm>
#include <numeric>

#include "autograd/autograd.h"
#include "ops/convert.h"
#include "ops/loss.h"
#include "ops/shape.h"
#include "tensor/error.h"
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
  const int64_t n = static_cast<int64_t>(indices.size()), R = set.rows, C = set.cols;
  Tensor x = Tensor::empty({n, 1, R, C}, DType::u8);
  uint8_t* d = x.data_as<uint8_t>();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* img = set.pixels.data() + indices[static_cast<size_t>(i)] * R * C;
    const bool mirror = !flip.empty() && flip[static_cast<size_t>(i)];
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) d[(i * R + r) * C + c] = img[r * C + (mirror ? C - 1 - c : c)];
  }
  return ops::from_pixels(x);
}

Evaluation evaluate_images(models::ViT& model, const data::ImageSet& set, int64_t first, int64_t count) {
  autograd::NoGradGuard no_grad;
  const int64_t classes = model.config().classes;
  Evaluation e;
  e.confusion.assign(static_cast<size_t>(classes * classes), 0);
  for (int64_t start = first; start < first + count; start += 500) {
    std::vector<int64_t> idx(static_cast<size_t>(std::min<int64_t>(500, first + count - start)));
    std::iota(idx.begin(), idx.end(), start);
    Tensor logits = ops::contiguous(model.forward(image_batch(set, idx)));  // [n, classes]
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

class VitTraining : public TrainingTask {
 public:
  VitTraining(const tfm::VitTask& o, const std::optional<io::Checkpoint>& resumed, const std::string& resume_path, std::ostream& out)
      : o_(o) {
    const ModelSettings settings(o.config, o.model);
    models::StackConfig config = settings.over(default_vit());
    if (resumed) {
      io::check_model_kind(resumed->model_kind, {"vit"}, resume_path, "a vit one");
      const models::StackConfig saved = models::StackConfig::from_json(resumed->config_json, resume_path, "vit");
      settings.check_kept(config.to_json(), saved.to_json(), resume_path);
      config = saved;
    } else {
      config = config.validated(settings.origin());
    }
    train_set_ = data::read_image_split(o.data_dir, /*train=*/true, config.classes);
    TFM_CHECK(train_set_.rows == config.image_size && train_set_.cols == config.image_size && config.channels == 1,
              o.data_dir << ": images are " << train_set_.rows << "x" << train_set_.cols << " grey, the model expects "
                         << config.image_size << "x" << config.image_size << " with " << config.channels << " channel(s)");
    TFM_CHECK(o.valid_images > 0 && o.valid_images < train_set_.count,
              "--valid-images must be between 1 and " << train_set_.count - 1);
    train_count_ = train_set_.count - o.valid_images;
    model_ = std::make_unique<models::ViT>(config);
    out << "images: " << train_count_ << " for training, " << o.valid_images << " held out for validation ("
        << train_set_.rows << "x" << train_set_.cols << ", " << count_of(config.patches(), "patch", "patches") << " of " << config.patch << "x"
        << config.patch << ")\n";
  }

  nn::Module& model() override { return *model_; }
  void init_parameters(Rng& rng) override { model_->init_parameters(rng); }
  io::Checkpoint describe() const override { return {"vit", model_->config().to_json(), {}, "", {}}; }
  std::string unit() const override { return "img"; }

  int64_t begin_epoch(int64_t epoch, uint64_t seed) override {
    seed_ = seed, epoch_ = epoch;
    order_.resize(static_cast<size_t>(train_count_));
    std::iota(order_.begin(), order_.end(), 0);
    Rng rng = substream(seed, static_cast<uint64_t>(epoch));
    for (size_t i = order_.size() - 1; i > 0; --i) std::swap(order_[i], order_[static_cast<size_t>(rng.randint(0, static_cast<int64_t>(i) + 1))]);
    return (train_count_ + o_.batch - 1) / o_.batch;
  }

  BatchLoss batch_loss(int64_t index) override {
    const int64_t start = index * o_.batch, end = std::min(start + o_.batch, train_count_);
    std::vector<bool> flips(static_cast<size_t>(end - start));  // drawn for the whole batch, whichever share this process takes
    Rng rng = substream(seed_, static_cast<uint64_t>(epoch_), static_cast<uint64_t>(index) + 1);
    for (size_t i = 0; i < flips.size(); ++i) flips[i] = o_.flip && rng.uniform() < 0.5;
    const dist::Range mine = take_share(end - start);
    if (mine.size() == 0) return {};
    const std::vector<int64_t> idx(order_.begin() + start + mine.begin, order_.begin() + start + mine.end);
    const std::vector<bool> flip(flips.begin() + mine.begin, flips.begin() + mine.end);
    std::vector<int> labels;
    for (int64_t i : idx) labels.push_back(train_set_.labels[static_cast<size_t>(i)]);
    return {ops::cross_entropy(model_->forward(image_batch(train_set_, idx, flip)), Tensor::from_values(labels), 0.0f, -1), mine.size()};
  }

  // Each process evaluates its share of the held-out images.
  Validation validate() override {
    const dist::Range mine = share(o_.valid_images);
    const Evaluation e = evaluate_images(*model_, train_set_, train_count_ + mine.begin, mine.size());
    const std::vector<double> sums =
        dist::sum_over(comm_, {e.loss * static_cast<double>(e.images), static_cast<double>(e.correct), static_cast<double>(e.images)});
    return {{{"valid_loss", sums[0] / sums[2]}, {"accuracy", 100.0 * sums[1] / sums[2]}}, "accuracy"};
  }

 private:
  const tfm::VitTask& o_;
  data::ImageSet train_set_;
  int64_t train_count_ = 0;
  std::vector<int64_t> order_;
  std::unique_ptr<models::ViT> model_;
  uint64_t seed_ = 0;
  int64_t epoch_ = 0;
};

}  // namespace

tfm::TrainingResult run_vit_training(const TrainerOptions& options, const tfm::VitTask& o, std::ostream& out) {
  TFM_CHECK(o.batch >= 1, "batch must be at least 1");
  Trainer trainer(options, out);
  VitTraining task(o, trainer.started_from(), trainer.started_from_path(), out);
  return trainer.run(task);
}

}  // namespace tfm::training
