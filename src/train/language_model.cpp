#include "train/language_model.h"

#include <cmath>

#include "data/tokenizer.h"
#include "decode/sampling.h"
#include "models/gpt.h"
#include "ops/loss.h"
#include "ops/shape.h"
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

// A window is context + 1 tokens: the inputs and, shifted by one, the targets.
class LanguageModelTask : public TextStreamTask {
 public:
  LanguageModelTask(const LanguageModelOptions& o, const std::optional<io::Checkpoint>& resumed, std::ostream& out)
      : TextStreamTask(o.data, "gpt", o.model, o.config_origin, resumed, o.trainer.resume,
                       [](const models::StackConfig& c) { return c.max_len + 1; }, o.batch, out),
        o_(o),
        model_(config_) {}

  nn::Module& model() override { return model_; }
  void init_parameters(Rng& rng) override { model_.init_parameters(rng); }
  io::Checkpoint describe() const override { return describe_config(model_.config().to_json()); }
  BatchLoss batch_loss(int64_t index) override {
    Rng rng;
    return {window_loss(train_, window_starts(index, rng)), batch_ * (window_ - 1)};
  }
  Validation validate() override {
    double nll = 0;
    int64_t windows = 0;
    for_each_valid_batch([&](const std::vector<int64_t>& starts) {
      nll += window_loss(valid_, starts).item() * static_cast<double>(starts.size());
      windows += static_cast<int64_t>(starts.size());
    });
    const double loss = nll / static_cast<double>(windows);
    return {{{"valid_loss", loss}, {"valid_ppl", std::exp(loss)}}, "valid_loss", /*higher_is_better=*/false};
  }
  std::string report() override;

 private:
  // Mean next-token loss of tokens[s .. s+T) predicting tokens[s+1 .. s+T] for each start s.
  Tensor window_loss(const std::vector<int>& tokens, const std::vector<int64_t>& starts) {
    const int64_t T = window_ - 1;
    std::vector<int> x, y;
    for (int64_t s : starts) {
      x.insert(x.end(), tokens.begin() + s, tokens.begin() + s + T);
      y.insert(y.end(), tokens.begin() + s + 1, tokens.begin() + s + T + 1);
    }
    const models::Tokens input(x, static_cast<int64_t>(starts.size()), T);
    Tensor logits = ops::reshape(model_.forward(input), {-1, model_.config().vocab});  // [batch * context, vocab]
    return ops::cross_entropy(logits, Tensor::from_values(y), 0.0f, /*ignore_index=*/-1);
  }

  const LanguageModelOptions& o_;
  models::GPT model_;
};

std::string LanguageModelTask::report() {
  if (o_.sample_tokens <= 0) return "";
  decode::SamplingOptions s;
  s.max_new_tokens = o_.sample_tokens;
  const std::vector<int> sample = decode::generate(model_, {tokenizer_.line_break_id()}, s);
  return "sample (temperature 0.8):\n" + tokenizer_.decode(sample);
}

}  // namespace

int run_language_model_training(const LanguageModelOptions& o, std::ostream& out) {
  Trainer trainer(o.trainer, out);
  LanguageModelTask task(o, trainer.resumed(), out);
  return trainer.run(task);
}

}  // namespace tfm::train
