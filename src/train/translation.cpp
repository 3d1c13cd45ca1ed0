#include "train/translation.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "data/batching.h"
#include "decode/translation_model.h"
#include "decode/translator.h"
#include "eval/metrics.h"
#include "tensor/error.h"
#include "train/data_parallel.h"
#include "train/schedule.h"
#include "train/model_settings.h"
#include "train/seq2seq.h"
#include "train/trainer.h"

namespace tfm::training {

using nlohmann::json;

namespace {

class TranslationTraining : public TrainingTask {
 public:
  // The vocabularies are the flags' files, or those of the checkpoint the run starts from.
  TranslationTraining(const tfm::TranslationTask& o, const std::optional<io::Checkpoint>& start, const std::string& start_path, std::ostream& out);
  // The resumed checkpoint's model (which must keep the settings given), else the one
  // the task's settings choose over the preset, completed by the vocabularies.
  void build_model(const std::optional<io::Checkpoint>& resumed, const std::string& resume_path);
  // The model of `config`, which must hold the longest training pairs; errors name `origin`.
  void make_model(const models::TransformerConfig& config, const std::string& origin);

  int64_t d_model() const { return model_->config().d_model; }
  nn::Module& model() override { return *model_; }
  void init_parameters(Rng& rng) override { model_->init_parameters(rng); }
  io::Checkpoint describe() const override {
    return {"encoder_decoder", model_->config().to_json(), {}, "", {{"tfm.vocab", decode::vocab_record(src_vocab_, tgt_vocab_)}}};
  }
  void check_resumable(const io::Checkpoint& saved, const std::string& origin) const override;
  int64_t begin_epoch(int64_t epoch, uint64_t seed) override {
    batches_ = data::make_batches(train_.examples, o_.max_tokens, seed * 1000003 + static_cast<uint64_t>(epoch));
    return static_cast<int64_t>(batches_.size());
  }
  BatchLoss batch_loss(int64_t index) override {
    const Seq2SeqBatch batch = collate(train_.examples, batches_[static_cast<size_t>(index)], model_->config());
    const dist::Range mine = take_share(batch.src.rows());
    if (mine.size() == 0) return {};
    const Seq2SeqBatch b = rows_of(batch, mine);
    return {seq2seq_loss(*model_, b, o_.label_smoothing), b.target_tokens(model_->config().pad_id)};
  }
  Validation validate() override;
  std::string data_fingerprint() const override {
    uint64_t h = fnv1a(nullptr, 0);
    for (const data::Example& e : train_.examples)
      for (const std::vector<int>* side : {&e.src, &e.tgt}) {
        const uint64_t n = side->size();
        h = fnv1a(side->data(), n * sizeof(int), fnv1a(&n, sizeof n, h));
      }
    return fingerprint(train_.examples.size(), "training pairs", h);
  }

 private:
  const tfm::TranslationTask& o_;
  std::ostream& out_;
  data::Vocab src_vocab_, tgt_vocab_;
  data::EncodedCorpus train_, valid_;
  std::optional<int> src_language_, tgt_language_;  // a many-to-many model's: the tokens that start each side

