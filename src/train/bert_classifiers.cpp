#include "train/bert_classifiers.h"

#include <algorithm>
#include <functional>
#include <iomanip>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "autograd/autograd.h"
#include "data/labelled_text.h"
#include "data/tokenizer.h"
#include "decode/entities.h"
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

void EntityCounts::add(const std::vector<std::string>& gold_labels, const std::vector<std::string>& predicted_labels) {
  const std::vector<decode::EntitySpan> gold_spans = decode::group_entities(gold_labels), found = decode::group_entities(predicted_labels);
  gold += static_cast<int64_t>(gold_spans.size()), predicted += static_cast<int64_t>(found.size());
  for (const decode::EntitySpan& e : found) correct += std::find(gold_spans.begin(), gold_spans.end(), e) != gold_spans.end();
}

double EntityCounts::f1() const {
  const double p = predicted ? static_cast<double>(correct) / static_cast<double>(predicted) : 0.0;
  const double r = gold ? static_cast<double>(correct) / static_cast<double>(gold) : 0.0;
  return p + r > 0 ? 100.0 * 2 * p * r / (p + r) : 0.0;
}

namespace {

constexpr int64_t kValidBatch = 64;

// A sentence as the model reads it, and its targets: one label (a sentence classifier), or
// one a piece (a token classifier: the word's label on its first piece, -1 elsewhere).
struct Example {
  std::vector<int> ids;  // [CLS] ... [SEP], within the model's input
  std::vector<int> targets;
};

// Every 10th item, held out where there is no validation file.
template <class T>
std::pair<std::vector<T>, std::vector<T>> hold_out(const std::vector<T>& items, const std::string& origin, const char* what) {
  TFM_CHECK(items.size() >= 10, origin << ": " << items.size() << " " << what << "; holding out a tenth for validation needs at least 10 (or give --valid)");
  std::pair<std::vector<T>, std::vector<T>> split;
  for (size_t i = 0; i < items.size(); ++i) (i % 10 == 9 ? split.second : split.first).push_back(items[i]);
  return split;
}

// The longest of some examples' ids.
int64_t longest(const std::vector<const Example*>& examples) {
  int64_t cols = 0;
  for (const Example* e : examples) cols = std::max<int64_t>(cols, static_cast<int64_t>(e->ids.size()));
  return cols;
}

// Some examples' ids padded to `cols` (at least their longest): the model's input.
models::Tokens padded(const std::vector<const Example*>& examples, int64_t cols = 0) {
  cols = std::max(cols, longest(examples));
  std::vector<int> ids(examples.size() * static_cast<size_t>(cols), data::Tokenizer::kPad);
  for (size_t r = 0; r < examples.size(); ++r) std::copy(examples[r]->ids.begin(), examples[r]->ids.end(), ids.begin() + r * cols);
  return {ids, static_cast<int64_t>(examples.size()), cols};
}

// The fine-tuning of a BERT classifier of either kind: the pretrained model it starts
// from, the labels' classifier over it, the epochs' order, the checkpoints' records.
class BertFineTuning : public TrainingTask {
 public:
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
    TFM_CHECK(c.head == config_.head, origin << ": is a BERT whose head is " << c.head << ", not " << config_.head
                                             << " (tfm bert classifier resumes sentence classifiers, tfm bert tagger token classifiers)");
    const std::vector<std::string> trained_on = c.classifies_text() ? decode::recorded_text_labels(saved.metadata, c.classes, origin) : std::vector<std::string>{};
    TFM_CHECK(trained_on == labels_, origin << ": was trained on other labels than this data's (" << names() << ")");
  }

  std::string data_fingerprint() const override {
    uint64_t h = 1469598103934665603ull;
    for (const Example& e : train_) h = fnv1a(e.targets.data(), e.targets.size() * sizeof(int), fnv1a(e.ids.data(), e.ids.size() * sizeof(int), h));
    return fingerprint(train_.size(), "training sentences", h);
  }

  int64_t begin_epoch(int64_t epoch, uint64_t seed) override {
    order_.resize(train_.size());
    std::iota(order_.begin(), order_.end(), 0);
    Rng rng = substream(seed, static_cast<uint64_t>(epoch));
    for (size_t i = order_.size() - 1; i > 0; --i) std::swap(order_[i], order_[static_cast<size_t>(rng.randint(0, static_cast<int64_t>(i) + 1))]);
    return (static_cast<int64_t>(train_.size()) + batch_ - 1) / batch_;
  }

