// Times tfm on one configuration: a training step (forward, backward, Adam) and
// an inference forward pass. Prints one JSON line; bench/run.sh compares it with
// bench/bench_torch.py on the same shapes.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "autograd/autograd.h"
#include "models/encoder_decoder.h"
#include "train/step.h"

namespace {

using Clock = std::chrono::steady_clock;

tfm::models::Tokens random_tokens(tfm::Rng& rng, int64_t rows, int64_t cols, int64_t vocab) {
  tfm::models::Tokens t{{}, rows, cols};
  for (int64_t i = 0; i < rows * cols; ++i) t.ids.push_back(static_cast<int>(rng.randint(1, vocab)));
  return t;
}

template <class F>
double median_seconds(int warmup, int repeats, F f) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    auto t0 = Clock::now();
    f();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tfm training-step and forward-pass benchmark"};
  tfm::models::TransformerConfig c;
  c.src_vocab = c.tgt_vocab = 8000;
  c.share_embeddings = true;
  int64_t batch = 64, src_len = 14, tgt_len = 14;
  int repeats = 5, warmup = 2;
  app.add_option("--d-model", c.d_model)->capture_default_str();
  app.add_option("--heads", c.heads)->capture_default_str();
  app.add_option("--d-ff", c.d_ff)->capture_default_str();
  app.add_option("--layers", c.encoder_layers, "Encoder and decoder layers each")->capture_default_str();
  app.add_option("--vocab", c.src_vocab)->capture_default_str();
  app.add_option("--batch", batch)->capture_default_str();
  app.add_option("--src-len", src_len)->capture_default_str();
  app.add_option("--tgt-len", tgt_len)->capture_default_str();
  app.add_option("--repeats", repeats)->capture_default_str();
  app.add_option("--warmup", warmup)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  c.tgt_vocab = c.src_vocab;
  c.decoder_layers = c.encoder_layers;

  tfm::models::EncoderDecoder model(c);
  tfm::Rng rng(1);
  model.init_parameters(rng);
  tfm::train::Adam optimizer(model.named_parameters(), {});
  optimizer.set_lr(1e-4f);
  tfm::train::Seq2SeqBatch b{random_tokens(rng, batch, src_len, c.src_vocab), random_tokens(rng, batch, tgt_len, c.tgt_vocab), {}};
  b.tgt_out = random_tokens(rng, batch, tgt_len, c.tgt_vocab).ids;

  model.train();
  const double train_s = median_seconds(warmup, repeats, [&] { tfm::train::train_step(model, optimizer, b, {}); });
  model.eval();
  const double forward_s = median_seconds(warmup, repeats, [&] {
    tfm::autograd::NoGradGuard no_grad;
    model.generator->logits(model.forward(b.src, b.tgt_in));
  });
  nlohmann::json out = {{"engine", "tfm"}, {"threads", omp_get_max_threads()}, {"parameters", model.num_parameters()},
                        {"train_step_ms", train_s * 1e3}, {"forward_ms", forward_s * 1e3},
                        {"train_tokens_per_s", batch * tgt_len / train_s}};
  std::cout << out.dump() << std::endl;
}
