// tfm's side of bench/run.sh and bench/gpu/. Each subcommand prints one JSON line, and writes the
// exact work it did (batches, source sentences) for PyTorch's side to repeat:
//   train      forward + backward + Adam on real Multi30k batches
//   lm         forward + backward + AdamW of a GPT language model on windows of a text
//   translate  batched greedy or beam search over a file of sentences
//   sgemm      the GEMM peak oneDNN reaches on this machine
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "data/batching.h"
#include "data/tokenizer.h"
#include "decode/translation_model.h"
#include "decode/translator.h"
#include "models/gpt.h"
#include "ops/cpu/gemm.h"
#include "threads/openmp_wait.h"
#include "ops/dispatch.h"
#include "ops/linear_products.h"
#include "ops/loss.h"
#include "ops/shape.h"
#include "tensor/error.h"
#include "tensor/storage.h"
#include "tensor/rng.h"
#include "tfm/translator.h"
#include "train/language_model.h"
#include "train/seq2seq.h"
#include "train/step.h"
#ifdef TFM_HAVE_CUDA
#include "tensor/cuda/runtime.h"
#endif

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

json rows(const tfm::models::Tokens& t) {
  json out = json::array();
  for (int64_t r = 0; r < t.rows(); ++r) out.push_back(std::vector<int>(t.data() + r * t.cols(), t.data() + (r + 1) * t.cols()));
  return out;
}

void write_json(const std::string& path, const json& j) {
  std::ofstream out(path);
  out << j.dump();
  TFM_CHECK(out, path << ": cannot write");
}

// The timed steps of a training benchmark (the warm-up left out) and the last one's loss.
struct Timing {
  std::vector<double> step_s;
  double last_loss = 0;
  double seconds() const { return std::accumulate(step_s.begin(), step_s.end(), 0.0); }
};

// warmup + steps optimisation steps at learning rate `lr`, step i on batch_loss(i) (the
// Trainer's step: its one read of the loss makes each step's time the device's). On the
// GPU, TFM_CUDA_PROFILE's profile leaves the warm-up steps out.
Timing timed_steps(tfm::training::OptimizationStep& step, int64_t warmup, int64_t steps, float lr,
                   const std::function<tfm::training::BatchLoss(int64_t)>& batch_loss) {
  Timing t;
  for (int64_t i = 0; i < warmup + steps; ++i) {
    const auto t0 = Clock::now();
    t.last_loss = step.gradients(batch_loss, i, i + 1).loss;
    step.update(lr);
#ifdef TFM_HAVE_CUDA
    if (i + 1 == warmup) tfm::cuda::restart_profile();
#endif
    if (i >= warmup) t.step_s.push_back(seconds_since(t0));
  }
  return t;
}

struct TrainOptions {
  std::string preset = "base", vocab, src, tgt, batches_out;
  int64_t max_tokens = 4000, steps = 20, warmup = 3;
  tfm::ops::Precision precision = tfm::ops::Precision::f32;
  std::string device = "cpu";
};

