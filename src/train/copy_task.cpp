#include "train/copy_task.h"

#include <sstream>

#include "decode/beam_search.h"
#include "tensor/error.h"
#include "train/schedule.h"
#include "train/model_settings.h"
#include "train/trainer.h"

namespace tfm::training {

models::TransformerConfig default_copy_model() {
  models::TransformerConfig c;
  c.src_vocab = c.tgt_vocab = 11;
  c.d_model = 128;
  c.heads = 4;
  c.d_ff = 256;
  c.encoder_layers = c.decoder_layers = 2;
  c.dropout = 0.1f;
  c.norm_first = true;  // the Annotated Transformer's placement
  c.max_len = 64;
  return c;
}

Seq2SeqBatch make_copy_batch(Rng& rng, int64_t batch, int64_t seq_len, int64_t vocab) {
  constexpr int kStart = 1;
  Seq2SeqBatch b;
  b.src = {std::vector<int>(batch * seq_len), batch, seq_len};
  b.tgt_in = {std::vector<int>(batch * (seq_len - 1)), batch, seq_len - 1};
  b.tgt_out = {std::vector<int>(batch * (seq_len - 1)), batch, seq_len - 1};
  int32_t *src = b.src.data(), *tgt_in = b.tgt_in.data(), *tgt_out = b.tgt_out.data();
  for (int64_t r = 0; r < batch; ++r) {
    src[r * seq_len] = kStart;
    for (int64_t c = 1; c < seq_len; ++c) src[r * seq_len + c] = static_cast<int>(rng.randint(2, vocab));
    for (int64_t c = 0; c + 1 < seq_len; ++c) {
      tgt_in[r * (seq_len - 1) + c] = src[r * seq_len + c];
      tgt_out[r * (seq_len - 1) + c] = src[r * seq_len + c + 1];
    }
  }
  return b;
}

namespace {

std::string join_tokens(const models::Tokens& t, int64_t row) {
  std::string s;
  for (int64_t c = 0; c < t.cols(); ++c) {
    if (c) s += ' ';
    s += std::to_string(t.at(row, c));
  }
  return s;
}

// Epochs of kEpochBatches fresh random batches; validation decodes a few sequences.
class CopyTraining : public TrainingTask {
 public:
  CopyTraining(const tfm::CopyTask& o, uint64_t seed, const models::TransformerConfig& config) : o_(o), seed_(seed), model_(config) {}

  nn::Module& model() override { return model_; }
  void init_parameters(Rng& rng) override { model_.init_parameters(rng); }
  io::Checkpoint describe() const override { return {"encoder_decoder", model_.config().to_json(), {}, "", {}}; }
  int64_t begin_epoch(int64_t epoch, uint64_t seed) override {
    batch_seed_ = seed, first_batch_ = (epoch - 1) * tfm::CopyTask::kEpochBatches;
    return tfm::CopyTask::kEpochBatches;
  }
  BatchLoss batch_loss(int64_t index) override {
    Rng rng = substream(batch_seed_, static_cast<uint64_t>(first_batch_ + index));
    const Seq2SeqBatch batch = make_copy_batch(rng, o_.batch, o_.seq_len, model_.config().src_vocab);
    const dist::Range mine = take_share(o_.batch);
    if (mine.size() == 0) return {};
    const Seq2SeqBatch b = rows_of(batch, mine);
    Tensor loss = seq2seq_loss(model_, b, 0.0f);
    result.losses.push_back(loss.item());
    return {loss, b.target_tokens(model_.config().pad_id)};
  }
  Validation validate() override;
  std::string report() override { return samples_; }

  CopyTaskResult result;

