#include "train/translation.h"

#include <cmath>
#include <sstream>
#include <nlohmann/json.hpp>

#include "data/batching.h"
#include "decode/translator.h"
#include "eval/metrics.h"
#include "tensor/error.h"
#include "train/step.h"
#include "train/trainer.h"

namespace tfm::train {

using nlohmann::json;

namespace {

json vocab_record(const data::Vocab& src, const data::Vocab& tgt) {
  return {{"src", {{"path", src.path()}, {"crc32", src.checksum()}}}, {"tgt", {{"path", tgt.path()}, {"crc32", tgt.checksum()}}}};
}

class TranslationTask : public TrainingTask {
 public:
  TranslationTask(const TranslationOptions& o, std::ostream& out);
  void build_model(const std::optional<io::Checkpoint>& resumed);
  // The model of `config`, which must hold the longest training pairs; errors name `origin`.
  void make_model(const models::TransformerConfig& config, const std::string& origin);

  int64_t d_model() const { return model_->config().d_model; }
  nn::Module& model() override { return *model_; }
  void init_parameters(Rng& rng) override { model_->init_parameters(rng); }
  io::Checkpoint describe() const override {
    return {"encoder_decoder", model_->config().to_json(), {}, "", {{"tfm.vocab", vocab_record(src_vocab_, tgt_vocab_).dump()}}};
  }
  void check_resumable(const io::Checkpoint& saved, const std::string& origin) const override;
  int64_t begin_epoch(int64_t epoch, uint64_t seed) override {
    batches_ = data::make_batches(train_.examples, o_.max_tokens, seed * 1000003 + static_cast<uint64_t>(epoch));
    return static_cast<int64_t>(batches_.size());
  }
  BatchLoss batch_loss(int64_t index) override {
    Seq2SeqBatch b = collate(train_.examples, batches_[static_cast<size_t>(index)]);
    return {seq2seq_loss(*model_, b, o_.label_smoothing), b.target_tokens(model_->config().pad_id)};
  }
  Validation validate() override;