// The first warmup + steps batches of a shuffled epoch, as the trainer makes them.
void bench_train(const TrainOptions& o) {
  const tfm::data::Vocab vocab = tfm::data::Vocab::load(o.vocab);
  const tfm::data::EncodedCorpus corpus = tfm::data::encode_corpus(tfm::data::read_parallel(o.src, o.tgt), vocab, vocab, 100);
  std::vector<std::vector<int64_t>> order = tfm::data::make_batches(corpus.examples, o.max_tokens, 1);
  TFM_CHECK(static_cast<int64_t>(order.size()) >= o.warmup + o.steps, "the corpus has too few batches");
  std::vector<tfm::training::Seq2SeqBatch> batches;
  json dump = json::array();
  for (int64_t i = 0; i < o.warmup + o.steps; ++i) {
    batches.push_back(tfm::training::collate(corpus.examples, order[static_cast<size_t>(i)], tfm::models::TransformerConfig()));  // tfm's symbols
    const tfm::training::Seq2SeqBatch& b = batches.back();
    dump.push_back({{"src", rows(b.src)}, {"tgt_in", rows(b.tgt_in)}, {"tgt_out", rows(b.tgt_out)}});
  }
  if (!o.batches_out.empty()) write_json(o.batches_out, dump);

  tfm::models::TransformerConfig c = tfm::models::preset(o.preset);
  c.src_vocab = c.tgt_vocab = vocab.size();
  c.share_embeddings = true;
  tfm::models::EncoderDecoder model(c);
  model.products().set_precision(o.precision);
  model.to(tfm::ops::usable_device(o.device));
  model.flatten_parameters();  // as the Trainer trains
  tfm::Rng rng(1);
  model.init_parameters(rng);
  tfm::training::OptimizationStep step(model, {}, std::cerr);  // the Trainer's step (no clipping, one process)
  model.train();
  const Timing timing = timed_steps(step, o.warmup, o.steps, 1e-4f, [&](int64_t i) {
    const tfm::training::Seq2SeqBatch& b = batches[static_cast<size_t>(i)];
    return tfm::training::BatchLoss{tfm::training::seq2seq_loss(model, b, 0.1f), b.target_tokens(c.pad_id)};
  });
  int64_t tokens = 0;
  for (int64_t i = o.warmup; i < o.warmup + o.steps; ++i) tokens += batches[static_cast<size_t>(i)].target_tokens(c.pad_id);
  std::cout << json{{"engine", "tfm"}, {"precision", to_string(o.precision)}, {"device", o.device}, {"threads", omp_get_max_threads()},
                    {"parameters", model.num_parameters()},
                    {"config", json::parse(c.to_json())}, {"steps", o.steps}, {"seconds", timing.seconds()}, {"target_tokens", tokens},
                    {"median_step_ms", median(timing.step_s) * 1e3}, {"peak_tensor_mib", tfm::Storage::peak_bytes() / 1048576.0}}
                   .dump()
            << std::endl;
}

struct LmOptions {
  std::string text, vocab, batches_out;
  int64_t layers = 12, d_model = 768, heads = 12, context = 1024, batch = 8, steps = 10, warmup = 3;  // GPT-2 small, 8 x 1024 tokens
  tfm::ops::Precision precision = tfm::ops::Precision::f32;
  std::string device = "cpu";
};

// tfm lm train's model (learned positions, pre-norm, GELU, d_ff 4 x d_model, no dropout) in the shape asked for.
tfm::models::StackConfig lm_config(const LmOptions& o, int64_t vocab) {
  tfm::models::StackConfig c = tfm::training::default_language_model();
  c.layers = o.layers, c.d_model = o.d_model, c.heads = o.heads, c.d_ff = 4 * o.d_model, c.max_len = o.context, c.vocab = vocab;
  return c.validated("tfm_bench lm");
}

// One step's windows of context + 1 tokens: the inputs, and the same shifted by one as targets.
struct LmBatch {
  tfm::models::Tokens input;
  tfm::Tensor targets;
};

// `batch` windows drawn at random from the first 90% of the text, as tfm lm train draws
// them; each window's ids (context + 1) go to `dump` for PyTorch's side.
LmBatch lm_batch(const std::vector<int>& train, const LmOptions& o, tfm::Rng& rng, json& dump) {
  std::vector<int> x, y;
  json windows = json::array();
  for (int64_t w = 0; w < o.batch; ++w) {
    const auto start = train.begin() + rng.randint(0, static_cast<int64_t>(train.size()) - o.context);
    x.insert(x.end(), start, start + o.context);
    y.insert(y.end(), start + 1, start + o.context + 1);
    windows.push_back(std::vector<int>(start, start + o.context + 1));
  }
  dump.push_back({{"ids", windows}});
  return {tfm::models::Tokens(x, o.batch, o.context), tfm::Tensor::from_values(y)};
}

