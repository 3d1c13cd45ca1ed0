#include "train/sentence_classifier.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <numeric>
#include <optional>
#include <set>

#include "autograd/autograd.h"
#include "data/labelled_text.h"
#include "data/tokenizer.h"
#include "decode/family_checkpoint.h"
#include "io/safetensors.h"
#include "models/bert.h"
#include "ops/convert.h"
#include "ops/loss.h"
#include "ops/shape.h"
#include "tensor/error.h"
#include "train/data_parallel.h"
#include "train/progress.h"
#include "train/schedule.h"

namespace tfm::training {

namespace {

constexpr int64_t kValidBatch = 64;

struct Example {
  std::vector<int> ids;  // [CLS] ... [SEP], within the model's input
  int label = 0;
};

// The labels the training sentences name, in name order (the classifier's ids).
std::vector<std::string> label_names(const std::vector<data::LabelledText>& rows) {
  std::set<std::string> names;
  for (const data::LabelledText& r : rows) names.insert(r.label);
  return {names.begin(), names.end()};
}

// Every 10th sentence, held out where there is no validation file.
std::pair<std::vector<data::LabelledText>, std::vector<data::LabelledText>> hold_out(const std::vector<data::LabelledText>& rows,
                                                                                     const std::string& origin) {
  TFM_CHECK(rows.size() >= 10, origin << ": " << rows.size() << " sentences; hold out a tenth for validation needs at least 10 (or give --valid)");
  std::pair<std::vector<data::LabelledText>, std::vector<data::LabelledText>> split;
  for (size_t i = 0; i < rows.size(); ++i) (i % 10 == 9 ? split.second : split.first).push_back(rows[i]);
  return split;
}

// The padded ids [rows, longest] of some examples.
models::Tokens padded(const std::vector<const Example*>& examples) {
  size_t longest = 0;
  for (const Example* e : examples) longest = std::max(longest, e->ids.size());
  std::vector<int> ids(examples.size() * longest, data::Tokenizer::kPad);
  for (size_t r = 0; r < examples.size(); ++r) std::copy(examples[r]->ids.begin(), examples[r]->ids.end(), ids.begin() + r * longest);
  return {ids, static_cast<int64_t>(examples.size()), static_cast<int64_t>(longest)};
}

class SentenceClassifierTraining : public TrainingTask {
 public:
  SentenceClassifierTraining(const tfm::SentenceClassifierTask& o, const std::optional<io::Checkpoint>& start, const std::string& start_path,
                             bool resuming, std::ostream& out)
      : o_(o), resuming_(resuming) {
    TFM_CHECK(start, "a sentence classifier is fine-tuned from a pretrained BERT: give --init-from (a checkpoint of tfm bert train, "
                     "or a Hugging Face BERT directory), or --resume");
    io::check_model_kind(start->model_kind, {"bert"}, start_path, "a BERT");
    const models::StackConfig saved = models::StackConfig::from_json(start->config_json, start_path, "bert");
    const auto tokenizer = start->metadata.find("tfm.tokenizer");
    TFM_CHECK(tokenizer != start->metadata.end(), start_path << ": records no tokenizer");
    tokenizer_.emplace(data::Tokenizer::from_record(tokenizer->second, start_path, o.vocab));
    const std::vector<data::LabelledText> rows = data::read_labelled_text(o.train);
    const auto [train, valid] = o.valid.empty() ? hold_out(rows, o.train) : std::pair(rows, data::read_labelled_text(o.valid));
    labels_ = label_names(train);
    TFM_CHECK(labels_.size() >= 2, o.train << ": every sentence has the label " << labels_[0] << "; a classifier needs two or more");
    const std::vector<std::string> saved_labels =
        saved.head == "sequence" && !saved.multi_label ? decode::recorded_text_labels(start->metadata, saved.classes, start_path) : std::vector<std::string>{};
    keeps_classifier_ = saved_labels == labels_;
    config_ = saved;
    config_.head = "sequence", config_.pooler = true, config_.multi_label = false;
    config_.classes = static_cast<int64_t>(labels_.size());
    config_ = config_.validated(start_path);
    fresh_pooler_ = !saved.pooler;
    train_ = encode(train, o.train);
    valid_ = encode(valid, o.valid.empty() ? o.train + " (held out)" : o.valid);
    model_ = std::make_unique<models::BERT>(config_, data::Tokenizer::kPad);
    out << "sentences: " << train_.size() << " for training, " << valid_.size() << " for validation; "
        << count_of(static_cast<int64_t>(labels_.size()), "label", "labels") << " (" << names() << "); " << majority_baseline() << "\n";
  }