 private:
  const tfm::CopyTask& o_;
  uint64_t seed_;  // the run's: the samples decoded at validation
  models::EncoderDecoder model_;
  uint64_t batch_seed_ = 0;
  int64_t first_batch_ = 0;  // of the epoch, counted from the run's first
  std::string samples_;
};

// Each process decodes its share of the samples; their lines are then gathered.
Validation CopyTraining::validate() {
  result.copied = result.decoded = 0;
  if (o_.samples <= 0) return {{{"copied", 0.0}}, "copied"};
  Rng sample_rng(seed_ + 1000);
  const Seq2SeqBatch samples = make_copy_batch(sample_rng, o_.samples, o_.seq_len, model_.config().src_vocab);
  const Seq2SeqBatch sample = rows_of(samples, share(o_.samples));
  decode::SearchOptions greedy;  // beam 1, no end symbol: every output has the source's length
  greedy.beam = 1, greedy.bos = samples.src.at(0, 0), greedy.eos = -1, greedy.max_len_a = 0.0f, greedy.max_len_b = o_.seq_len - 1;
  std::vector<std::vector<decode::Hypothesis>> hyps;
  if (sample.src.rows() > 0) hyps = decode::beam_search(model_, sample.src, greedy);
  std::vector<int> ids;
  for (const auto& h : hyps) {
    ids.push_back(greedy.bos);
    ids.insert(ids.end(), h[0].tokens.begin(), h[0].tokens.end());
  }
  const models::Tokens decoded(ids, sample.src.rows(), o_.seq_len);
  std::vector<std::string> lines;
  for (int64_t r = 0; r < sample.src.rows(); ++r) {
    const bool same = join_tokens(sample.src, r) == join_tokens(decoded, r);
    lines.push_back("source: " + join_tokens(sample.src, r) + "\noutput: " + join_tokens(decoded, r) + (same ? "  (copied)" : "  (differs)"));
  }
  if (comm_) lines = dist::gather_strings(*comm_, lines);
  std::ostringstream text;
  for (const std::string& line : lines) {
    result.copied += line.ends_with("(copied)");
    text << line << "\n";
  }
  result.decoded = o_.samples;
  text << result.copied << "/" << result.decoded << " sequences copied exactly";
  samples_ = text.str();
  return {{{"copied", static_cast<double>(result.copied) / static_cast<double>(result.decoded)}}, "copied"};
}

// `tfm train --resume` without data runs the copy task: any other checkpoint must be
// refused, never continued (and overwritten) as a copy task.
void check_copy_checkpoint(const io::Checkpoint& c, const std::string& origin) {
  TFM_CHECK(!c.metadata.count("tfm.vocab"), origin << ": is a translation checkpoint (it records vocabularies); resume it with its "
                                                      "data: --train-src, --train-tgt, --valid-src, --valid-tgt, --src-vocab and --tgt-vocab");
  io::check_model_kind(c.model_kind, {"encoder_decoder"}, origin, "a translation one");
}

}  // namespace

CopyTaskResult run_copy_task(const TrainerOptions& options, const tfm::CopyTask& o, std::ostream& out) {
  TFM_CHECK(o.seq_len >= 2 && o.batch >= 1 && o.samples >= 0, "copy task: need seq_len >= 2, batch >= 1 and samples >= 0");
  Trainer trainer(options, out);
  if (trainer.started_from()) check_copy_checkpoint(*trainer.started_from(), trainer.started_from_path());
  const ModelSettings settings(o.config, o.model);
  models::TransformerConfig config = settings.over(default_copy_model());
  if (trainer.started_from()) {
    const models::TransformerConfig saved = models::TransformerConfig::from_json(trainer.started_from()->config_json, trainer.started_from_path());
    config = settings.kept(config, saved, trainer.started_from_path());
  } else {
    config.validate(settings.origin());
  }
  TFM_CHECK(config.src_vocab > 2 && config.src_vocab == config.tgt_vocab, "copy task: needs equal source and target vocabularies above 2");
  TFM_CHECK(o.seq_len <= config.max_len, "copy task: seq_len " << o.seq_len << " exceeds the model's max_len " << config.max_len);
  Schedule schedule = options.schedule;
  schedule.d_model = config.d_model;
  trainer.set_schedule(schedule);
  CopyTraining task(o, options.seed, config);
  out << "copy task: vocabulary " << config.src_vocab << ", length " << o.seq_len << ", " << config.encoder_layers << "+"
      << config.decoder_layers << " layers, d_model " << config.d_model << ", "
      << (options.max_steps > 0 ? std::to_string(options.max_steps) : std::to_string(options.epochs * tfm::CopyTask::kEpochBatches))
      << " steps of batch " << o.batch << std::endl;
  task.result.run = trainer.run(task);
  return task.result;
}

tfm::TrainingOptions copy_training_defaults() {
  tfm::TrainingOptions t = paper_training("runs/copy", /*warmup=*/200, /*clip_norm=*/0, /*validate_every=*/0);
  t.max_steps = tfm::CopyTask::kEpochBatches;
  return t;
}

}  // namespace tfm::training