// The first warmup + steps batches of a text tokenized as tfm lm train tokenizes it
// (a SentencePiece vocabulary, else characters), trained with its recipe's AdamW and
// clipping at a constant rate.
void bench_lm(const LmOptions& o) {
  const std::string text = tfm::data::read_text(o.text);
  const tfm::data::Tokenizer tokenizer = o.vocab.empty() ? tfm::data::Tokenizer::characters(text) : tfm::data::Tokenizer::sentencepiece(o.vocab);
  std::vector<int> train = tokenizer.encode(text);
  train.resize(train.size() * 9 / 10);  // the rest is tfm lm train's validation text
  TFM_CHECK(static_cast<int64_t>(train.size()) > o.context, o.text << ": too short for a window of " << o.context + 1 << " tokens");
  tfm::Rng rng(1);
  json dump = json::array();
  std::vector<LmBatch> batches;
  for (int64_t i = 0; i < o.warmup + o.steps; ++i) batches.push_back(lm_batch(train, o, rng, dump));
  if (!o.batches_out.empty()) write_json(o.batches_out, dump);

  const tfm::models::StackConfig c = lm_config(o, tokenizer.size());
  tfm::models::GPT model(c);
  model.products().set_precision(o.precision);
  model.to(tfm::ops::usable_device(o.device));
  model.flatten_parameters();  // as the Trainer trains
  model.init_parameters(rng);
  const tfm::TrainingOptions recipe = tfm::training::language_model_training_defaults();
  tfm::training::OptimizationStep step(model, {recipe.adam, recipe.clip_norm}, std::cerr);
  model.train();
  const Timing timing = timed_steps(step, o.warmup, o.steps, recipe.adam.lr, [&](int64_t i) {
    const LmBatch& b = batches[static_cast<size_t>(i)];
    tfm::Tensor logits = tfm::ops::reshape(model.forward(b.input), {-1, c.vocab});
    return tfm::training::BatchLoss{tfm::ops::cross_entropy(logits, b.targets, 0.0f, /*ignore_index=*/-1), b.targets.numel()};
  });
  std::cout << json{{"engine", "tfm"}, {"precision", to_string(o.precision)}, {"device", o.device}, {"threads", omp_get_max_threads()},
                    {"parameters", model.num_parameters()}, {"config", json::parse(c.to_json())}, {"tokenizer", tokenizer.describe()},
                    {"steps", o.steps}, {"seconds", timing.seconds()}, {"target_tokens", o.steps * o.batch * o.context},
                    {"median_step_ms", median(timing.step_s) * 1e3}, {"last_loss", timing.last_loss},
                    {"peak_tensor_mib", tfm::Storage::peak_bytes() / 1048576.0}}
                   .dump()
            << std::endl;
}

// tfm's length rule made explicit (a 1.5, b 10 unless given), so that PyTorch's twin
// (bench/torch_translate.py, which reads them from --job-out) applies the same one.
tfm::decode::SearchOptions explicit_lengths() {
  tfm::decode::SearchOptions s;
  s.max_len_a = 1.5f, s.max_len_b = 10;
  return s;
}

struct TranslateOptions {
  std::string model, vocab, input, job_out, device = "cpu";
  tfm::decode::SearchOptions search = explicit_lengths();
  int64_t batch = 32, limit = 0, warmup = 0;
  int workers = 1;
  tfm::ops::Precision precision = tfm::ops::Precision::f32;
};

void report_translation(const TranslateOptions& o, double seconds, const std::vector<std::vector<int>>& outputs,
                        const std::vector<double>& batch_s) {
  int64_t tokens = 0;
  for (const std::vector<int>& h : outputs) tokens += static_cast<int64_t>(h.size()) + 1;  // + the end symbol
  std::cout << json{{"engine", "tfm"}, {"precision", to_string(o.precision)}, {"device", o.device}, {"seconds", seconds}, {"sentences", outputs.size()},
                    {"target_tokens", tokens},
                    {"workers", o.workers}, {"median_batch_ms", batch_s.empty() ? json() : json(median(batch_s) * 1e3)},
                    {"peak_tensor_mib", tfm::Storage::peak_bytes() / 1048576.0}, {"outputs", outputs}}
                   .dump()
            << std::endl;
}

// Batches in parallel, as `tfm translate` runs them (tfm::Translator's workers): only
// the total time means something.
void bench_translator(const TranslateOptions& o) {
  std::vector<std::string> lines = tfm::data::read_lines(o.input);
  if (o.limit > 0 && static_cast<int64_t>(lines.size()) > o.limit) lines.resize(static_cast<size_t>(o.limit));
  tfm::TranslatorOptions options;
  options.precision = to_string(o.precision), options.workers = o.workers, options.max_batch = o.batch, options.device = o.device;
  options.src_vocab = options.tgt_vocab = o.vocab;
  tfm::Translator translator(o.model, options);
  const tfm::decode::SearchOptions& s = o.search;
  const auto start = Clock::now();
  const std::vector<tfm::Translation> results = translator.translate(lines, {s.beam, s.nbest, s.length_penalty, s.max_len_a, s.max_len_b});
  const double seconds = seconds_since(start);
  std::vector<std::vector<int>> outputs;
  for (const tfm::Translation& t : results) outputs.push_back(t.token_ids[0]);
  report_translation(o, seconds, outputs, {});
}

