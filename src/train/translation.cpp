#include "train/translation.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "autograd/autograd.h"
#include "data/batching.h"
#include "decode/translator.h"
#include "eval/metrics.h"
#include "io/checkpoint.h"
#include "ops/elementwise.h"
#include "tensor/error.h"
#include "train/progress.h"
#include "train/curves.h"

namespace tfm::train {

using nlohmann::json;

namespace {

std::atomic<bool> g_stop{false};

void on_interrupt(int) {
  if (g_stop.exchange(true)) std::_Exit(130);  // a second Ctrl-C: stop now
}

struct State {
  int64_t step = 0, epoch = 1, batch = 0;  // next batch of `epoch` to train on
  uint64_t dropout_rng = 0;
  double best_bleu = -1, elapsed_s = 0;
  int64_t bad_validations = 0;
};

json to_json(const State& s) {
  return {{"step", s.step}, {"epoch", s.epoch}, {"batch", s.batch}, {"dropout_rng", s.dropout_rng},
          {"best_bleu", s.best_bleu}, {"elapsed_s", s.elapsed_s}, {"bad_validations", s.bad_validations}};
}

State state_from_json(const std::string& text, const std::string& origin) {
  try {
    json j = json::parse(text);
    State s;
    s.step = j.at("step"), s.epoch = j.at("epoch"), s.batch = j.at("batch"), s.dropout_rng = j.at("dropout_rng");
    s.best_bleu = j.at("best_bleu"), s.elapsed_s = j.at("elapsed_s"), s.bad_validations = j.at("bad_validations");
    return s;
  } catch (const json::exception&) {
    throw Error(origin + ": the training state in the metadata is malformed");
  }
}

json vocab_record(const data::Vocab& src, const data::Vocab& tgt) {
  return {{"src", {{"path", src.path()}, {"crc32", src.checksum()}}}, {"tgt", {{"path", tgt.path()}, {"crc32", tgt.checksum()}}}};
}

struct Validation {
  double loss = 0, bleu = 0, chrf = 0;
};

class Trainer {
 public:
  Trainer(const TranslationOptions& o, std::ostream& out) : o_(o), out_(out) {}
  int run();

 private:
  void load_data();
  Validation validate();
  void save(const std::string& name);
  void log_metrics(const json& record);