  nn::Module& model() override { return *model_; }
  void init_parameters(Rng& rng) override { model_->init_parameters(rng); }

  // The encoder (and pooler, and a classifier of the same labels) from the file; the rest fresh.
  std::string init_from(const io::SafeTensors& file, const std::string& origin, Rng& rng) override {
    (void)origin;
    model_->init_parameters(rng);
    for (auto [name, p] : model_->named_parameters()) {
      const Tensor* src = file.find(name);
      if (src && src->shape() == p.shape() && (keeps_classifier_ || !name.starts_with("classifier."))) p.copy_from(io::to_f32(*src));
    }
    return std::string(": its encoder") + (fresh_pooler_ ? ", a new pooler" : "") +
           (keeps_classifier_ ? ", its classifier of these labels" : ", a new classifier of " + std::to_string(labels_.size()) + " labels");
  }

  io::Checkpoint describe() const override {
    return {"bert", config_.to_json(), {}, "", {{"tfm.tokenizer", tokenizer_->record()}, {decode::kTextLabelsKey, decode::classes_record(labels_)}}};
  }

  void check_resumable(const io::Checkpoint& saved, const std::string& origin) const override {
    if (!resuming_) return;  // (fine-tuning may give the classifier other labels)
    const models::StackConfig c = models::StackConfig::from_json(saved.config_json, origin, "bert");
    const std::vector<std::string> trained_on = c.classifies_text() ? decode::recorded_text_labels(saved.metadata, c.classes, origin) : std::vector<std::string>{};
    TFM_CHECK(trained_on == labels_, origin << ": was trained on other labels than " << o_.train << "'s (" << names() << ")");
  }

  std::string unit() const override { return "sent"; }
  std::string data_fingerprint() const override {
    uint64_t h = 1469598103934665603ull;
    for (const Example& e : train_) h = fnv1a(&e.label, sizeof(e.label), fnv1a(e.ids.data(), e.ids.size() * sizeof(int), h));
    return fingerprint(train_.size(), "training sentences", h);
  }

  int64_t begin_epoch(int64_t epoch, uint64_t seed) override {
    order_.resize(train_.size());
    std::iota(order_.begin(), order_.end(), 0);
    Rng rng = substream(seed, static_cast<uint64_t>(epoch));
    for (size_t i = order_.size() - 1; i > 0; --i) std::swap(order_[i], order_[static_cast<size_t>(rng.randint(0, static_cast<int64_t>(i) + 1))]);
    return (static_cast<int64_t>(train_.size()) + o_.batch - 1) / o_.batch;
  }

  BatchLoss batch_loss(int64_t index) override {
    const int64_t start = index * o_.batch, end = std::min<int64_t>(start + o_.batch, static_cast<int64_t>(train_.size()));
    std::vector<const Example*> batch;
    for (int64_t i = start; i < end; ++i) batch.push_back(&train_[static_cast<size_t>(order_[static_cast<size_t>(i)])]);
    const models::Tokens all = padded(batch);  // (every process pads its share as the whole batch is)
    const dist::Range mine = take_share(end - start);
    if (mine.size() == 0) return {};
    std::vector<const Example*> share(batch.begin() + mine.begin, batch.begin() + mine.end);
    models::Tokens ids = padded(share);
    if (ids.cols() < all.cols()) ids = pad_to(share, all.cols());
    return {ops::cross_entropy(model_->classify(model_->encode(ids)), labels_of(share), 0.0f, -1), mine.size()};
  }

