#include "train/language_model.h"

#include <cmath>
#include <filesystem>
#include <memory>
#include <sstream>

#include "data/tokenizer.h"
#include "decode/hf_checkpoint.h"
#include "decode/sampling.h"
#include "io/checkpoint.h"
#include "models/gpt.h"
#include "models/lora.h"
#include "ops/convert.h"
#include "ops/loss.h"
#include "ops/shape.h"
#include "tensor/error.h"
#include "train/data_parallel.h"
#include "train/schedule.h"
#include "train/text_data.h"

namespace tfm::training {

models::StackConfig default_language_model() {
  models::StackConfig c;
  c.family = "gpt";
  c.layers = 4, c.heads = 4, c.d_model = 128, c.d_ff = 512, c.max_len = 64, c.dropout = 0.0f;
  return c;
}

namespace {

// The model the task's settings choose: d_ff is 4 x d_model unless given, as in GPT-2.
models::StackConfig chosen_model(const ModelSettings& settings) {
  models::StackConfig c = settings.over(default_language_model());
  if (!settings.gives("d_ff")) c.d_ff = 4 * c.d_model;
  return c;
}

// A window is context + 1 tokens: the inputs and, shifted by one, the targets.

class LanguageModelTraining : public TextStreamTask {
 public:
  LanguageModelTraining(const tfm::LanguageModelTask& o, const ModelSettings& settings, const std::optional<io::Checkpoint>& resumed,
                        const std::string& resume_path, std::ostream& out)
      : TextStreamTask(o.data, "gpt", chosen_model(settings), settings, resumed, resume_path,
                       [](const models::StackConfig& c) { return c.max_len + 1; }, o.batch, out),
        o_(o),
        model_(config_) {
    with_lora(resumed, resume_path);
  }

