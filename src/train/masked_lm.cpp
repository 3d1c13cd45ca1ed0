#include "train/masked_lm.h"

#include <algorithm>

#include "ops/embedding.h"
#include "ops/convert.h"
#include "ops/loss.h"
#include "ops/shape.h"
#include "tensor/error.h"
#include "train/schedule.h"
#include "train/text_data.h"

namespace tfm::training {

models::StackConfig default_masked_lm() {
  models::StackConfig c;
  c.family = "bert";
  c.layers = 4, c.heads = 4, c.d_model = 128, c.d_ff = 512, c.max_len = 64, c.dropout = 0.0f;
  return c;
}

std::vector<int> mask_tokens(models::Tokens& batch, const data::Tokenizer& tokenizer, double fraction, uint64_t key, int64_t first_row) {
  const int64_t cols = batch.cols();
  std::vector<int> targets(static_cast<size_t>(batch.rows() * cols), -1);
  std::vector<int> regular;  // ids a random replacement may take
  for (int id = 0; id < tokenizer.size(); ++id)
    if (!tokenizer.is_special(id)) regular.push_back(id);
  for (int64_t r = 0; r < batch.rows(); ++r) {
    Rng rng = substream(key, static_cast<uint64_t>(first_row + r));
    int32_t* ids = batch.data() + r * cols;
    int* target = targets.data() + r * cols;
    bool any = false;
    for (int64_t i = 0; i < cols; ++i) {
      if (tokenizer.is_special(ids[i]) && ids[i] != tokenizer.unk_id()) continue;  // [CLS], padding
      if (rng.uniform() >= fraction) continue;
      target[i] = ids[i];
      any = true;
      const double u = rng.uniform();
      if (u < 0.8) ids[i] = tokenizer.mask_id();
      else if (u < 0.9) ids[i] = regular[static_cast<size_t>(rng.randint(0, static_cast<int64_t>(regular.size())))];
    }
    if (!any && cols > 1) {  // every row has a target: a process's share of a batch has a loss
      target[1] = ids[1];
      ids[1] = tokenizer.mask_id();
    }
  }
  return targets;
}

namespace {

// A window is max_len - 1 tokens of the stream after [CLS].
class MaskedLmTraining : public TextStreamTask {
 public:
  MaskedLmTraining(const tfm::MaskedLmTask& o, const ModelSettings& settings, const std::optional<io::Checkpoint>& resumed,
                   const std::string& resume_path, std::ostream& out)
      : TextStreamTask(o.data, "bert", settings.over(default_masked_lm()), settings, resumed, resume_path,
                       [](const models::StackConfig& c) { return c.max_len - 1; }, o.batch, out),
        o_(o),
        model_(config_, data::Tokenizer::kPad) {
    TFM_CHECK(config_.head == "mlm", "the model is a BERT whose head is " << config_.head
                                         << ", without the masked-language-model head this training needs (start from a BertForMaskedLM "
                                            "or BertForPreTraining, or a checkpoint of tfm bert train)");
  }

  nn::Module& model() override { return model_; }
  void init_parameters(Rng& rng) override { model_.init_parameters(rng); }
  io::Checkpoint describe() const override { return describe_config(model_.config().to_json()); }
  BatchLoss batch_loss(int64_t index) override {
    Rng rng;
    const std::vector<int64_t> starts = window_starts(index, rng);
    const uint64_t mask_key = rng.next_u64();
    const dist::Range mine = take_share(batch_);
    if (mine.size() == 0) return {};
    const Masked m = masked_loss(train_, {starts.begin() + mine.begin, starts.begin() + mine.end}, mask_key, mine.begin);
    return {m.loss, mine.size() * (window_ + 1), m.targets};
  }
  Validation validate() override;

