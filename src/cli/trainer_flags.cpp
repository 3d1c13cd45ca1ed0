#include "cli/trainer_flags.h"

#include <filesystem>

#include "cli/validators.h"
#include "models/json_fields.h"

namespace tfm::cli {

TrainerFlags::TrainerFlags(CLI::App* cmd, tfm::TrainingOptions& options) : options_(options) {
  using O = tfm::TrainingOptions;
  auto* g = cmd->add_option_group("training");
  out_ = add(g, "--out", [](O& o) -> auto& { return o.out_dir; },
             "Directory for checkpoints (last, best, step-N), metrics.jsonl and curves.png (with --resume: the checkpoint's own)");
  add(g, "--steps", [](O& o) -> auto& { return o.max_steps; }, "Optimisation steps (0: until --epochs are done)")->check(at_least<int64_t>(0));
  add(g, "--epochs", [](O& o) -> auto& { return o.epochs; }, "Passes over the training data")->check(at_least<int64_t>(1));
  add(g, "--max-minutes", [](O& o) -> auto& { return o.max_minutes; }, "Stop (and save) after this much training time, a resumed run's earlier time included (0: no limit)")
      ->check(finite_nonneg<double>());
  add(g, "--accumulate", [](O& o) -> auto& { return o.accumulate; }, "Batches per optimiser step (its loss: the mean over all their tokens)")
      ->check(at_least<int64_t>(1));
  add(g, "--lr", [](O& o) -> auto& { return o.schedule.lr; },
      "Learning rate: the peak of the cosine schedule (lm, vit, bert), the factor of the paper's schedule (train)")
      ->check(positive_up_to(tfm::Schedule::kMaxLr));
  add(g, "--min-lr", [](O& o) -> auto& { return o.schedule.min_lr; },
      "Lowest learning rate: where the cosine decay ends (at most --lr), a floor under the paper's schedule")
      ->check(finite_nonneg<float>());
  add(g, "--warmup", [](O& o) -> auto& { return o.schedule.warmup; }, "Linear warm-up steps")->check(at_least<int64_t>(0));
  add(g, "--beta2", [](O& o) -> auto& { return o.adam.beta2; }, "Adam's second-moment decay")->check(below(0.0f, 1.0f));
  add(g, "--weight-decay", [](O& o) -> auto& { return o.adam.weight_decay; }, "AdamW weight decay of weight matrices and embeddings")
      ->check(finite_nonneg<float>());
  add(g, "--clip-norm", [](O& o) -> auto& { return o.clip_norm; }, "Gradient clipping by global norm (0: off)")->check(finite_nonneg<double>());
  add(g, "--validate-every", [](O& o) -> auto& { return o.validate_every; }, "Validation interval in steps (and at the end; 0: only at the end)")
      ->check(at_least<int64_t>(0));
  add(g, "--save-every", [](O& o) -> auto& { return o.save_every; }, "Also keep a step-N checkpoint every N steps (0: never)")
      ->check(at_least<int64_t>(0));
  add(g, "--patience", [](O& o) -> auto& { return o.patience; }, "Early stop after N validations without a better score (0: never)")
      ->check(at_least<int64_t>(0));
  add(g, "--skip-nonfinite", [](O& o) -> auto& { return o.skip_nonfinite; }, "Skip steps with a non-finite loss or gradient instead of stopping");
  add(g, "--seed", [](O& o) -> auto& { return o.seed; }, "Random seed (initialisation, data order, dropout)")->check(at_least<int64_t>(0));
  add(g, "--log-every", [](O& o) -> auto& { return o.log_every; }, "Log interval in steps when output is not a terminal")
      ->check(at_least<int64_t>(1));
  resume_ = add(g, "--resume", [](O& o) -> auto& { return o.resume; }, "Continue the run saved in this checkpoint (its last.safetensors)")
                ->check(CLI::ExistingFile)
                ->each([this](const std::string& checkpoint) { resume_in_place(options_, checkpoint); });
  add(g, "--init-from", [](O& o) -> auto& { return o.init_from; },
      "Start a new run from these weights (fine-tuning): a checkpoint or a Hugging Face model directory, whose architecture and "
      "vocabulary the run takes")
      ->check(CLI::ExistingPath);
  add(g, "--force", [](O& o) -> auto& { return o.force; }, "Start a new run in an --out that holds another run, deleting its checkpoints and metrics");
  add(g, "--shard-optimizer", [](O& o) -> auto& { return o.shard_optimizer; },
      "With several processes (mpirun -np N): each keeps and updates only its share of Adam's moments (ZeRO stage 1), "
      "cutting the optimiser's memory per process by N");
  add(g, "--bucket-mb", [](O& o) -> auto& { return o.bucket_mb; },
      "With several processes: gradient buckets of this many MiB are summed across them while the backward pass goes on "
      "(0: one bucket, after the pass)")
      ->check(finite_nonneg<double>());
}

void TrainerFlags::given_onto(tfm::TrainingOptions& target) const {
  for (const auto& set : set_if_given_) set(target);
  if (resume_->count() > 0) resume_in_place(target, target.resume);
}

void TrainerFlags::resume_in_place(tfm::TrainingOptions& o, const std::string& checkpoint) const {
  if (out_->count() > 0) return;
  const std::filesystem::path home = std::filesystem::path(checkpoint).parent_path();
  o.out_dir = home.empty() ? "." : home.string();
}

void add_text_flags(CLI::App* cmd, tfm::TextData& data) {
  cmd->add_option("--text", data.text, "Training text, plain or .gz (the last 10% is held out unless --valid is given)")
      ->required()->check(CLI::ExistingFile);
  cmd->add_option("--valid", data.valid_text, "Validation text")->check(CLI::ExistingFile);
  cmd->add_option("--vocab", data.vocab, "SentencePiece model (from `tfm vocab`); default: characters")->check(CLI::ExistingFile);
}

ModelFlags::ModelFlags(CLI::App* cmd, models::StackConfig& model, std::string& config_path)
    : model_(model), group_(cmd->add_option_group("model")) {
  group_->add_option("--config", config_path, "Model configuration as a JSON file (family " + model.family + "); the flags below override it")
      ->check(CLI::ExistingFile);
  // The configuration's bounds (models/json_fields.h), so that a flag's error names the flag.
  bind(group_->add_option("--layers", model.layers, "Transformer layers")->capture_default_str()->check(in_range<int64_t>(1, models::kMaxLayers)),
       "layers");
  bind(group_->add_option("--heads", model.heads, "Attention heads")->capture_default_str()->check(in_range<int64_t>(1, models::kMaxWidth)),
       "heads");
  bind(group_->add_option("--d-model", model.d_model, "Model width")->capture_default_str()->check(in_range<int64_t>(1, models::kMaxWidth)),
       "d_model");
  bind(group_->add_option("--d-ff", model.d_ff, "Feed-forward width")->capture_default_str()->check(in_range<int64_t>(1, models::kMaxFeedForward)),
       "d_ff");
  bind(group_->add_option("--dropout", model.dropout, "Dropout probability")->capture_default_str()->check(below(0.0f, 1.0f)), "dropout");
}

CLI::Option* ModelFlags::bind(CLI::Option* option, const char* key) {
  flags_.emplace_back(option, key);
  return option;
}

std::string ModelFlags::settings() const {
  const nlohmann::json values = nlohmann::json::parse(model_.to_json());
  nlohmann::json given = nlohmann::json::object();
  for (const auto& [option, key] : flags_)
    if (option->count() > 0) given[key] = values.at(key);
  return given.empty() ? "" : given.dump();
}

}  // namespace tfm::cli