  nn::Module& model() override { return lora_ ? static_cast<nn::Module&>(*lora_) : model_; }
  nn::Module* frozen_model() override { return lora_ ? &model_ : nullptr; }
  void init_parameters(Rng& rng) override {
    TFM_CHECK(!lora_, "--lora-rank fine-tunes a model's adapters: give the model as --init-from");
    model_.init_parameters(rng);
  }
  std::string init_from(const io::SafeTensors& file, const std::string& origin, Rng& rng) override;
  io::Checkpoint describe() const override;
  void saved(const std::string& path) override;
  BatchLoss batch_loss(int64_t index) override {
    Rng rng;
    const std::vector<int64_t> starts = window_starts(index, rng);
    const dist::Range mine = take_share(batch_);
    if (mine.size() == 0) return {};
    return {window_loss(train_, {starts.begin() + mine.begin, starts.begin() + mine.end}), mine.size() * (window_ - 1)};
  }
  Validation validate() override {
    double nll = 0, windows = 0;
    for_each_valid_batch([&](const std::vector<int64_t>& starts, int64_t) {
      nll += window_loss(valid_, starts).item() * static_cast<double>(starts.size());
      windows += static_cast<double>(starts.size());
    });
    const std::vector<double> sums = dist::sum_over(comm_, {nll, windows});
    const double loss = sums[0] / sums[1];
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

  // LoRA: adapters as --lora-rank asks, or as the resumed run's checkpoint records them (its
  // base read again from the path it records).
  void with_lora(const std::optional<io::Checkpoint>& resumed, const std::string& origin);

  const tfm::LanguageModelTask& o_;
  models::GPT model_;
  std::unique_ptr<models::LoraAdapter> lora_;  // null: every weight trains
  bool base_loaded_ = false;                   // from a LoRA checkpoint's record
  std::string base_weights_;                   // the base's weights_fingerprint, recorded with the adapters
};

// The metadata key of a LoRA run's base weights' fingerprint: a resume refuses a base that
// has changed since (its adapters were trained on the one it was).
constexpr const char* kLoraBaseKey = "tfm.lora.base_weights";

// "<count> weights, fnv <hash>" of a model's parameters.
std::string weights_fingerprint(const nn::Module& model) {
  return fingerprint(static_cast<size_t>(model.num_parameters()), "weights", weights_checksum(model));
}

// The adapters --lora-rank, --lora-alpha and --lora-targets ask for over the model at
// `origin` (--init-from; its path absolute, so that a resumed run reads it from anywhere).
models::LoraSettings chosen_lora(const tfm::LanguageModelTask& o, const std::string& origin) {
  models::LoraSettings s;
  s.rank = o.lora_rank, s.alpha = o.lora_alpha, s.targets = models::parse_lora_targets(o.lora_targets);
  s.validate("--lora-rank, --lora-alpha, --lora-targets");
  TFM_CHECK(!origin.empty(), "--lora-rank fine-tunes a model's adapters: give the model as --init-from");
  s.base = std::filesystem::absolute(origin).string();
  return s;
}

// Without --lora-rank, the flags that shape adapters are a mistake.
void refuse_lora_flags_without_rank(const tfm::LanguageModelTask& o) {
  const tfm::LanguageModelTask defaults;
  TFM_CHECK(o.lora_targets == defaults.lora_targets && o.lora_alpha == defaults.lora_alpha,
            "--lora-targets and --lora-alpha shape LoRA adapters: give --lora-rank (at least 1; 0 trains every weight)");
}

void LanguageModelTraining::with_lora(const std::optional<io::Checkpoint>& resumed, const std::string& origin) {
  const auto recorded = resumed ? resumed->metadata.find(models::kLoraCheckpointKey) : std::map<std::string, std::string>::const_iterator();
  if (resumed && recorded != resumed->metadata.end()) {  // a LoRA run's checkpoint: its base read again from its record
    const models::LoraSettings s = models::LoraSettings::from_json(recorded->second, origin);
    TFM_CHECK(o_.lora_rank == 0 || o_.lora_rank == s.rank,
              "--lora-rank " << o_.lora_rank << " differs from " << origin << "'s adapters' rank " << s.rank);
    io::load_parameters(model_.named_parameters(), decode::read_model(s.base), s.base);
    base_weights_ = weights_fingerprint(model_);
    if (const auto was = resumed->metadata.find(kLoraBaseKey); was != resumed->metadata.end())
      TFM_CHECK(was->second == base_weights_, s.base << ": has changed since " << origin << "'s adapters were trained on it (" << was->second
                                                     << "; now " << base_weights_ << "): the adapters belong to the base as it was");
    lora_ = std::make_unique<models::LoraAdapter>(model_, s);
    base_loaded_ = true;
  } else if (o_.lora_rank > 0) {
    lora_ = std::make_unique<models::LoraAdapter>(model_, chosen_lora(o_, origin));
  } else {
    return refuse_lora_flags_without_rank(o_);
  }
  model_.eval();  // the frozen base computes as at inference (no dropout), as its adapters' base
}

std::string LanguageModelTraining::init_from(const io::SafeTensors& file, const std::string& origin, Rng& rng) {
  if (!lora_) return TrainingTask::init_from(file, origin, rng);
  if (base_loaded_) {  // a LoRA run's checkpoint: its adapters go on training
    io::load_parameters(lora_->named_parameters(), file, origin);
  } else {
    io::load_parameters(model_.named_parameters(), file, origin);
    base_weights_ = weights_fingerprint(model_);
    lora_->init_parameters(rng);
  }
  const models::LoraSettings& s = lora_->settings();
  std::ostringstream how;
  how << " with LoRA adapters (rank " << s.rank << ", alpha " << s.alpha << "): " << lora_->num_parameters() << " trainable parameters of "
      << model_.num_parameters() + lora_->num_parameters();
  return how.str();
}

io::Checkpoint LanguageModelTraining::describe() const {
  io::Checkpoint c = describe_config(model_.config().to_json());
  if (lora_) c.metadata[models::kLoraCheckpointKey] = lora_->settings().to_json(), c.metadata[kLoraBaseKey] = base_weights_;
  return c;
}

// last.safetensors -> last_adapter/, PEFT's layout.
void LanguageModelTraining::saved(const std::string& path) {
  if (!lora_) return;
  const std::filesystem::path p(path);
  models::save_lora_adapter(*lora_, (p.parent_path() / (p.stem().string() + "_adapter")).string());
}

std::string LanguageModelTraining::report() {
  if (o_.sample_tokens <= 0) return "";
  decode::SamplingOptions s;
  s.max_new_tokens = o_.sample_tokens;
  const std::vector<int> sample = decode::generate(model_, {tokenizer_.line_break_id()}, s);
  return "sample (temperature 0.8):\n" + tokenizer_.decode(sample);
}

}  // namespace

tfm::TrainingResult run_language_model_training(const TrainerOptions& options, const tfm::LanguageModelTask& o, std::ostream& out) {
  TFM_CHECK(o.sample_tokens >= 0, "sample_tokens must be at least 0 (got " << o.sample_tokens << ")");
  Trainer trainer(options, out);
  LanguageModelTraining task(o, ModelSettings(o.config, o.model), trainer.started_from(), trainer.started_from_path(), out);
  return trainer.run(task);
}

tfm::TrainingOptions language_model_training_defaults() {
  return steps_of_windows(cosine_training("runs/lm", 1e-3f, 1e-4f, /*warmup=*/100, /*beta2=*/0.99f, /*weight_decay=*/0.1f), 2000, 250);
}

}  // namespace tfm::training
