#include "train/language_model.h"

#include <cmath>

#include "data/tokenizer.h"
#include "decode/sampling.h"
#include "models/gpt.h"
#include "ops/loss.h"
#include "tensor/error.h"

namespace tfm::train {

models::StackConfig LanguageModelOptions::default_model() {
  models::StackConfig c;
  c.family = "gpt";
  c.layers = 4, c.heads = 4, c.d_model = 128, c.d_ff = 512, c.max_len = 64, c.dropout = 0.0f;
  return c;
}

TrainerOptions LanguageModelOptions::default_trainer() {
  TrainerOptions t;
  t.out_dir = "runs/lm";
  t.epochs = 1000000;  // random windows: the step count decides
  t.max_steps = 2000;
  t.schedule = {Schedule::Kind::Cosine, 1e-3f, 1e-4f, 100, 0, 0};  // decays over max_steps
  t.adam = {1e-3f, 0.9f, 0.99f, 1e-8f, 0.1f, /*decoupled=*/true};
  t.clip_norm = 1.0;
  t.validate_every = 250;
  return t;
}

namespace {

class LanguageModelTask : public TrainingTask {
 public:
  LanguageModelTask(const LanguageModelOptions& o, const std::optional<io::Checkpoint>& resumed, std::ostream& out);

  nn::Module& model() override { return *model_; }
  void init_parameters(Rng& rng) override { model_->init_parameters(rng); }
  io::Checkpoint describe() const override {
    return {"gpt", model_->config().to_json(), {}, "", {{"tfm.tokenizer", tokenizer_.record()}}};
  }
  int64_t begin_epoch(int64_t epoch, uint64_t seed) override {
    seed_ = seed, epoch_ = epoch;
    return std::max<int64_t>(1, static_cast<int64_t>(train_.size()) / (o_.batch * context()));
  }
  BatchLoss batch_loss(int64_t index) override;
  Validation validate() override;
  std::string report() override;

 private:
  int64_t context() const { return model_->config().max_len; }
  Tensor window_loss(const std::vector<int>& tokens, const std::vector<int64_t>& starts);

  const LanguageModelOptions& o_;
  data::Tokenizer tokenizer_;
  std::vector<int> train_, valid_;
  std::unique_ptr<models::GPT> model_;
  uint64_t seed_ = 0;
  int64_t epoch_ = 0;
};

LanguageModelTask::LanguageModelTask(const LanguageModelOptions& o, const std::optional<io::Checkpoint>& resumed, std::ostream& out)
    : o_(o) {
  TextData d = load_text_data(o.data, resumed, o.trainer.resume, "gpt");
  tokenizer_ = std::move(d.tokenizer), train_ = std::move(d.train), valid_ = std::move(d.valid);
  models::StackConfig config = o.config_path.empty() ? o.model : models::StackConfig::from_file(o.config_path);
  if (resumed) config = models::StackConfig::from_json(resumed->config_json, o.trainer.resume);
  config.family = "gpt";
  config.vocab = tokenizer_.size();
  TFM_CHECK(static_cast<int64_t>(train_.size()) > config.max_len + 1 && static_cast<int64_t>(valid_.size()) > config.max_len + 1,
            o.data.text << ": too short: training and validation text need more than " << config.max_len + 1 << " tokens each (have "
                   << train_.size() << " and " << valid_.size() << ")");
  model_ = std::make_unique<models::GPT>(config);
  out << "text: " << train_.size() << " training and " << valid_.size() << " validation tokens, vocabulary " << tokenizer_.size()
      << (tokenizer_.is_characters() ? " (characters)" : " (SentencePiece)") << "\n";
}

// Mean next-token loss of windows tokens[s .. s+context) predicting tokens[s+1 .. s+context].
Tensor LanguageModelTask::window_loss(const std::vector<int>& tokens, const std::vector<int64_t>& starts) {
  const int64_t T = context();
  models::Tokens x{{}, static_cast<int64_t>(starts.size()), T};
  std::vector<int> y;
  for (int64_t s : starts) {
    x.ids.insert(x.ids.end(), tokens.begin() + s, tokens.begin() + s + T);
    y.insert(y.end(), tokens.begin() + s + 1, tokens.begin() + s + T + 1);
  }
  Tensor logits = model_->forward(x).reshape({-1, model_->config().vocab});  // [batch * context, vocab]
  return ops::cross_entropy(logits, y, 0.0f, /*ignore_index=*/-1);
}

TrainingTask::BatchLoss LanguageModelTask::batch_loss(int64_t index) {
  Rng rng = substream(seed_, static_cast<uint64_t>(epoch_), static_cast<uint64_t>(index));
  std::vector<int64_t> starts(static_cast<size_t>(o_.batch));
  for (int64_t& s : starts) s = rng.randint(0, static_cast<int64_t>(train_.size()) - context());
  return {window_loss(train_, starts), o_.batch * context()};
}

Validation LanguageModelTask::validate() {
  // Every whole window of the held-out text, 32 windows a batch.
  double nll = 0;
  int64_t windows = 0;
  std::vector<int64_t> starts;
  const auto flush = [&] {
    nll += window_loss(valid_, starts).item() * static_cast<double>(starts.size());
    windows += static_cast<int64_t>(starts.size());
    starts.clear();
  };
  for (int64_t s = 0; s + context() < static_cast<int64_t>(valid_.size()); s += context()) {
    starts.push_back(s);
    if (starts.size() == 32) flush();
  }
  if (!starts.empty()) flush();
  const double loss = nll / static_cast<double>(windows);
  return {{{"valid_loss", loss}, {"valid_ppl", std::exp(loss)}}, "valid_loss", /*higher_is_better=*/false};
}

std::string LanguageModelTask::report() {
  if (o_.sample_tokens <= 0) return "";
  decode::SamplingOptions s;
  s.max_new_tokens = o_.sample_tokens;
  const std::vector<int> sample = decode::generate(*model_, {tokenizer_.line_break_id()}, s);
  return "sample (temperature 0.8):\n" + tokenizer_.decode(sample);
}

}  // namespace

int run_language_model_training(const LanguageModelOptions& o, std::ostream& out) {
  TFM_CHECK(o.batch >= 1, "batch must be at least 1");
  Trainer trainer(o.trainer, out);
  LanguageModelTask task(o, trainer.resumed(), out);
  return trainer.run(task);
}

}  // namespace tfm::train
