#include "train/copy_task.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "decode/beam_search.h"
#include "tensor/error.h"
#include "train/trainer.h"

namespace tfm::train {

models::TransformerConfig CopyTaskOptions::default_model() {
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

TrainerOptions CopyTaskOptions::default_trainer() {
  TrainerOptions t = TrainerOptions::paper("runs/copy", /*warmup=*/200, /*clip_norm=*/0, /*validate_every=*/0);
  t.max_steps = kEpochBatches;
  return t;
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
class CopyTask : public TrainingTask {
 public:
  CopyTask(const CopyTaskOptions& o, const models::TransformerConfig& config) : o_(o), model_(config) {}

  nn::Module& model() override { return model_; }
  void init_parameters(Rng& rng) override { model_.init_parameters(rng); }
  io::Checkpoint describe() const override { return {"encoder_decoder", model_.config().to_json(), {}, "", {}}; }
  int64_t begin_epoch(int64_t epoch, uint64_t seed) override {
    seed_ = seed, first_batch_ = (epoch - 1) * CopyTaskOptions::kEpochBatches;
    return CopyTaskOptions::kEpochBatches;
  }
  BatchLoss batch_loss(int64_t index) override {
    Rng rng = substream(seed_, static_cast<uint64_t>(first_batch_ + index));
    Seq2SeqBatch b = make_copy_batch(rng, o_.batch, o_.seq_len, model_.config().src_vocab);
    Tensor loss = seq2seq_loss(model_, b, 0.0f);
    result.losses.push_back(loss.item());
    return {loss, b.target_tokens(model_.config().pad_id)};
  }
  Validation validate() override;
  std::string report() override { return samples_; }

  CopyTaskResult result;

 private:
  const CopyTaskOptions& o_;
  models::EncoderDecoder model_;
  uint64_t seed_ = 0;
  int64_t first_batch_ = 0;  // of the epoch, counted from the run's first
  std::string samples_;
};

Validation CopyTask::validate() {
  result.copied = result.decoded = 0;
  if (o_.samples <= 0) return {{{"copied", 0.0}}, "copied"};
  Rng sample_rng(o_.trainer.seed + 1000);
  Seq2SeqBatch sample = make_copy_batch(sample_rng, o_.samples, o_.seq_len, model_.config().src_vocab);
  decode::SearchOptions greedy;  // beam 1, no end symbol: every output has the source's length
  greedy.beam = 1, greedy.bos = sample.src.at(0, 0), greedy.eos = -1, greedy.max_len_a = 0.0f, greedy.max_len_b = o_.seq_len - 1;
  std::vector<std::vector<decode::Hypothesis>> hyps = decode::beam_search(model_, sample.src, greedy);
  std::vector<int> ids;
  for (const auto& h : hyps) {
    ids.push_back(greedy.bos);
    ids.insert(ids.end(), h[0].tokens.begin(), h[0].tokens.end());
  }
  const models::Tokens decoded(ids, o_.samples, o_.seq_len);
  std::ostringstream text;
  for (int64_t r = 0; r < o_.samples; ++r) {
    const bool same = join_tokens(sample.src, r) == join_tokens(decoded, r);
    result.copied += same;
    text << "source: " << join_tokens(sample.src, r) << "\noutput: " << join_tokens(decoded, r) << (same ? "  (copied)" : "  (differs)")
         << "\n";
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

// A JSON value as a user wrote it: floats with 6 significant digits (0.1, not 0.10000000149011612).
std::string shown(const nlohmann::json& v) {
  if (!v.is_number_float()) return v.dump();
  std::ostringstream os;
  os << v.get<double>();
  return os.str();
}

// A resumed run keeps its checkpoint's architecture: a field the user chose that
// disagrees with it is an error, naming each such field.
void check_model_agrees(const CopyTaskOptions& o, const models::TransformerConfig& saved) {
  const nlohmann::json g = nlohmann::json::parse(o.model.to_json()), s = nlohmann::json::parse(saved.to_json());
  const std::string& origin = o.trainer.resume;
  std::string differ;
  for (const std::string& key : o.model_fields_given)
    if (g.contains(key) && s.contains(key) && g[key] != s[key])
      differ += (differ.empty() ? "" : ", ") + key + " " + shown(g[key]) + " (" + origin + ": " + shown(s[key]) + ")";
  TFM_CHECK(differ.empty(), "the model flags and --config disagree with " << origin << ": " << differ
                                                                           << " (a resumed run keeps its checkpoint's architecture)");
}

}  // namespace

CopyTaskResult run_copy_task(const CopyTaskOptions& o, std::ostream& out) {
  TFM_CHECK(o.seq_len >= 2 && o.batch >= 1, "copy task: need seq_len >= 2 and batch >= 1");
  Trainer trainer(o.trainer, out);
  if (trainer.resumed()) check_copy_checkpoint(*trainer.resumed(), o.trainer.resume);
  const models::TransformerConfig config =
      trainer.resumed() ? models::TransformerConfig::from_json(trainer.resumed()->config_json, o.trainer.resume) : o.model;
  if (trainer.resumed()) check_model_agrees(o, config);
  TFM_CHECK(config.src_vocab > 2 && config.src_vocab == config.tgt_vocab, "copy task: needs equal source and target vocabularies above 2");
  TFM_CHECK(o.seq_len <= config.max_len, "copy task: seq_len " << o.seq_len << " exceeds the model's max_len " << config.max_len);
  Schedule schedule = o.trainer.schedule;
  schedule.d_model = config.d_model;
  trainer.set_schedule(schedule);
  CopyTask task(o, config);
  out << "copy task: vocabulary " << config.src_vocab << ", length " << o.seq_len << ", " << config.encoder_layers << "+"
      << config.decoder_layers << " layers, d_model " << config.d_model << ", "
      << (o.trainer.max_steps > 0 ? std::to_string(o.trainer.max_steps) : "unlimited") << " steps of batch " << o.batch << std::endl;
  task.result.exit_code = trainer.run(task);
  return task.result;
}

}  // namespace tfm::train