  // The share of batch `index` this process computes: its loss over the targets.
  BatchLoss batch_loss(int64_t index) override {
    const int64_t start = index * batch_, end = std::min<int64_t>(start + batch_, static_cast<int64_t>(train_.size()));
    std::vector<const Example*> batch;
    for (int64_t i = start; i < end; ++i) batch.push_back(&train_[static_cast<size_t>(order_[static_cast<size_t>(i)])]);
    const int64_t cols = longest(batch);  // (every process pads its share as the whole batch is)
    const dist::Range mine = take_share(end - start);
    if (mine.size() == 0) return {};
    const std::vector<const Example*> share(batch.begin() + mine.begin, batch.begin() + mine.end);
    const models::Tokens ids = padded(share, cols);
    const auto [scores, targets] = scores_and_targets(ids, share);
    int64_t counted = 0;  // what the loss is a mean over: the labelled sentences or words
    for (const Example* e : share) counted += std::count_if(e->targets.begin(), e->targets.end(), [](int t) { return t >= 0; });
    return {ops::cross_entropy(scores, targets, 0.0f, -1), mine.size(), counted};
  }

 protected:
  // The pretrained model the run starts from: its kind, configuration and tokenizer.
  BertFineTuning(const std::optional<io::Checkpoint>& start, const std::string& start_path, bool resuming, const std::string& vocab,
                 int64_t batch, const char* command)
      : resuming_(resuming), batch_(batch), start_path_(start_path) {
    TFM_CHECK(start, command << " fine-tunes a pretrained BERT: give --init-from (a checkpoint of tfm bert train, or a Hugging Face BERT "
                                "directory), or --resume");
    io::check_model_kind(start->model_kind, {"bert"}, start_path, "a BERT");
    saved_ = models::StackConfig::from_json(start->config_json, start_path, "bert");
    const auto tokenizer = start->metadata.find("tfm.tokenizer");
    TFM_CHECK(tokenizer != start->metadata.end(), start_path << ": records no tokenizer");
    tokenizer_.emplace(data::Tokenizer::from_record(tokenizer->second, start_path, vocab));
    start_metadata_ = start->metadata;
  }

  // The model: the pretrained one's, with a classifier of `labels` as `head`.
  void set_up(std::vector<std::string> labels, const std::string& head) {
    labels_ = std::move(labels);
    TFM_CHECK(labels_.size() >= 2, "the training data has one label, " << labels_[0] << "; a classifier needs two or more");
    const std::vector<std::string> saved_labels = saved_.head == head && !saved_.multi_label
                                                      ? decode::recorded_text_labels(start_metadata_, saved_.classes, start_path_)
                                                      : std::vector<std::string>{};
    keeps_classifier_ = saved_labels == labels_;
    fresh_pooler_ = head == "sequence" && !saved_.pooler;
    config_ = saved_;
    config_.head = head, config_.pooler = head == "sequence", config_.multi_label = false;
    config_.classes = static_cast<int64_t>(labels_.size());
    config_ = config_.validated(start_path_);
    model_ = std::make_unique<models::BERT>(config_, data::Tokenizer::kPad);
  }

  // The label's id; one the training data lacks is an error naming where it is.
  int label_id(const std::string& label, const std::string& where) const {
    const auto at = std::find(labels_.begin(), labels_.end(), label);
    TFM_CHECK(at != labels_.end(), where << " has the label '" << label << "', which the training data does not have (" << names() << ")");
    return static_cast<int>(at - labels_.begin());
  }

  // The classifier's scores [rows, labels] and their targets [rows] (-1: none) of some examples.
  virtual std::pair<Tensor, Tensor> scores_and_targets(const models::Tokens& ids, const std::vector<const Example*>& examples) = 0;