 private:
  struct Masked {
    Tensor loss, logits;      // logits [targets, vocab]
    std::vector<int> labels;  // the original tokens at the chosen positions
    int64_t targets = 0;
  };
  // The windows at `starts`, rows [first_row, ...) of a batch masked with `mask_key`.
  Masked masked_loss(const std::vector<int>& tokens, const std::vector<int64_t>& starts, uint64_t mask_key, int64_t first_row);

  const tfm::MaskedLmTask& o_;
  models::BERT model_;
};

MaskedLmTraining::Masked MaskedLmTraining::masked_loss(const std::vector<int>& tokens, const std::vector<int64_t>& starts, uint64_t mask_key,
                                                       int64_t first_row) {
  std::vector<int> ids;
  for (int64_t s : starts) {
    ids.push_back(tokenizer_.cls_id());
    ids.insert(ids.end(), tokens.begin() + s, tokens.begin() + s + window_);
  }
  models::Tokens x(ids, static_cast<int64_t>(starts.size()), window_ + 1);
  const std::vector<int> targets = mask_tokens(x, tokenizer_, o_.mask_fraction, mask_key, first_row);
  Masked m;
  std::vector<int> rows;  // flat positions of the targets
  for (size_t i = 0; i < targets.size(); ++i)
    if (targets[i] >= 0) rows.push_back(static_cast<int>(i)), m.labels.push_back(targets[i]);
  const int64_t D = model_.config().d_model;
  Tensor hidden = ops::reshape(model_.encode(x), {-1, D});                                        // [batch * len, d_model]
  const Tensor chosen_rows = Tensor::from_values<int32_t>({static_cast<int64_t>(rows.size())}, rows);  // (copied over by embedding)
  Tensor chosen = ops::embedding(hidden, chosen_rows);  // [targets, d_model]
  m.logits = model_.mlm_logits(chosen);                 // [targets, vocab]
  m.loss = ops::cross_entropy(m.logits, Tensor::from_values(m.labels), 0.0f, -1);
  m.targets = static_cast<int64_t>(rows.size());
  return m;
}

Validation MaskedLmTraining::validate() {
  double nll = 0, targets = 0, correct = 0;
  for_each_valid_batch([&](const std::vector<int64_t>& starts, int64_t batch) {
    const uint64_t mask_key = substream(12345, static_cast<uint64_t>(batch)).next_u64();  // the same masking at every validation
    Masked m = masked_loss(valid_, starts, mask_key, 0);
    nll += m.loss.item() * static_cast<double>(m.targets);
    const Tensor logits = ops::contiguous(ops::to(m.logits, Device::CPU));
    const int64_t V = logits.size(1);
    for (int64_t i = 0; i < m.targets; ++i) {
      const float* row = logits.data() + i * V;
      correct += std::max_element(row, row + V) - row == m.labels[static_cast<size_t>(i)];
    }
    targets += static_cast<double>(m.targets);
  });
  const std::vector<double> sums = dist::sum_over(comm_, {nll, targets, correct});
  return {{{"valid_loss", sums[0] / sums[1]}, {"masked_accuracy", 100.0 * sums[2] / sums[1]}}, "masked_accuracy"};
}

}  // namespace

tfm::TrainingResult run_masked_lm_training(const TrainerOptions& options, const tfm::MaskedLmTask& o, std::ostream& out) {
  TFM_CHECK(o.mask_fraction > 0 && o.mask_fraction < 1, "the mask fraction must be in (0, 1)");
  Trainer trainer(options, out);
  MaskedLmTraining task(o, ModelSettings(o.config, o.model), trainer.started_from(), trainer.started_from_path(), out);
  return trainer.run(task);
}

tfm::TrainingOptions masked_lm_training_defaults() {
  // A high peak rate: with [MASK] in place of a token, the model must learn to read its
  // neighbours through the learned positions, and at 5e-4 it stays on the unigram plateau.
  return steps_of_windows(cosine_training("runs/bert", 2e-3f, 1e-5f, /*warmup=*/200, /*beta2=*/0.999f, /*weight_decay=*/0.01f), 3000, 500);
}

}  // namespace tfm::training
