// The Trainer: options, resume, checkpoints, validation and the loop (the run directory:
// run_directory.cpp; the processes' sums: data_parallel.cpp; the schedules: schedule.cpp).
#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "autograd/autograd.h"
#include "decode/hf_checkpoint.h"
#include "ops/dispatch.h"
#include "ops/linear_products.h"
#include "tensor/error.h"
#include "train/progress.h"

namespace tfm::training {

using nlohmann::json;

double Validation::score() const {
  for (const auto& [name, value] : metrics)
    if (name == score_name) return value;
  throw Error("validation did not report its score '" + score_name + "'");
}

namespace {

// Accuracies are percentages (0-100), printed with a % sign as `vit eval` prints them.
const char* unit_of(const std::string& metric) { return metric.ends_with("accuracy") ? "%" : ""; }

// JSON has no NaN or infinity: such values are written as null.
json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

}  // namespace

namespace {

// The options' ranges, as the command line's flags check them (a library caller's values
// get the same checks), named by the options' field names.
void check_ranges(const TrainerOptions& o) {
  auto at_least = [](const char* name, double value, double low) {
    TFM_CHECK(value >= low, name << " must be at least " << low << " (got " << value << ")");
  };
  TFM_CHECK(!o.out_dir.empty(), "out_dir is empty: name the directory for the run's checkpoints");
  at_least("epochs", static_cast<double>(o.epochs), 1);
  at_least("max_steps", static_cast<double>(o.max_steps), 0);
  at_least("accumulate", static_cast<double>(o.accumulate), 1);
  at_least("validate_every", static_cast<double>(o.validate_every), 0);
  at_least("save_every", static_cast<double>(o.save_every), 0);
  at_least("patience", static_cast<double>(o.patience), 0);
  at_least("log_every", static_cast<double>(o.log_every), 1);
  TFM_CHECK(std::isfinite(o.max_minutes) && o.max_minutes >= 0, "max_minutes must be a number of at least 0 (got " << o.max_minutes << ")");
  TFM_CHECK(std::isfinite(o.clip_norm) && o.clip_norm >= 0, "clip_norm must be a number of at least 0 (got " << o.clip_norm << ")");
  TFM_CHECK(std::isfinite(o.bucket_mb) && o.bucket_mb >= 0, "bucket_mb must be a number of at least 0 (got " << o.bucket_mb << ")");
  const AdamOptions& a = o.adam;
  TFM_CHECK(a.beta1 >= 0 && a.beta1 < 1 && a.beta2 >= 0 && a.beta2 < 1,
            "Adam's beta1 and beta2 must be at least 0 and below 1 (got " << a.beta1 << ", " << a.beta2 << ")");
  TFM_CHECK(std::isfinite(a.eps) && a.eps > 0, "Adam's eps must be a number greater than 0 (got " << a.eps << ")");
  TFM_CHECK(std::isfinite(a.weight_decay) && a.weight_decay >= 0, "weight_decay must be a number of at least 0 (got " << a.weight_decay << ")");
  at_least("warmup", static_cast<double>(o.schedule.warmup), 0);
  const Schedule& s = o.schedule;
  TFM_CHECK(std::isfinite(s.lr) && s.lr >= 0 && s.lr <= Schedule::kMaxLr,  // (0: the weights never change, which a test may want)
            "--lr must be a number from 0 to " << Schedule::kMaxLr << " (got " << s.lr << ")");
  TFM_CHECK(std::isfinite(s.min_lr) && s.min_lr >= 0 && (s.kind != Schedule::Kind::Cosine || s.min_lr <= s.lr),
            "--min-lr " << s.min_lr << " must be from 0 to --lr " << s.lr);
}

}  // namespace

Trainer::Trainer(TrainerOptions options, std::ostream& out) : o_(std::move(options)), out_(out) {
  check_ranges(o_);
  precision_ = ops::parse_precision(o_.precision);
  TFM_CHECK(precision_ != ops::Precision::int8, "--precision int8 is for inference (translate, generate, eval); train in f32 or bf16");
  device_ = ops::usable_device(o_.device);
  if (root()) {  // the other processes write nothing
    io::create_directories(o_.out_dir);
    lock_.emplace(o_.out_dir);
    if (o_.resume.empty()) claim_out_dir();
    else claim_out_dir_to_resume();
  }
  TFM_CHECK(o_.resume.empty() || o_.init_from.empty(), "--resume continues a run and --init-from starts one from weights: give one of them");
  if (!o_.init_from.empty()) {
    resumed_file_ = decode::read_model(o_.init_from);
    resumed_info_ = io::checkpoint_info(resumed_file_, o_.init_from);
    return;
  }
  if (o_.resume.empty()) return;
  resumed_file_ = io::read_safetensors(o_.resume);
  resumed_info_ = io::checkpoint_info(resumed_file_, o_.resume);
  TFM_CHECK(!resumed_info_->train_state.empty(), o_.resume << ": holds weights only, no training state to resume from");
  try {
    json j = json::parse(resumed_info_->train_state);
    for (const char* key : {"step", "epoch", "batch", "dropout_rng", "bad_validations"})  // no float-to-integer conversions
      TFM_CHECK(j.at(key).is_number_integer() && (j.at(key).is_number_unsigned() || j.at(key).get<int64_t>() >= 0),
                o_.resume << ": the training state in the metadata is malformed ('" << key << "')");
    State& s = state_;
    s.step = j.at("step"), s.epoch = j.at("epoch"), s.batch = j.at("batch"), s.dropout_rng = j.at("dropout_rng");
    s.best_score = j.at("best_score"), s.has_best = j.at("has_best"), s.elapsed_s = j.at("elapsed_s");
    s.bad_validations = j.at("bad_validations");
  } catch (const json::exception&) {
    throw Error(o_.resume + ": the training state in the metadata is malformed");
  }
  if (root()) refuse_rewind();
}

// Collective: every process calls it (the others' shares of the optimiser are gathered);
// rank 0 writes, and the others return once it has: one that returned first and exited
// (Ctrl-C's last save) would make the launcher stop rank 0 in the middle of writing.
void Trainer::save(TrainingTask& task, const std::string& name) {
  check_replicas(task.model());
  std::vector<std::pair<std::string, Tensor>> optimizer = step_->optimizer_state();
  if (root()) write_checkpoint(task, name, std::move(optimizer));
  if (o_.comm) {
    std::vector<double> written{0.0};
    o_.comm->sum(written);
  }
}

void Trainer::write_checkpoint(TrainingTask& task, const std::string& name, std::vector<std::pair<std::string, Tensor>> optimizer) const {
  const State& s = state_;
  json state = {{"step", s.step}, {"epoch", s.epoch}, {"batch", s.batch}, {"dropout_rng", s.dropout_rng}, {"best_score", s.best_score},
                {"has_best", s.has_best}, {"elapsed_s", s.elapsed_s}, {"bad_validations", s.bad_validations}};
  if (!data_.empty()) state["data"] = data_;  // (what a resume should train on)
  io::Checkpoint c = task.describe();
  c.optimizer = std::move(optimizer);
  c.train_state = state.dump();
  const std::string path = (std::filesystem::path(o_.out_dir) / name).string();
  io::save_checkpoint(path, task.model().named_parameters(), c);
  task.saved(path);
}

bool Trainer::validate(TrainingTask& task, double elapsed_s) {
  Validation v;
  {
    autograd::NoGradGuard no_grad;
    task.model().eval();
    v = task.validate();
    task.model().train();
  }
  const double score = v.score();
  score_name_ = v.score_name;
  last_metrics_ = v.metrics;
  const bool better = !state_.has_best || (v.higher_is_better ? score > state_.best_score : score < state_.best_score);
  if (better) state_.best_score = score, state_.has_best = true, state_.bad_validations = 0;
  else ++state_.bad_validations;
  out_ << "\nvalidation at step " << state_.step << ":";
  json record = {{"step", state_.step}, {"epoch", state_.epoch}, {"score_name", v.score_name}, {"elapsed_s", elapsed_s}};
  for (const auto& [name, value] : v.metrics) {
    out_ << " " << name << " " << value << unit_of(name);
    record[name] = finite_or_null(value);
  }
  out_ << (better ? " (best)" : "") << std::endl;
  log_metrics(record.dump());
  if (root()) draw_curves();
  state_.elapsed_s = elapsed_s;
  save(task, "last.safetensors");
  if (better) save(task, "best.safetensors");
  if (o_.patience > 0 && state_.bad_validations >= o_.patience) {
    out_ << "early stop: no better " << v.score_name << " in " << o_.patience << " validations\n";
    return true;
  }
  return false;
}

std::string TrainingTask::init_from(const io::SafeTensors& file, const std::string& origin, Rng& rng) {
  (void)rng;
  io::load_parameters(model().named_parameters(), file, origin);
  return "";
}

tfm::TrainingResult Trainer::run(TrainingTask& task) {
  nn::Module& model = task.model();
  data_ = task.data_fingerprint();
  model.products().set_precision(precision_);
  // Between GPUs, NCCL sums the gradients where this build has it; it also chooses each
  // process's GPU, so it comes before the model moves there.
  if (o_.comm) gpu_sums_ = dist::device_communicator(*o_.comm, device_ == Device::CUDA);
  dist::Communicator* sums = gpu_sums_ ? gpu_sums_.get() : o_.comm;
  model.to(device_);  // before its parameters are laid out in one buffer there
  if (nn::Module* frozen = task.frozen_model()) {
    frozen->products().set_precision(precision_);
    frozen->to(device_);
    frozen->freeze();
  }
  step_ = std::make_unique<OptimizationStep>(model, StepOptions{o_.adam, o_.clip_norm, sums, o_.bucket_mb, o_.shard_optimizer}, out_);
  task.join(o_.comm);
  if (resumed_info_ && !o_.init_from.empty()) {
    task.check_resumable(*resumed_info_, o_.init_from);
    Rng init(o_.seed);
    const std::string how = task.init_from(resumed_file_, o_.init_from, init);  // a checkpoint's optimizer moments are left
    resumed_file_ = {}, resumed_info_.reset();  // a fresh run from here on
    state_.dropout_rng = o_.seed * 7919 + 1;
    out_ << "initialised from " << o_.init_from << how << "\n";
  } else if (resumed_info_) {
    task.check_resumable(*resumed_info_, o_.resume);
    io::load_parameters(model.named_parameters(), resumed_file_, o_.resume);
    step_->optimizer().load_state(resumed_info_->optimizer, state_.step);
    resumed_file_ = {};  // the weights are in the model now
    if (root()) trim_metrics();
    out_ << "resumed " << o_.resume << " at step " << state_.step << " (epoch " << state_.epoch << ")\n";
    const std::string trained_on = json::parse(resumed_info_->train_state).value("data", "");
    if (!trained_on.empty() && !data_.empty() && trained_on != data_)
      out_ << "warning: the run trained on other data (" << trained_on << ") than it is given now (" << data_
           << "): it goes on, but not as the run would have\n";
  } else {
    Rng init(o_.seed);
    task.init_parameters(init);
    state_.dropout_rng = o_.seed * 7919 + 1;
  }
  check_same_job(task);
  clear_previous_run();
  out_ << "model: " << task.describe().config_json << ", " << model.num_parameters() << " parameters" << std::endl;
  if (o_.comm && o_.comm->size() > 1)
    out_ << "data parallel: " << o_.comm->size() << " processes, each computing its share of every batch"
         << (o_.shard_optimizer ? " and updating its share of the weights (sharded optimiser state)" : "") << std::endl;

  auto stop_requested = [&] { return o_.stop.stop_requested(); };
  const auto start = std::chrono::steady_clock::now();
  const double elapsed_before = state_.elapsed_s;
  auto elapsed = [&] { return elapsed_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };

  int64_t batches = task.begin_epoch(state_.epoch, o_.seed);
  const int64_t steps_per_epoch = (batches + o_.accumulate - 1) / o_.accumulate;
  const int64_t total = o_.max_steps > 0 ? o_.max_steps : steps_per_epoch * o_.epochs;
  if (o_.schedule.kind == Schedule::Kind::Cosine && o_.schedule.decay_steps <= 0) o_.schedule.decay_steps = total;
  if (total < o_.schedule.warmup)
    out_ << "warning: " << total << " steps are fewer than the " << o_.schedule.warmup
         << " warm-up steps (--warmup): the learning rate never reaches its peak" << std::endl;
  Progress progress(total, state_.step, o_.log_every, task.unit(), o_.progress_to_log ? &out_ : nullptr, /*silent=*/!root());
  if (o_.max_minutes > 0) progress.set_time_limit(o_.max_minutes * 60 - elapsed_before);
  bool finished = state_.step >= total, interrupted = false, out_of_epochs = false;
  const int64_t first_step = state_.step;
  int64_t validated_at = -1;
  // With --skip-nonfinite, weights that have become non-finite would skip every step forever.
  constexpr int64_t kMaxSkippedInARow = 100;
  int64_t skipped_in_a_row = 0;

  model.train();
  while (!finished && !interrupted) {
    if (state_.batch >= batches) {
      if (state_.epoch >= o_.epochs) {
        out_of_epochs = true;
        break;
      }
      ++state_.epoch, state_.batch = 0;
      batches = task.begin_epoch(state_.epoch, o_.seed);
    }
    const int64_t end = std::min(state_.batch + o_.accumulate, batches);
    const float lr = learning_rate(o_.schedule, state_.step + 1);
    const auto batch_loss = [&](int64_t i) {
      // Each batch's dropout streams come from (run, epoch, batch): the same on every
      // process, whether or not it has a share of the batch (and so draws at all).
      model.dropout_rng().set_state(substream(state_.dropout_rng, static_cast<uint64_t>(state_.epoch), static_cast<uint64_t>(i)).state());
      return task.batch_loss(i);
    };
    // Whether any process is asked to stop or out of time: every process then takes the same decisions.
    const auto flags = [&] {
      const bool time_up = o_.max_minutes > 0 && elapsed() >= o_.max_minutes * 60;
      return std::vector<double>{stop_requested() ? 1.0 : 0.0, time_up ? 1.0 : 0.0};
    };
    const StepGradients g = step_->gradients(batch_loss, state_.batch, end, flags);
    const bool stop_now = g.flags[0] > 0, out_of_time = g.flags[1] > 0;
    state_.batch = end;
    if (!g.finite()) {
      const std::string what = std::isfinite(g.loss) ? "gradient" : "loss";
      const bool saved = std::filesystem::exists(std::filesystem::path(o_.out_dir) / "last.safetensors");
      TFM_CHECK(o_.skip_nonfinite, "non-finite " << what << " at step " << state_.step + 1 << " (epoch " << state_.epoch
                                                 << "); stopped without saving it, "
                                                 << (saved ? "the last checkpoint is intact" : "before any checkpoint was saved")
                                                 << " (--skip-nonfinite skips such steps instead)");
      out_ << "\nstep " << state_.step + 1 << ": non-finite " << what << ", step skipped" << std::endl;
      TFM_CHECK(++skipped_in_a_row < kMaxSkippedInARow, kMaxSkippedInARow << " steps in a row had a non-finite " << what
                << "; stopped at step " << state_.step << " (the weights may have become non-finite: lower --lr, or resume "
                << "from an earlier checkpoint)");
      if (stop_now) interrupted = true;
      continue;
    }
    skipped_in_a_row = 0;
    step_->update(lr);
    ++state_.step;
    progress.update(state_.step, g.loss, lr, g.items, "epoch " + std::to_string(state_.epoch));
    const bool last_step = state_.step >= total;
    if (state_.step % o_.log_every == 0 || last_step)  // the last step too: a short run's loss curve is not empty
      log_metrics(json{{"step", state_.step}, {"epoch", state_.epoch}, {"train_loss", g.loss}, {"lr", lr}, {"elapsed_s", elapsed()}}
                      .dump());
    if (o_.save_every > 0 && state_.step % o_.save_every == 0) save(task, "step-" + std::to_string(state_.step) + ".safetensors");
    if (o_.validate_every > 0 && state_.step % o_.validate_every == 0) {
      validated_at = state_.step;
      finished = validate(task, elapsed());
    }
    if (last_step || out_of_time) finished = true;
    if (stop_now) interrupted = true;
  }
  progress.finish();
  if (interrupted) {
    state_.elapsed_s = elapsed();
    save(task, "last.safetensors");
    out_ << "interrupted: saved " << (std::filesystem::path(o_.out_dir) / "last.safetensors").string() << " at step " << state_.step
         << "; continue with --resume\n";
  } else if (state_.step == first_step && resumed_info_) {  // its validation is in the metrics already
    out_ << o_.resume << " is at step " << state_.step << " of " << total << ": nothing to train (raise --steps or --epochs)\n";
  } else if (validated_at != state_.step) {
    validate(task, elapsed());
  }
  if (out_of_epochs && state_.step < total)  // (--steps asked for more: say which limit ended the run)
    out_ << "the " << o_.epochs << (o_.epochs == 1 ? " epoch" : " epochs") << " (--epochs) ended the run at step " << state_.step << " of the " << total << " asked for (--steps)\n";
  if (state_.has_best) out_ << "best validation " << score_name_ << " " << state_.best_score << unit_of(score_name_) << "; ";
  out_ << "checkpoints in " << o_.out_dir << " (" << format_duration(elapsed()) << " of training)\n";
  tfm::TrainingResult result{interrupted, state_.step, last_metrics_, score_name_, state_.best_score, interrupted ? "" : task.report()};
  if (!result.report.empty()) out_ << result.report << "\n";
  return result;
}

}  // namespace tfm::training