  // This process's share of the validation examples, a batch at a time: f(its examples, scores on the CPU).
  void for_each_valid_batch(const std::function<void(const std::vector<const Example*>&, const Tensor&)>& f) {
    autograd::NoGradGuard no_grad;
    const dist::Range mine = share(static_cast<int64_t>(valid_.size()));
    for (int64_t first = mine.begin; first < mine.end; first += kValidBatch) {
      std::vector<const Example*> batch;
      for (int64_t i = first; i < std::min(mine.end, first + kValidBatch); ++i) batch.push_back(&valid_[static_cast<size_t>(i)]);
      f(batch, ops::contiguous(ops::to(model_->classify(model_->encode(padded(batch))), Device::CPU)));
    }
  }

  std::string names() const {
    std::string s;
    for (size_t i = 0; i < labels_.size() && i < 8; ++i) s += (i ? ", " : "") + labels_[i];
    return labels_.size() > 8 ? s + ", ..." : s;
  }

  const data::Tokenizer& tokenizer() const { return *tokenizer_; }
  int64_t max_len() const { return saved_.max_len; }

  std::vector<std::string> labels_;
  std::vector<Example> train_, valid_;
  std::unique_ptr<models::BERT> model_;

 private:
  bool resuming_;
  int64_t batch_;
  std::string start_path_;
  models::StackConfig saved_, config_;
  std::map<std::string, std::string> start_metadata_;
  std::optional<data::Tokenizer> tokenizer_;  // the pretrained model's
  bool keeps_classifier_ = false, fresh_pooler_ = false;
  std::vector<int64_t> order_;
};

// The labels the training data names, in name order (the classifier's ids).
std::vector<std::string> sorted_labels(const std::vector<std::string>& all) {
  const std::set<std::string> names(all.begin(), all.end());
  return {names.begin(), names.end()};
}

class SentenceClassifierTraining : public BertFineTuning {
 public:
  SentenceClassifierTraining(const tfm::SentenceClassifierTask& o, const std::optional<io::Checkpoint>& start, const std::string& start_path,
                             bool resuming, std::ostream& out)
      : BertFineTuning(start, start_path, resuming, o.vocab, o.batch, "tfm bert classifier") {
    const std::vector<data::LabelledText> rows = data::read_labelled_text(o.train);
    const auto [train, valid] = o.valid.empty() ? hold_out(rows, o.train, "sentences") : std::pair(rows, data::read_labelled_text(o.valid));
    std::vector<std::string> all;
    for (const data::LabelledText& r : train) all.push_back(r.label);
    set_up(sorted_labels(all), "sequence");
    train_ = encode(train, o.train);
    valid_ = encode(valid, o.valid.empty() ? o.train + " (held out)" : o.valid);
    out << "sentences: " << train_.size() << " for training, " << valid_.size() << " for validation; "
        << count_of(static_cast<int64_t>(labels_.size()), "label", "labels") << " (" << names() << "); " << majority_baseline() << "\n";
  }

  std::string unit() const override { return "sent"; }

  Validation validate() override {
    double loss = 0, correct = 0;
    for_each_valid_batch([&](const std::vector<const Example*>& batch, const Tensor& scores) {  // scores [n, labels]
      const auto [logits, targets] = std::pair(scores, targets_of(batch));
      loss += ops::cross_entropy(logits, targets, 0.0f, -1).item() * static_cast<double>(batch.size());
      const int64_t K = logits.size(1);
      for (size_t r = 0; r < batch.size(); ++r) {
        const float* row = logits.data() + static_cast<int64_t>(r) * K;
        correct += (std::max_element(row, row + K) - row) == batch[r]->targets[0];
      }
    });
    const std::vector<double> sums = dist::sum_over(comm_, {loss, correct});
    const double n = static_cast<double>(valid_.size());
    return {{{"valid_loss", sums[0] / n}, {"accuracy", 100.0 * sums[1] / n}}, "accuracy"};
  }

 private:
  std::pair<Tensor, Tensor> scores_and_targets(const models::Tokens& ids, const std::vector<const Example*>& examples) override {
    return {model_->classify(model_->encode(ids)), targets_of(examples)};  // [n, labels], [n]
  }

  static Tensor targets_of(const std::vector<const Example*>& examples) {
    std::vector<int> targets;
    for (const Example* e : examples) targets.push_back(e->targets[0]);
    return Tensor::from_values(targets);
  }