void bench_translate(const TranslateOptions& o) {
  if (o.workers != 1) return bench_translator(o);
  tfm::decode::TranslationModel tm = tfm::decode::TranslationModel::load(o.model, o.vocab, o.vocab);
  tm.model->products().set_precision(o.precision);
  tm.model->to(tfm::ops::usable_device(o.device));  // then frozen, as tfm::Translator does
  tm.model->products().freeze();
  std::vector<std::vector<int>> sources;
  for (const std::string& line : tfm::data::read_lines(o.input)) {
    if (o.limit > 0 && static_cast<int64_t>(sources.size()) == o.limit) break;
    sources.push_back(tm.src_vocab.encode(line));
  }
  tfm::decode::SearchOptions s = o.search;  // with the model's own start and end symbols (a Marian model's differ from tfm's)
  s.bos = tm.model->config().bos_id, s.eos = tm.model->config().eos_id;
  if (!o.job_out.empty())
    write_json(o.job_out, {{"sources", sources}, {"bos", s.bos}, {"eos", s.eos}, {"length_penalty", s.length_penalty},
                           {"max_len_a", *s.max_len_a}, {"max_len_b", *s.max_len_b}});
  // Batch by batch as decode::translate orders them, to time each batch.
  const std::vector<size_t> order = tfm::decode::length_order(sources);
  const auto batch_at = [&](size_t b) {  // the indices of the sentences of the batch that starts at order[b]
    return std::vector<size_t>(order.begin() + static_cast<std::ptrdiff_t>(b),
                               order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), b + static_cast<size_t>(o.batch))));
  };
  const auto search = [&](const std::vector<size_t>& idx) {
    std::vector<std::vector<int>> batch;
    for (size_t i : idx) batch.push_back(sources[i]);
    return tfm::decode::translate(*tm.model, batch, s, o.batch);
  };
  for (int64_t w = 0; w < o.warmup && !order.empty(); ++w) search(batch_at(0));
  std::vector<std::vector<int>> outputs(sources.size());
  std::vector<double> batch_s;
  const auto start = Clock::now();
  for (size_t b = 0; b < order.size(); b += static_cast<size_t>(o.batch)) {
    const std::vector<size_t> idx = batch_at(b);
    const auto t0 = Clock::now();
    const std::vector<std::vector<tfm::decode::Hypothesis>> hyps = search(idx);
    batch_s.push_back(seconds_since(t0));
    for (size_t k = 0; k < idx.size(); ++k) outputs[idx[k]] = hyps[k][0].tokens;
  }
  report_translation(o, seconds_since(start), outputs, batch_s);
}