 private:
  const TranslationOptions& o_;
  std::ostream& out_;
  data::Vocab src_vocab_, tgt_vocab_;
  data::EncodedCorpus train_, valid_;
  std::vector<std::string> valid_refs_;
  std::vector<std::vector<int>> valid_sources_;
  std::vector<std::vector<int64_t>> batches_;
  std::unique_ptr<models::EncoderDecoder> model_;
};

TranslationTask::TranslationTask(const TranslationOptions& o, std::ostream& out) : o_(o), out_(out) {
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
  TFM_CHECK(!valid_.examples.empty(), o_.valid_src << ": no usable sentence pairs for validation");
}

std::string sizes(const models::TransformerConfig& c) {
  return "d_model " + std::to_string(c.d_model) + ", heads " + std::to_string(c.heads) + ", d_ff " + std::to_string(c.d_ff) + ", " +
         std::to_string(c.encoder_layers) + " + " + std::to_string(c.decoder_layers) + " layers";
}

std::string str(float x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

// A resumed run keeps its checkpoint's architecture: a flag given that disagrees with it is an error.
void check_flags_agree(const TranslationOptions& o, const models::TransformerConfig& saved) {
  auto agree = [&](const std::string& flag, const std::string& given, const std::string& kept) {
    TFM_CHECK(given == kept, flag << " gives " << given << ", but " << o.trainer.resume << " has " << kept
                                  << " (a resumed run keeps its checkpoint's architecture)");
  };
  if (o.preset) agree("--preset " + *o.preset, sizes(models::preset(*o.preset)), sizes(saved));
  if (o.dropout) agree("--dropout", "dropout " + str(*o.dropout), "dropout " + str(saved.dropout));
  if (o.norm_first) agree("--post-norm", "post-norm", saved.norm_first ? "pre-norm" : "post-norm");
}

void TranslationTask::build_model(const std::optional<io::Checkpoint>& resumed) {
  if (resumed) {
    const models::TransformerConfig saved = models::TransformerConfig::from_json(resumed->config_json, o_.trainer.resume);
    check_flags_agree(o_, saved);
    return make_model(saved, o_.trainer.resume);
  }
  models::TransformerConfig base = models::preset(o_.preset.value_or("small"));
  base.src_vocab = src_vocab_.size();  // the vocabularies decide these
  base.tgt_vocab = tgt_vocab_.size();
  base.pad_id = data::Vocab::kPad;
  base.share_embeddings = src_vocab_.checksum() == tgt_vocab_.checksum();
  models::TransformerConfig config =
      o_.config_path.empty() ? base : models::TransformerConfig::from_file(o_.config_path, base, /*validate=*/false);
  TFM_CHECK(config.src_vocab == base.src_vocab && config.tgt_vocab == base.tgt_vocab && config.pad_id == base.pad_id,
            o_.config_path << ": src_vocab, tgt_vocab and pad_id come from the vocabularies (" << base.src_vocab << ", "
                           << base.tgt_vocab << " and " << base.pad_id << "); leave them out of the file");
  if (o_.dropout) config.dropout = *o_.dropout;
  if (o_.norm_first) config.norm_first = *o_.norm_first;
  const std::string origin = o_.config_path.empty() ? "model configuration" : o_.config_path;
  config.validate(origin);
  make_model(config, origin);
}

void TranslationTask::make_model(const models::TransformerConfig& config, const std::string& origin) {
  // A pair of n subwords takes n + 1 positions (the end symbol, or the start symbol on the target side).
  TFM_CHECK(o_.max_sentence_tokens < config.max_len,
            origin << ": max_len " << config.max_len << " is too short for training pairs of up to " << o_.max_sentence_tokens
                   << " subwords; raise max_len or lower --max-sentence-tokens below it");
  model_ = std::make_unique<models::EncoderDecoder>(config);
}

void TranslationTask::check_resumable(const io::Checkpoint& saved, const std::string& origin) const {
  json vocab = json::parse(saved.metadata.count("tfm.vocab") ? saved.metadata.at("tfm.vocab") : "{}", nullptr, false);
  const auto crc_of = [&](const char* side) {
    const json::json_pointer at(std::string("/") + side + "/crc32");
    return vocab.is_object() && vocab.contains(at) ? vocab.at(at) : json();
  };
  TFM_CHECK(crc_of("src") == src_vocab_.checksum() && crc_of("tgt") == tgt_vocab_.checksum(),
            origin << ": was trained with other vocabularies than " << o_.src_vocab << " and " << o_.tgt_vocab);
}

Validation TranslationTask::validate() {
  double nll = 0;
  int64_t tokens = 0;
  for (const auto& indices : data::make_batches(valid_.examples, o_.max_tokens, 0)) {
    Seq2SeqBatch b = collate(valid_.examples, indices);
    const int64_t n = b.target_tokens(model_->config().pad_id);
    nll += seq2seq_loss(*model_, b, 0.0f).item() * static_cast<double>(n);
    tokens += n;
  }
  const double loss = tokens ? nll / static_cast<double>(tokens) : 0.0;
  decode::SearchOptions greedy;
  greedy.beam = 1;
  // A diverged model (kept by --skip-nonfinite) has no scores to search by: it scores 0 rather than stopping the run.
  std::vector<std::string> hyps(valid_sources_.size());
  if (std::isfinite(loss))
    for (size_t i = 0; const auto& h : decode::translate(*model_, valid_sources_, greedy, 64)) hyps[i++] = tgt_vocab_.decode(h[0].tokens);
  return {{{"valid_loss", loss}, {"valid_ppl", std::exp(loss)}, {"bleu", eval::corpus_bleu(hyps, valid_refs_).score},
           {"chrf", eval::corpus_chrf(hyps, valid_refs_)}},
          "bleu"};
}

}  // namespace

TrainerOptions TranslationOptions::default_trainer() {
  TrainerOptions t = TrainerOptions::paper("runs/translation", /*warmup=*/1000, /*clip_norm=*/1.0, /*validate_every=*/500);
  t.epochs = 30;
  return t;
}

int run_translation_training(const TranslationOptions& o, std::ostream& out) {
  Trainer trainer(o.trainer, out);
  if (trainer.resumed()) io::check_model_kind(trainer.resumed()->model_kind, {"encoder_decoder"}, o.trainer.resume, "a translation one");
  TranslationTask task(o, out);
  task.build_model(trainer.resumed());
  Schedule schedule = o.trainer.schedule;
  schedule.d_model = task.d_model();
  trainer.set_schedule(schedule);
  return trainer.run(task);
}

}  // namespace tfm::train