  std::vector<Example> encode(const std::vector<data::LabelledText>& rows, const std::string& origin) const {
    std::vector<Example> out;
    for (size_t i = 0; i < rows.size(); ++i)
      out.push_back({tokenizer().sentence(rows[i].text, max_len()), {label_id(rows[i].label, origin + ": sentence " + std::to_string(i + 1))}});
    return out;
  }

  // "the majority baseline (always X) scores N% on validation".
  std::string majority_baseline() const {
    std::vector<int64_t> counts(labels_.size(), 0);
    for (const Example& e : valid_) ++counts[static_cast<size_t>(e.targets[0])];
    const size_t best = static_cast<size_t>(std::max_element(counts.begin(), counts.end()) - counts.begin());
    std::ostringstream s;
    s << "the majority baseline (always " << labels_[best] << ") scores " << std::fixed << std::setprecision(1)
      << 100.0 * static_cast<double>(counts[best]) / static_cast<double>(valid_.size()) << "% on validation";
    return s.str();
  }
};

class TokenClassifierTraining : public BertFineTuning {
 public:
  TokenClassifierTraining(const tfm::TokenClassifierTask& o, const std::optional<io::Checkpoint>& start, const std::string& start_path,
                          bool resuming, std::ostream& out)
      : BertFineTuning(start, start_path, resuming, o.vocab, o.batch, "tfm bert tagger") {
    const std::vector<data::LabelledWords> rows = data::read_conll(o.train);
    const auto [train, valid] = o.valid.empty() ? hold_out(rows, o.train, "sentences") : std::pair(rows, data::read_conll(o.valid));
    std::vector<std::string> all;
    for (const data::LabelledWords& s : train) all.insert(all.end(), s.labels.begin(), s.labels.end());
    set_up(sorted_labels(all), "token");
    train_ = encode(train, o.train);
    valid_ = encode(valid, o.valid.empty() ? o.train + " (held out)" : o.valid);
    out << "sentences: " << train_.size() << " for training, " << valid_.size() << " for validation; "
        << count_of(static_cast<int64_t>(labels_.size()), "label", "labels") << " (" << names() << ")\n";
  }

  std::string unit() const override { return "sent"; }

  // Entity F1 over the words (each word's first piece), token accuracy, loss.
  Validation validate() override {
    double loss = 0, counted = 0, correct = 0;
    EntityCounts entities;
    for_each_valid_batch([&](const std::vector<const Example*>& batch, const Tensor& scores) {  // scores [n, len, labels]
      const int64_t L = scores.size(1), K = scores.size(2);
      const auto [flat, targets] = std::pair(ops::reshape(scores, {-1, K}), targets_of(batch, L));
      const std::vector<int> t = targets.values<int32_t>();
      const int64_t n = std::count_if(t.begin(), t.end(), [](int x) { return x >= 0; });
      if (n > 0) loss += ops::cross_entropy(flat, targets, 0.0f, -1).item() * static_cast<double>(n), counted += static_cast<double>(n);
      for (size_t r = 0; r < batch.size(); ++r) {
        std::vector<std::string> gold, predicted;
        for (int64_t i = 0; i < static_cast<int64_t>(batch[r]->targets.size()); ++i) {
          if (batch[r]->targets[static_cast<size_t>(i)] < 0) continue;
          const float* row = scores.data() + (static_cast<int64_t>(r) * L + i) * K;
          const int64_t best = std::max_element(row, row + K) - row;
          correct += best == batch[r]->targets[static_cast<size_t>(i)];
          gold.push_back(labels_[static_cast<size_t>(batch[r]->targets[static_cast<size_t>(i)])]), predicted.push_back(labels_[static_cast<size_t>(best)]);
        }
        entities.add(gold, predicted);
      }
    });
    const std::vector<double> sums = dist::sum_over(
        comm_, {loss, counted, correct, static_cast<double>(entities.gold), static_cast<double>(entities.predicted), static_cast<double>(entities.correct)});
    const EntityCounts all{static_cast<int64_t>(sums[3]), static_cast<int64_t>(sums[4]), static_cast<int64_t>(sums[5])};
    return {{{"valid_loss", sums[0] / std::max(sums[1], 1.0)}, {"entity_f1", all.f1()}, {"token_accuracy", 100.0 * sums[2] / std::max(sums[1], 1.0)}},
            "entity_f1"};
  }