  // Each process classifies its share of the held-out sentences.
  Validation validate() override {
    autograd::NoGradGuard no_grad;
    const dist::Range mine = share(static_cast<int64_t>(valid_.size()));
    double loss = 0, correct = 0;
    for (int64_t first = mine.begin; first < mine.end; first += kValidBatch) {
      std::vector<const Example*> batch;
      for (int64_t i = first; i < std::min(mine.end, first + kValidBatch); ++i) batch.push_back(&valid_[static_cast<size_t>(i)]);
      const Tensor logits = ops::contiguous(ops::to(model_->classify(model_->encode(padded(batch))), Device::CPU));  // [n, labels]
      const Tensor labels = labels_of(batch);
      loss += ops::cross_entropy(logits, labels, 0.0f, -1).item() * static_cast<double>(batch.size());
      const int64_t K = logits.size(1);
      for (size_t r = 0; r < batch.size(); ++r) {
        const float* row = logits.data() + static_cast<int64_t>(r) * K;
        correct += (std::max_element(row, row + K) - row) == batch[r]->label;
      }
    }
    const std::vector<double> sums = dist::sum_over(comm_, {loss, correct});
    const double n = static_cast<double>(valid_.size());
    return {{{"valid_loss", sums[0] / n}, {"accuracy", 100.0 * sums[1] / n}}, "accuracy"};
  }

 private:
  std::vector<Example> encode(const std::vector<data::LabelledText>& rows, const std::string& origin) const {
    std::vector<Example> out;
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto at = std::find(labels_.begin(), labels_.end(), rows[i].label);
      TFM_CHECK(at != labels_.end(), origin << ": sentence " << i + 1 << " has the label '" << rows[i].label
                                            << "', which no training sentence has (" << names() << ")");
      out.push_back({tokenizer_->sentence(rows[i].text, config_.max_len), static_cast<int>(at - labels_.begin())});
    }
    return out;
  }

  static Tensor labels_of(const std::vector<const Example*>& examples) {
    std::vector<int> labels;
    for (const Example* e : examples) labels.push_back(e->label);
    return Tensor::from_values(labels);
  }

  static models::Tokens pad_to(const std::vector<const Example*>& examples, int64_t cols) {
    std::vector<int> ids(examples.size() * static_cast<size_t>(cols), data::Tokenizer::kPad);
    for (size_t r = 0; r < examples.size(); ++r) std::copy(examples[r]->ids.begin(), examples[r]->ids.end(), ids.begin() + r * cols);
    return {ids, static_cast<int64_t>(examples.size()), cols};
  }

  std::string names() const {
    std::string s;
    for (size_t i = 0; i < labels_.size() && i < 8; ++i) s += (i ? ", " : "") + labels_[i];
    return labels_.size() > 8 ? s + ", ..." : s;
  }

  // "the most frequent label, X, is N% of validation (the majority baseline)".
  std::string majority_baseline() const {
    std::vector<int64_t> counts(labels_.size(), 0);
    for (const Example& e : valid_) ++counts[static_cast<size_t>(e.label)];
    const size_t best = static_cast<size_t>(std::max_element(counts.begin(), counts.end()) - counts.begin());
    std::ostringstream s;
    s << "the majority baseline (always " << labels_[best] << ") scores " << std::fixed << std::setprecision(1)
      << 100.0 * static_cast<double>(counts[best]) / static_cast<double>(valid_.size()) << "% on validation";
    return s.str();
  }

  const tfm::SentenceClassifierTask& o_;
  bool resuming_;
  std::optional<data::Tokenizer> tokenizer_;  // the pretrained model's
  std::vector<std::string> labels_;
  models::StackConfig config_;
  bool keeps_classifier_ = false, fresh_pooler_ = false;
  std::vector<Example> train_, valid_;
  std::vector<int64_t> order_;
  std::unique_ptr<models::BERT> model_;
};

}  // namespace

tfm::TrainingResult run_sentence_classifier_training(const TrainerOptions& options, const tfm::SentenceClassifierTask& o, std::ostream& out) {
  TFM_CHECK(o.batch >= 1, "batch must be at least 1");
  Trainer trainer(options, out);
  SentenceClassifierTraining task(o, trainer.started_from(), trainer.started_from_path(), !options.resume.empty(), out);
  return trainer.run(task);
}

tfm::TrainingOptions sentence_classifier_training_defaults() {
  tfm::TrainingOptions t = cosine_training("runs/classifier", 5e-5f, 0.0f, /*warmup=*/100, /*beta2=*/0.999f, /*weight_decay=*/0.01f);
  t.epochs = 3;
  t.validate_every = 200;
  return t;
}

}  // namespace tfm::training
