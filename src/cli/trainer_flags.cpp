#include "cli/trainer_flags.h"

#include "cli/validators.h"
#include "io/checkpoint.h"
#include "tensor/error.h"

namespace tfm::cli {

void add_trainer_flags(CLI::App* cmd, train::TrainerOptions& o) {
  auto* g = cmd->add_option_group("training");
  g->add_option("--out", o.out_dir, "Directory for checkpoints (last, best, step-N), metrics.jsonl and curves.png")->capture_default_str();
  g->add_option("--steps", o.max_steps, "Optimisation steps (0: until --epochs are done)")->capture_default_str()->check(at_least<int64_t>(0));
  g->add_option("--epochs", o.epochs, "Passes over the training data")->capture_default_str()->check(at_least<int64_t>(1));
  g->add_option("--max-minutes", o.max_minutes, "Stop (and save) after this much training time (0: no limit)")->capture_default_str()->check(finite_nonneg<double>());
  g->add_option("--accumulate", o.accumulate, "Batches per optimiser step (its loss: the mean over all their tokens)")->capture_default_str()->check(at_least<int64_t>(1));
  g->add_option("--lr", o.schedule.lr, "Learning rate: the peak of the cosine schedule (lm, vit, bert), the factor of the paper's schedule (train)")->capture_default_str()->check(positive_number<float>());
  g->add_option("--min-lr", o.schedule.min_lr, "Lowest learning rate: where the cosine decay ends (at most --lr), a floor under the paper's schedule")->capture_default_str()->check(finite_nonneg<float>());
  g->add_option("--warmup", o.schedule.warmup, "Linear warm-up steps")->capture_default_str()->check(at_least<int64_t>(0));
  g->add_option("--beta2", o.adam.beta2, "Adam's second-moment decay")->capture_default_str()->check(below(0.0f, 1.0f));
  g->add_option("--weight-decay", o.adam.weight_decay, "AdamW weight decay of weight matrices and embeddings")->capture_default_str()->check(finite_nonneg<float>());
  g->add_option("--clip-norm", o.clip_norm, "Gradient clipping by global norm (0: off)")->capture_default_str()->check(finite_nonneg<double>());
  g->add_option("--validate-every", o.validate_every, "Validation interval in steps (and at the end; 0: only at the end)")->capture_default_str()->check(at_least<int64_t>(0));
  g->add_option("--save-every", o.save_every, "Also keep a step-N checkpoint every N steps (0: never)")->capture_default_str()->check(at_least<int64_t>(0));
  g->add_option("--patience", o.patience, "Early stop after N validations without a better score (0: never)")->capture_default_str()->check(at_least<int64_t>(0));
  g->add_flag("--skip-nonfinite", o.skip_nonfinite, "Skip steps with a non-finite loss or gradient instead of stopping");
  g->add_option("--seed", o.seed, "Random seed (initialisation, data order, dropout)")->capture_default_str();
  g->add_option("--log-every", o.log_every, "Log interval in steps when output is not a terminal")->capture_default_str()->check(at_least<int64_t>(1));
  g->add_option("--resume", o.resume, "Continue the run saved in this checkpoint (its last.safetensors)")->check(CLI::ExistingFile);
  g->add_flag("--force", o.force, "Start a new run in an --out that holds another run, deleting its checkpoints and metrics");
}

void add_text_flags(CLI::App* cmd, train::TextSource& s) {
  cmd->add_option("--text", s.text, "Training text, plain or .gz (the last 10% is held out unless --valid is given)")
      ->required()->check(CLI::ExistingFile);
  cmd->add_option("--valid", s.valid_text, "Validation text")->check(CLI::ExistingFile);
  cmd->add_option("--vocab", s.spm, "SentencePiece model (from `tfm vocab`); default: characters")->check(CLI::ExistingFile);
}

ModelFlags::ModelFlags(CLI::App* cmd, models::StackConfig& model, const std::string& family)
    : model_(model), family_(family), group_(cmd->add_option_group("model")) {
  model_.family = family;  // so that to_json() writes the family's own fields
  defaults_ = model_;
  group_->add_option("--config", config_path_, "Model configuration as a JSON file (family " + family + "); the flags below override it")
      ->check(CLI::ExistingFile);
  bind(group_->add_option("--layers", model.layers, "Transformer layers")->capture_default_str()->check(at_least<int64_t>(1)), "layers");
  bind(group_->add_option("--heads", model.heads, "Attention heads")->capture_default_str()->check(at_least<int64_t>(1)), "heads");
  bind(group_->add_option("--d-model", model.d_model, "Model width")->capture_default_str()->check(at_least<int64_t>(1)), "d_model");
  bind(group_->add_option("--d-ff", model.d_ff, "Feed-forward width")->capture_default_str()->check(at_least<int64_t>(1)), "d_ff");
  bind(group_->add_option("--dropout", model.dropout, "Dropout probability")->capture_default_str()->check(below(0.0f, 1.0f)), "dropout");
}

CLI::Option* ModelFlags::bind(CLI::Option* option, const char* key) {
  flags_.emplace_back(option, key);
  return option;
}

nlohmann::json ModelFlags::flags_given() const {
  const nlohmann::json values = nlohmann::json::parse(model_.to_json());
  nlohmann::json given = nlohmann::json::object();
  for (const auto& [option, key] : flags_)
    if (option->count() > 0) given[key] = values.at(key);
  return given;
}

models::StackConfig ModelFlags::resolve(const models::StackConfig& base, std::string& origin) const {
  origin = config_path_.empty() ? "model configuration" : config_path_;
  const models::StackConfig file =
      config_path_.empty() ? base : models::StackConfig::from_file(config_path_, family_, base, /*validate=*/false);
  return models::StackConfig::from_json(flags_given().dump(), "the model flags", family_, file, /*validate=*/false);
}

void ModelFlags::check_resume(const std::string& resume) const {
  const nlohmann::json given = flags_given();
  if (resume.empty() || given.empty()) return;
  const io::SafeTensors file = io::read_safetensors(resume);
  const io::Checkpoint info = io::checkpoint_info(file, resume);
  io::check_model_kind(info.model_kind, {family_}, resume, "a " + family_ + " one");
  const nlohmann::json saved = nlohmann::json::parse(models::StackConfig::from_json(info.config_json, resume, family_).to_json());
  for (const auto& [option, key] : flags_)
    TFM_CHECK(!given.contains(key) || given[key] == saved.at(key),
              option->get_name() << " " << given[key].dump() << " disagrees with " << resume << ", whose " << key << " is "
                                 << saved.at(key).dump() << " (a resumed run keeps its checkpoint's architecture)");
}

}  // namespace tfm::cli