  // `ids` after `language`'s token, where there is one.
  static std::vector<int> with_language(std::optional<int> language, std::vector<int> ids) {
    if (language) ids.insert(ids.begin(), *language);
    return ids;
  }
  data::EncodedCorpus with_languages(data::EncodedCorpus c) const {
    for (data::Example& e : c.examples) e.src = with_language(src_language_, std::move(e.src)), e.tgt = with_language(tgt_language_, std::move(e.tgt));
    return c;
  }
  std::vector<std::string> valid_refs_;
  std::vector<std::vector<int>> valid_sources_;
  std::vector<std::vector<int64_t>> batches_;
  std::unique_ptr<models::EncoderDecoder> model_;
};

TranslationTraining::TranslationTraining(const tfm::TranslationTask& o, const std::optional<io::Checkpoint>& start,
                                         const std::string& start_path, std::ostream& out)
    : o_(o), out_(out) {
  const bool recorded = start && (o_.src_vocab.empty() || o_.tgt_vocab.empty());
  src_vocab_ = recorded ? decode::recorded_vocab(*start, "src", o_.src_vocab, start_path) : data::Vocab::load(o_.src_vocab);
  tgt_vocab_ = recorded ? decode::recorded_vocab(*start, "tgt", o_.tgt_vocab, start_path) : data::Vocab::load(o_.tgt_vocab);
  const std::string options = "--src-lang and --tgt-lang; TranslationTask::source_language and target_language";
  src_language_ = src_vocab_.language_token(o_.source_language, options), tgt_language_ = tgt_vocab_.language_token(o_.target_language, options);
  data::ParallelCorpus train = data::read_parallel(o_.train_src, o_.train_tgt);
  train_ = with_languages(data::encode_corpus(train, src_vocab_, tgt_vocab_, o_.max_sentence_tokens));
  out_ << "training data: " << train_.examples.size() << " pairs (" << train.empty_skipped << " with an empty side and "
       << train_.too_long_skipped << " longer than " << o_.max_sentence_tokens << " subwords skipped)\n";
  TFM_CHECK(!train_.examples.empty(), o_.train_src << ": no usable sentence pairs");
  data::ParallelCorpus valid = data::read_parallel(o_.valid_src, o_.valid_tgt);
  valid_ = with_languages(data::encode_corpus(valid, src_vocab_, tgt_vocab_, o_.max_sentence_tokens));
  const size_t n = o_.valid_sentences > 0 ? std::min<size_t>(valid.src.size(), static_cast<size_t>(o_.valid_sentences)) : valid.src.size();
  for (size_t i = 0; i < n; ++i) {
    valid_sources_.push_back(with_language(src_language_, src_vocab_.encode(valid.src[i])));
    valid_refs_.push_back(valid.tgt[i]);
  }
  out_ << "validation data: " << valid_.examples.size() << " pairs for loss, " << n << " sentences for BLEU\n";
  TFM_CHECK(!valid_.examples.empty(), o_.valid_src << ": no usable sentence pairs for validation");
}

// A preset's sizes as settings: a preset given is a choice a resumed run must agree with.
std::string preset_sizes(const std::string& name) {
  const models::TransformerConfig p = models::preset(name);
  return json{{"d_model", p.d_model}, {"heads", p.heads}, {"d_ff", p.d_ff}, {"encoder_layers", p.encoder_layers},
              {"decoder_layers", p.decoder_layers}}
      .dump();
}

void TranslationTraining::build_model(const std::optional<io::Checkpoint>& resumed, const std::string& resume_path) {
  ModelSettings settings(o_.config, o_.model);
  if (o_.preset) settings.put_first("preset " + *o_.preset, preset_sizes(*o_.preset));
  models::TransformerConfig base = models::preset("small");
  base.src_vocab = src_vocab_.size();  // the vocabularies decide these
  base.tgt_vocab = tgt_vocab_.size();
  base.pad_id = data::Vocab::kPad;
  base.share_embeddings = src_vocab_.checksum() == tgt_vocab_.checksum();
  const models::TransformerConfig config = settings.over(base);
  if (resumed) {
    const models::TransformerConfig saved = models::TransformerConfig::from_json(resumed->config_json, resume_path);
    return make_model(settings.kept(config, saved, resume_path), resume_path);
  }
  TFM_CHECK(config.src_vocab == base.src_vocab && config.tgt_vocab == base.tgt_vocab && config.pad_id == base.pad_id,
            settings.origin() << ": src_vocab, tgt_vocab and pad_id come from the vocabularies (" << base.src_vocab << ", "
                              << base.tgt_vocab << " and " << base.pad_id << "); leave them out");
  config.validate(settings.origin());
  make_model(config, settings.origin());
}

void TranslationTraining::make_model(const models::TransformerConfig& config, const std::string& origin) {
  // A pair of n subwords takes n + 1 positions (the end symbol, or the start symbol on the target side).
  TFM_CHECK(o_.max_sentence_tokens < config.max_len,
            origin << ": max_len " << config.max_len << " is too short for training pairs of up to " << o_.max_sentence_tokens
                   << " subwords; raise max_len or lower --max-sentence-tokens below it");
  model_ = std::make_unique<models::EncoderDecoder>(config);
}

void TranslationTraining::check_resumable(const io::Checkpoint& saved, const std::string& origin) const {
  json vocab = json::parse(saved.metadata.count("tfm.vocab") ? saved.metadata.at("tfm.vocab") : "{}", nullptr, false);
  const auto crc_of = [&](const char* side) {
    const json::json_pointer at(std::string("/") + side + "/crc32");
    return vocab.is_object() && vocab.contains(at) ? vocab.at(at) : json();
  };
  TFM_CHECK(crc_of("src") == src_vocab_.checksum() && crc_of("tgt") == tgt_vocab_.checksum(),
            origin << ": was trained with other vocabularies than " << o_.src_vocab << " and " << o_.tgt_vocab);
}

// Each process scores its share of the validation batches and translates its share of
// the sentences; the sums and the translations are then combined.
Validation TranslationTraining::validate() {
  double nll = 0, tokens = 0;
  const std::vector<std::vector<int64_t>> batches = data::make_batches(valid_.examples, o_.max_tokens, 0);
  const dist::Range my_batches = share(static_cast<int64_t>(batches.size()));
  for (int64_t i = my_batches.begin; i < my_batches.end; ++i) {
    const Seq2SeqBatch b = collate(valid_.examples, batches[static_cast<size_t>(i)], model_->config());
    const int64_t n = b.target_tokens(model_->config().pad_id);
    nll += seq2seq_loss(*model_, b, 0.0f).item() * static_cast<double>(n);
    tokens += static_cast<double>(n);
  }
  const std::vector<double> sums = dist::sum_over(comm_, {nll, tokens});
  const double loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
  decode::SearchOptions greedy;
  greedy.beam = 1, greedy.bos = model_->config().bos_id, greedy.eos = model_->config().eos_id, greedy.forced_first = tgt_language_.value_or(-1);
  // A diverged model (kept by --skip-nonfinite) has no scores to search by: it scores 0 rather than stopping the run.
  const dist::Range mine = share(static_cast<int64_t>(valid_sources_.size()));
  std::vector<std::string> hyps(static_cast<size_t>(mine.size()));
  const std::vector<std::vector<int>> sources(valid_sources_.begin() + mine.begin, valid_sources_.begin() + mine.end);
  if (std::isfinite(loss))
    for (size_t i = 0; const auto& h : decode::translate(*model_, sources, greedy, 64)) hyps[i++] = tgt_vocab_.decode(h[0].tokens);
  if (comm_) hyps = dist::gather_strings(*comm_, hyps);
  return {{{"valid_loss", loss}, {"valid_ppl", std::exp(loss)}, {"bleu", eval::corpus_bleu(hyps, valid_refs_).score},
           {"chrf", eval::corpus_chrf(hyps, valid_refs_)}},
          "bleu"};
}

}  // namespace

tfm::TrainingResult run_translation_training(const TrainerOptions& options, const tfm::TranslationTask& o, std::ostream& out) {
  TFM_CHECK(!o.train_src.empty() && !o.train_tgt.empty() && !o.valid_src.empty() && !o.valid_tgt.empty() &&
                ((!o.src_vocab.empty() && !o.tgt_vocab.empty()) || !options.init_from.empty() || !options.resume.empty()),
            "translation training needs train_src, train_tgt, valid_src, valid_tgt, src_vocab and tgt_vocab "
            "(--train-src, --train-tgt, --valid-src, --valid-tgt, --src-vocab, --tgt-vocab; the vocabularies may come from --init-from)");
  // (each named with its value, as the trainer's options are)
  TFM_CHECK(o.max_tokens >= 1, "max_tokens must be at least 1 (got " << o.max_tokens << ")");
  TFM_CHECK(o.max_sentence_tokens >= 1, "max_sentence_tokens must be at least 1 (got " << o.max_sentence_tokens << ")");
  TFM_CHECK(o.valid_sentences >= 0, "valid_sentences must be at least 0 (got " << o.valid_sentences << ")");
  TFM_CHECK(o.label_smoothing >= 0 && o.label_smoothing < 1, "label_smoothing must be at least 0 and below 1 (got " << o.label_smoothing << ")");
  Trainer trainer(options, out);
  if (trainer.started_from()) io::check_model_kind(trainer.started_from()->model_kind, {"encoder_decoder"}, trainer.started_from_path(), "a translation one");
  TranslationTraining task(o, trainer.started_from(), trainer.started_from_path(), out);
  task.build_model(trainer.started_from(), trainer.started_from_path());
  Schedule schedule = options.schedule;
  schedule.d_model = task.d_model();
  trainer.set_schedule(schedule);
  return trainer.run(task);
}

tfm::TrainingOptions translation_training_defaults() {
  tfm::TrainingOptions t = paper_training("runs/translation", /*warmup=*/1000, /*clip_norm=*/1.0, /*validate_every=*/500);
  t.epochs = 30;
  return t;
}

}  // namespace tfm::training