  const TranslationOptions& o_;
  std::ostream& out_;
  data::Vocab src_vocab_, tgt_vocab_;
  data::EncodedCorpus train_, valid_;
  std::vector<std::string> valid_refs_;
  std::vector<std::vector<int>> valid_sources_;
  std::unique_ptr<models::EncoderDecoder> model_;
  std::unique_ptr<Adam> optimizer_;
  State state_;
};

void Trainer::load_data() {
  src_vocab_ = data::Vocab::load(o_.src_vocab);
  tgt_vocab_ = data::Vocab::load(o_.tgt_vocab);
  data::ParallelCorpus train = data::read_parallel(o_.train_src, o_.train_tgt);
  train_ = data::encode_corpus(train, src_vocab_, tgt_vocab_, o_.max_sentence_tokens);
  out_ << "training data: " << train_.examples.size() << " pairs (" << train.empty_skipped << " with an empty side and "
       << train_.too_long_skipped << " longer than " << o_.max_sentence_tokens << " subwords skipped)\n";
  TFM_CHECK(!train_.examples.empty(), o_.train_src << ": no usable sentence pairs");
  data::ParallelCorpus valid = data::read_parallel(o_.valid_src, o_.valid_tgt);
  valid_ = data::encode_corpus(valid, src_vocab_, tgt_vocab_, o_.max_sentence_tokens);
  const size_t n = o_.valid_sentences > 0 ? std::min<size_t>(valid.src.size(), static_cast<size_t>(o_.valid_sentences)) : valid.src.size();
  for (size_t i = 0; i < n; ++i) {
    valid_sources_.push_back(src_vocab_.encode(valid.src[i]));
    valid_refs_.push_back(valid.tgt[i]);
  }
  out_ << "validation data: " << valid_.examples.size() << " pairs for loss, " << n << " sentences for BLEU\n";
}

Validation Trainer::validate() {
  autograd::NoGradGuard no_grad;
  model_->eval();
  Validation v;
  double nll = 0;
  int64_t tokens = 0;
  for (const auto& indices : data::make_batches(valid_.examples, o_.max_tokens, 0)) {
    Seq2SeqBatch b = data::collate(valid_.examples, indices);
    const int64_t n = b.target_tokens(model_->config().pad_id);
    nll += seq2seq_loss(*model_, b, 0.0f).item() * static_cast<double>(n);
    tokens += n;
  }
  v.loss = tokens ? nll / static_cast<double>(tokens) : 0.0;
  decode::SearchOptions greedy;
  greedy.beam = 1;
  std::vector<std::string> hyps;
  for (const auto& h : decode::translate(*model_, valid_sources_, greedy, 64)) hyps.push_back(tgt_vocab_.decode(h[0].tokens));
  v.bleu = eval::corpus_bleu(hyps, valid_refs_).score;
  v.chrf = eval::corpus_chrf(hyps, valid_refs_);
  model_->train();
  return v;
}

void Trainer::save(const std::string& name) {
  state_.dropout_rng = global_rng().state();
  io::Checkpoint c{"encoder_decoder", model_->config().to_json(), optimizer_->state(), to_json(state_).dump(),
                   {{"tfm.vocab", vocab_record(src_vocab_, tgt_vocab_).dump()}}};
  io::save_checkpoint((std::filesystem::path(o_.out_dir) / name).string(), *model_, c);
}

void Trainer::log_metrics(const json& record) {
  std::ofstream f(std::filesystem::path(o_.out_dir) / "metrics.jsonl", std::ios::app);
  f << record.dump() << "\n";
}

int Trainer::run() {
  load_data();
  std::filesystem::create_directories(o_.out_dir);
  models::TransformerConfig config = models::preset(o_.preset);
  if (o_.config_path.empty()) config.dropout = o_.dropout, config.norm_first = o_.norm_first;
  else config = models::TransformerConfig::from_file(o_.config_path, /*validate=*/false);
  config.src_vocab = src_vocab_.size();  // the vocabularies decide these
  config.tgt_vocab = tgt_vocab_.size();
  config.share_embeddings = src_vocab_.checksum() == tgt_vocab_.checksum();
  config.pad_id = data::Vocab::kPad;
  config.validate(o_.config_path.empty() ? "model configuration" : o_.config_path);
  io::SafeTensors resumed;
  if (!o_.resume.empty()) {
    resumed = io::read_safetensors(o_.resume);
    io::Checkpoint info = io::checkpoint_info(resumed, o_.resume);
    TFM_CHECK(!info.train_state.empty(), o_.resume << ": holds weights only, no training state to resume from");
    json vocab = json::parse(info.metadata.count("tfm.vocab") ? info.metadata.at("tfm.vocab") : "{}");
    TFM_CHECK(vocab.contains("src") && vocab["src"]["crc32"] == src_vocab_.checksum() && vocab["tgt"]["crc32"] == tgt_vocab_.checksum(),
              o_.resume << ": was trained with other vocabularies than " << o_.src_vocab << " and " << o_.tgt_vocab);
    config = models::TransformerConfig::from_json(info.config_json, o_.resume);
    state_ = state_from_json(info.train_state, o_.resume);
  }
  model_ = std::make_unique<models::EncoderDecoder>(config);
  optimizer_ = std::make_unique<Adam>(model_->named_parameters(), AdamOptions{});
  if (!o_.resume.empty()) {
    io::load_parameters(*model_, resumed, o_.resume);
    optimizer_->load_state(io::checkpoint_info(resumed, o_.resume).optimizer, state_.step);
    global_rng().set_state(state_.dropout_rng);
    out_ << "resumed " << o_.resume << " at step " << state_.step << " (epoch " << state_.epoch << ")\n";
  } else {
    Rng init(o_.seed);
    model_->init_parameters(init);
    global_rng().set_state(o_.seed * 7919 + 1);
  }
  out_ << "model: " << config.to_json() << ", " << model_->num_parameters() << " parameters" << std::endl;

  g_stop = false;
  auto previous_handler = std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  const auto start = std::chrono::steady_clock::now();
  const double elapsed_before = state_.elapsed_s;
  auto elapsed = [&] { return elapsed_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const int64_t steps_per_epoch = static_cast<int64_t>(
      (data::make_batches(train_.examples, o_.max_tokens, 1).size() + static_cast<size_t>(o_.accumulate) - 1) / static_cast<size_t>(o_.accumulate));
  const int64_t total = o_.max_steps > 0 ? o_.max_steps : steps_per_epoch * o_.epochs;
  Progress progress(total, state_.step, o_.log_every);
  if (o_.max_minutes > 0) progress.set_time_limit(o_.max_minutes * 60 - elapsed_before);
  bool finished = false, interrupted = false;
  int64_t validated_at = -1;
  auto run_validation = [&] {
    Validation v = validate();
    validated_at = state_.step;
    const bool better = v.bleu > state_.best_bleu;
    if (better) state_.best_bleu = v.bleu, state_.bad_validations = 0;
    else ++state_.bad_validations;
    out_ << "\nvalidation at step " << state_.step << ": loss " << v.loss << ", perplexity " << std::exp(v.loss) << ", BLEU " << v.bleu
         << ", chrF " << v.chrf << (better ? " (best)" : "") << std::endl;
    log_metrics({{"step", state_.step}, {"epoch", state_.epoch}, {"valid_loss", v.loss}, {"valid_ppl", std::exp(v.loss)},
                 {"bleu", v.bleu}, {"chrf", v.chrf}, {"elapsed_s", elapsed()}});
    const std::filesystem::path dir(o_.out_dir);
    plot_training_curves((dir / "metrics.jsonl").string(), (dir / "curves.png").string());
    state_.elapsed_s = elapsed();
    save("last.safetensors");
    if (better) save("best.safetensors");
    if (o_.patience > 0 && state_.bad_validations >= o_.patience) {
      out_ << "early stop: no better BLEU in " << o_.patience << " validations\n";
      finished = true;
    }
  };

  model_->train();
  for (; state_.epoch <= o_.epochs && !finished && !interrupted; ++state_.epoch, state_.batch = 0) {
    std::vector<std::vector<int64_t>> batches = data::make_batches(train_.examples, o_.max_tokens, o_.seed * 1000003 + static_cast<uint64_t>(state_.epoch));
    while (state_.batch < static_cast<int64_t>(batches.size())) {
      const int64_t end = std::min<int64_t>(state_.batch + o_.accumulate, static_cast<int64_t>(batches.size()));
      optimizer_->set_lr(noam_lr(state_.step + 1, model_->config().d_model, o_.lr_factor, o_.warmup));
      optimizer_->zero_grad();
      double loss = 0;
      int64_t tokens = 0;
      for (int64_t i = state_.batch; i < end; ++i) {
        Seq2SeqBatch b = data::collate(train_.examples, batches[i]);
        Tensor l = seq2seq_loss(*model_, b, o_.label_smoothing);
        ops::scale(l, 1.0f / static_cast<float>(end - state_.batch)).backward();
        loss += l.item() / static_cast<double>(end - state_.batch);
        tokens += b.target_tokens(model_->config().pad_id);
      }
      const double grad_norm = clip_grad_norm(model_->parameters(), o_.clip_norm > 0 ? o_.clip_norm : INFINITY);
      state_.batch = end;
      if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
        const std::string what = std::isfinite(loss) ? "gradient" : "loss";
        TFM_CHECK(o_.skip_nonfinite, "non-finite " << what << " at step " << state_.step + 1 << " (epoch " << state_.epoch
                                                   << "); stopped without saving it, the last checkpoint is intact "
                                                      "(--skip-nonfinite skips such steps instead)");
        out_ << "\nstep " << state_.step + 1 << ": non-finite " << what << ", step skipped" << std::endl;
        continue;
      }
      optimizer_->step();
      ++state_.step;
      progress.update(state_.step, loss, optimizer_->lr(), tokens, "epoch " + std::to_string(state_.epoch));
      if (state_.step % o_.log_every == 0)
        log_metrics({{"step", state_.step}, {"epoch", state_.epoch}, {"train_loss", loss}, {"lr", optimizer_->lr()}, {"elapsed_s", elapsed()}});
      if (o_.save_every > 0 && state_.step % o_.save_every == 0) save("step-" + std::to_string(state_.step) + ".safetensors");
      if (state_.step % o_.validate_every == 0) run_validation();
      if ((o_.max_steps > 0 && state_.step >= o_.max_steps) || (o_.max_minutes > 0 && elapsed() >= o_.max_minutes * 60)) finished = true;
      if (g_stop) interrupted = true;
      if (finished || interrupted) break;
    }
    if (finished || interrupted) break;
  }
  progress.finish();
  if (interrupted) {
    state_.elapsed_s = elapsed();
    save("last.safetensors");
    out_ << "interrupted: saved " << (std::filesystem::path(o_.out_dir) / "last.safetensors").string() << " at step " << state_.step
         << "; continue with --resume\n";
  } else if (validated_at != state_.step) {
    run_validation();
  }
  std::signal(SIGINT, previous_handler);
  std::signal(SIGTERM, SIG_DFL);
  out_ << "best validation BLEU " << state_.best_bleu << "; checkpoints in " << o_.out_dir << " (" << train::format_duration(elapsed())
       << " of training)\n";
  return interrupted ? 130 : 0;
}

}  // namespace

int run_translation_training(const TranslationOptions& options, std::ostream& out) { return Trainer(options, out).run(); }

}  // namespace tfm::train