 private:
  std::pair<Tensor, Tensor> scores_and_targets(const models::Tokens& ids, const std::vector<const Example*>& examples) override {
    const Tensor scores = model_->classify(model_->encode(ids));  // [n, len, labels]
    return {ops::reshape(scores, {-1, scores.size(2)}), targets_of(examples, ids.cols())};
  }

  // The pieces' targets [n * cols], -1 past each sentence's end.
  static Tensor targets_of(const std::vector<const Example*>& examples, int64_t cols) {
    std::vector<int> targets(examples.size() * static_cast<size_t>(cols), -1);
    for (size_t r = 0; r < examples.size(); ++r) std::copy(examples[r]->targets.begin(), examples[r]->targets.end(), targets.begin() + r * cols);
    return Tensor::from_values(targets);
  }

  // The ids of a word's pieces (a WordPiece tokenizer's [CLS] and [SEP] off).
  std::vector<int> pieces(const std::string& word) const {
    std::vector<int> ids = tokenizer().encode(word);
    if (tokenizer().describe() == "WordPiece" && ids.size() >= 2) ids = {ids.begin() + 1, ids.end() - 1};
    return ids;
  }

  // [CLS], each word's pieces (its label on the first), [SEP] where the tokenizer ends
  // sentences with one; words past the model's input are cut off.
  std::vector<Example> encode(const std::vector<data::LabelledWords>& sentences, const std::string& origin) const {
    const std::vector<int> frame = tokenizer().sentence("", max_len());  // [CLS] (and [SEP])
    const size_t room = static_cast<size_t>(max_len()) - frame.size();
    std::vector<Example> out;
    for (size_t s = 0; s < sentences.size(); ++s) {
      Example e{{frame[0]}, {-1}};
      for (size_t w = 0; w < sentences[s].words.size(); ++w) {
        const std::vector<int> p = pieces(sentences[s].words[w]);
        if (e.ids.size() - 1 + p.size() > room) break;  // the rest of the sentence is past the model's input
        if (p.empty()) continue;                          // (a word of no pieces: nothing to label)
        const int label = label_id(sentences[s].labels[w], origin + ": sentence " + std::to_string(s + 1) + ", word " + std::to_string(w + 1));
        for (size_t i = 0; i < p.size(); ++i) e.ids.push_back(p[i]), e.targets.push_back(i == 0 ? label : -1);
      }
      if (frame.size() == 2) e.ids.push_back(frame[1]), e.targets.push_back(-1);
      out.push_back(std::move(e));
    }
    return out;
  }
};

}  // namespace

namespace {

// A run of either fine-tuning (Training: its task class, from the public settings `o`).
template <class Training, class Task>
tfm::TrainingResult run_fine_tuning(const TrainerOptions& options, const Task& o, std::ostream& out) {
  TFM_CHECK(o.batch >= 1, "batch must be at least 1");
  Trainer trainer(options, out);
  Training task(o, trainer.started_from(), trainer.started_from_path(), !options.resume.empty(), out);
  return trainer.run(task);
}

}  // namespace

tfm::TrainingResult run_sentence_classifier_training(const TrainerOptions& options, const tfm::SentenceClassifierTask& o, std::ostream& out) {
  return run_fine_tuning<SentenceClassifierTraining>(options, o, out);
}

tfm::TrainingResult run_token_classifier_training(const TrainerOptions& options, const tfm::TokenClassifierTask& o, std::ostream& out) {
  return run_fine_tuning<TokenClassifierTraining>(options, o, out);
}

tfm::TrainingOptions sentence_classifier_training_defaults() {
  tfm::TrainingOptions t = cosine_training("runs/classifier", 5e-5f, 0.0f, /*warmup=*/100, /*beta2=*/0.999f, /*weight_decay=*/0.01f);
  t.epochs = 3;
  t.validate_every = 200;
  return t;
}

tfm::TrainingOptions token_classifier_training_defaults() {
  tfm::TrainingOptions t = sentence_classifier_training_defaults();
  t.out_dir = "runs/tagger";
  return t;
}

}  // namespace tfm::training
