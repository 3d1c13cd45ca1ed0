#include "train/copy_task.h"

#include <nlohmann/json.hpp>

#include "decode/beam_search.h"
#include "io/checkpoint.h"
#include "tensor/error.h"
#include "train/progress.h"

namespace tfm::train {

using nlohmann::json;

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

Seq2SeqBatch make_copy_batch(Rng& rng, int64_t batch, int64_t seq_len, int64_t vocab) {
  constexpr int kStart = 1;
  Seq2SeqBatch b;
  b.src = {std::vector<int>(batch * seq_len), batch, seq_len};
  b.tgt_in = {std::vector<int>(batch * (seq_len - 1)), batch, seq_len - 1};
  for (int64_t r = 0; r < batch; ++r) {
    b.src.ids[r * seq_len] = kStart;
    for (int64_t c = 1; c < seq_len; ++c) b.src.ids[r * seq_len + c] = static_cast<int>(rng.randint(2, vocab));
    for (int64_t c = 0; c + 1 < seq_len; ++c) {
      b.tgt_in.ids[r * (seq_len - 1) + c] = b.src.ids[r * seq_len + c];
      b.tgt_out.push_back(b.src.ids[r * seq_len + c + 1]);
    }
  }
  return b;
}

namespace {

struct RunState {
  int64_t step = 0;
  uint64_t data_rng = 0, dropout_rng = 0;
};

std::string train_state_json(const RunState& s) {
  return json{{"step", s.step}, {"data_rng", s.data_rng}, {"dropout_rng", s.dropout_rng}}.dump();
}

RunState parse_train_state(const std::string& text, const std::string& origin) {
  try {
    json j = json::parse(text);
    return {j.at("step").get<int64_t>(), j.at("data_rng").get<uint64_t>(), j.at("dropout_rng").get<uint64_t>()};
  } catch (const json::exception&) {
    throw Error(origin + ": the training state in the metadata is malformed");
  }
}

std::string join_tokens(const models::Tokens& t, int64_t row) {
  std::string s;
  for (int64_t c = 0; c < t.cols; ++c) s += (c ? " " : "") + std::to_string(t.at(row, c));
  return s;
}

}  // namespace

CopyTaskResult run_copy_task(const CopyTaskOptions& o, std::ostream& out) {
  TFM_CHECK(o.seq_len >= 2 && o.batch >= 1 && o.steps >= 1, "copy task: need seq_len >= 2, batch >= 1 and steps >= 1");
  models::TransformerConfig config = o.model;
  io::SafeTensors resumed;
  RunState state;
  if (!o.resume_path.empty()) {
    resumed = io::read_safetensors(o.resume_path);
    io::Checkpoint info = io::checkpoint_info(resumed, o.resume_path);
    TFM_CHECK(!info.train_state.empty(), o.resume_path << ": holds weights only, no training state to resume from");
    config = models::TransformerConfig::from_json(info.config_json, o.resume_path);
    state = parse_train_state(info.train_state, o.resume_path);
  }
  TFM_CHECK(config.src_vocab > 2 && config.src_vocab == config.tgt_vocab, "copy task: needs equal source and target vocabularies above 2");
  TFM_CHECK(o.seq_len <= config.max_len, "copy task: seq_len " << o.seq_len << " exceeds the model's max_len " << config.max_len);

  models::EncoderDecoder model(config);
  AdamOptions adam;
  adam.lr = 0.0f;  // set by the schedule each step
  Adam optimizer(model.named_parameters(), adam);
  Rng data_rng(o.seed * 2 + 1);
  if (!o.resume_path.empty()) {
    io::load_parameters(model, resumed, o.resume_path);
    io::Checkpoint info = io::checkpoint_info(resumed, o.resume_path);
    optimizer.load_state(info.optimizer, state.step);
    data_rng.set_state(state.data_rng);
    global_rng().set_state(state.dropout_rng);
    out << "resumed " << o.resume_path << " at step " << state.step << "\n";
  } else {
    Rng init_rng(o.seed);
    model.init_parameters(init_rng);
    global_rng().set_state(o.seed * 2 + 2);
  }
  out << "copy task: vocabulary " << config.src_vocab << ", length " << o.seq_len << ", " << config.encoder_layers
      << "+" << config.decoder_layers << " layers, d_model " << config.d_model << ", " << model.num_parameters()
      << " parameters, " << o.steps << " steps of batch " << o.batch << std::endl;

  auto save = [&](int64_t step) {
    if (o.save_path.empty()) return;
    RunState s{step, data_rng.state(), global_rng().state()};
    io::save_checkpoint(o.save_path, model, {"encoder_decoder", config.to_json(), optimizer.state(), train_state_json(s)});
  };

  CopyTaskResult result;
  StepOptions step_options;
  step_options.label_smoothing = 0.0f;
  model.train();
  Progress progress(o.steps, state.step, o.log_every);
  for (int64_t step = state.step + 1; step <= o.steps; ++step) {
    Seq2SeqBatch batch = make_copy_batch(data_rng, o.batch, o.seq_len, config.src_vocab);
    optimizer.set_lr(noam_lr(step, config.d_model, o.lr_factor, o.warmup));
    const double loss = train_step(model, optimizer, batch, step_options);
    result.losses.push_back(loss);
    progress.update(step, loss, optimizer.lr(), batch.target_tokens(config.pad_id));
    if (o.save_every > 0 && step % o.save_every == 0 && step < o.steps) save(step);
  }
  progress.finish();
  save(o.steps);
  if (!o.save_path.empty()) out << "saved " << o.save_path << "\n";

  model.eval();
  Rng sample_rng(o.seed + 1000);
  if (o.samples > 0) {
    Seq2SeqBatch sample = make_copy_batch(sample_rng, o.samples, o.seq_len, config.src_vocab);
    decode::SearchOptions greedy;  // beam 1, no end symbol: every output has the source's length
    greedy.beam = 1, greedy.bos = sample.src.ids[0], greedy.eos = -1, greedy.max_len_a = 0.0f, greedy.max_len_b = o.seq_len - 1;
    std::vector<std::vector<decode::Hypothesis>> hyps = decode::beam_search(model, sample.src, greedy);
    models::Tokens decoded{{}, o.samples, o.seq_len};
    for (const auto& h : hyps) {
      decoded.ids.push_back(greedy.bos);
      decoded.ids.insert(decoded.ids.end(), h[0].tokens.begin(), h[0].tokens.end());
    }
    for (int64_t r = 0; r < o.samples; ++r) {
      const bool same = join_tokens(sample.src, r) == join_tokens(decoded, r);
      result.copied += same;
      out << "source: " << join_tokens(sample.src, r) << "\noutput: " << join_tokens(decoded, r) << (same ? "  (copied)" : "  (differs)")
          << "\n";
    }
    result.decoded = o.samples;
    out << result.copied << "/" << result.decoded << " sequences copied exactly\n";
  }
  return result;
}

}  // namespace tfm::train