// The best single-precision GEMM rate over shapes like the training step's.
void bench_sgemm() {
  const int64_t shapes[][3] = {{1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 2048, 512}, {4096, 512, 2048}, {4096, 8000, 512}};
  json results = json::array();
  double best = 0;
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    std::vector<float> a(static_cast<size_t>(m * k), 0.5f), b(static_cast<size_t>(k * n), 0.25f), c(static_cast<size_t>(m * n));
    int64_t runs = 0;
    tfm::ops::cpu::gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);  // warm-up
    const auto t0 = Clock::now();
    while (runs < 3 || seconds_since(t0) < 1.0) {
      tfm::ops::cpu::gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
      ++runs;
    }
    const double gflops = 2.0 * m * n * k * runs / seconds_since(t0) / 1e9;
    best = std::max(best, gflops);
    results.push_back({{"m", m}, {"n", n}, {"k", k}, {"gflops", gflops}});
  }
  std::cout << json{{"threads", omp_get_max_threads()}, {"peak_gflops", best}, {"shapes", results}}.dump() << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  tfm::choose_openmp_wait(argv);  // the wait `tfm` runs with
  CLI::App app{"tfm's side of bench/run.sh"};
  app.require_subcommand(1);
  std::string precision = "f32";
  app.add_option("--precision", precision, "Linear layers' products: f32, bf16 or int8 (int8: translate only)")
      ->check(CLI::IsMember({"f32", "bf16", "int8"}));
  app.fallthrough();
  TrainOptions t;
  CLI::App* train = app.add_subcommand("train", "Training steps on Multi30k batches");
  train->add_option("--preset", t.preset)->capture_default_str()->check(CLI::IsMember({"small", "base"}));
  train->add_option("--vocab", t.vocab, "Joint SentencePiece vocabulary")->required()->check(CLI::ExistingFile);
  train->add_option("--src", t.src, "Source training text")->required()->check(CLI::ExistingFile);
  train->add_option("--tgt", t.tgt, "Target training text")->required()->check(CLI::ExistingFile);
  train->add_option("--max-tokens", t.max_tokens, "Tokens per batch")->capture_default_str();
  train->add_option("--steps", t.steps, "Timed steps")->capture_default_str();
  train->add_option("--warmup", t.warmup, "Untimed steps first")->capture_default_str();
  train->add_option("--batches-out", t.batches_out, "Write the batches (ids) here as JSON");
  train->add_option("--device", t.device, "cpu or cuda (each step ends with its loss read back, so its time is the device's)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda", "sim"}));
  train->callback([&] {
    t.precision = tfm::ops::parse_precision(precision);
    bench_train(t);
  });

  LmOptions lm;
  CLI::App* lm_cmd = app.add_subcommand("lm", "Training steps of a GPT language model on windows of a text (default: GPT-2 small's shape)");
  lm_cmd->add_option("--text", lm.text, "Training text (plain or .gz)")->required()->check(CLI::ExistingFile);
  lm_cmd->add_option("--vocab", lm.vocab, "SentencePiece vocabulary from tfm vocab --text (default: characters)")->check(CLI::ExistingFile);
  lm_cmd->add_option("--layers", lm.layers)->capture_default_str();
  lm_cmd->add_option("--d-model", lm.d_model)->capture_default_str();
  lm_cmd->add_option("--heads", lm.heads)->capture_default_str();
  lm_cmd->add_option("--context", lm.context, "Tokens a window feeds the model")->capture_default_str();
  lm_cmd->add_option("--batch", lm.batch, "Windows per step")->capture_default_str();
  lm_cmd->add_option("--steps", lm.steps, "Timed steps")->capture_default_str();
  lm_cmd->add_option("--warmup", lm.warmup, "Untimed steps first")->capture_default_str();
  lm_cmd->add_option("--batches-out", lm.batches_out, "Write the windows (ids) here as JSON");
  lm_cmd->add_option("--device", lm.device, "cpu or cuda")->capture_default_str()->check(CLI::IsMember({"cpu", "cuda", "sim"}));
  lm_cmd->callback([&] {
    lm.precision = tfm::ops::parse_precision(precision);
    bench_lm(lm);
  });

  TranslateOptions tr;
  CLI::App* translate = app.add_subcommand("translate", "Translation of a text file");
  translate->add_option("--model", tr.model, "Translation checkpoint or Hugging Face model directory")->required()->check(CLI::ExistingPath);
  translate->add_option("--vocab", tr.vocab, "The checkpoint's joint vocabulary, where it is not at the path the checkpoint records")
      ->check(CLI::ExistingFile);
  translate->add_option("--input", tr.input, "Source sentences (plain or .gz)")->required()->check(CLI::ExistingFile);
  translate->add_option("--device", tr.device, "cpu or cuda")->capture_default_str()->check(CLI::IsMember({"cpu", "cuda", "sim"}));
  translate->add_option("--beam", tr.search.beam)->capture_default_str();
  translate->add_option("--batch", tr.batch)->capture_default_str();
  translate->add_option("--workers", tr.workers, "Batches searched at once (tfm::Translator; 1: batch by batch on the calling thread, timed)")
      ->capture_default_str();
  translate->add_option("--max-len-a", tr.search.max_len_a, "Maximum output length: a * source length + b (a 1.5)");
  translate->add_option("--max-len-b", tr.search.max_len_b, "Maximum output length: a * source length + b (b 10)");
  translate->add_option("--limit", tr.limit, "Only the first N sentences (0: all)")->capture_default_str();
  translate->add_option("--warmup", tr.warmup, "Untimed searches of the first batch first (a GPU's first calls load its kernels; --workers 1)")
      ->capture_default_str();
  translate->add_option("--job-out", tr.job_out, "Write the source ids and search options here as JSON");
  translate->callback([&] {
    tr.precision = tfm::ops::parse_precision(precision);
    bench_translate(tr);
  });

  app.add_subcommand("sgemm", "oneDNN's single-precision GEMM rate")->callback(bench_sgemm);
  try {
    CLI11_PARSE(app, argc, argv);
  } catch (const tfm::Error& e) {
    std::cerr << "tfm_bench: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
