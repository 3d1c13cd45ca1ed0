// The decoder-only family: tokenizers, sampling, cached generation, and a short
// training run through the shared Trainer (learning, exact resume, the CLI).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "api/inference.h"
#include "data/tokenizer.h"
#include "decode/sampling.h"
#include "autograd/autograd.h"
#include "ops/host_rules.h"
#include "ops/random.h"
#include "ops/shape.h"
#include "support/compare.h"
#include "support/devices.h"
#include "support/fixture.h"
#include "support/process.h"
#include "tfm/training.h"
#include "train/language_model.h"

namespace tfm {
namespace {

using testing::error_of;
using testing::TempDir;

TEST(Tokenizer, CharactersRoundTripAndMarkUnknowns) {
  data::Tokenizer t = data::Tokenizer::characters("hello\nwörld");
  EXPECT_EQ(t.size(), 5 + 9);  // specials + h e l o \n w ö r d
  EXPECT_EQ(t.decode(t.encode("hello\nwörld")), "hello\nwörld");
  std::vector<int> ids = t.encode("hex");
  EXPECT_EQ(ids[2], data::Tokenizer::kUnk);
  EXPECT_EQ(t.decode(ids), "he");
  EXPECT_EQ(t.decode({t.line_break_id()}), "\n");
  data::Tokenizer back = data::Tokenizer::from_record(t.record(), "test");
  EXPECT_EQ(back.encode("world"), t.encode("world"));
  EXPECT_NE(error_of([] { data::Tokenizer::from_record("{\"type\":\"characters\"}", "ckpt"); }).find("ckpt: the tokenizer record"),
            std::string::npos);
}

// ops::sample on one row of logits.
int sample_one(const std::vector<float>& logits, const decode::SamplingOptions& o, Rng& rng) {
  return ops::sample(Tensor::from_vector({1, static_cast<int64_t>(logits.size())}, logits), o.sampling(), rng).values<int32_t>()[0];
}

TEST(Sampling, GreedyTopKAndTopPPickTheLikeliest) {
  const std::vector<float> logits{0.1f, 2.0f, -1.0f, 1.9f};
  Rng rng(3);
  decode::SamplingOptions o;
  o.temperature = 0.0f;
  EXPECT_EQ(sample_one(logits, o, rng), 1);
  o.temperature = 1.0f, o.top_k = 1;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sample_one(logits, o, rng), 1);
  o.top_k = 0, o.top_p = 0.01f;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sample_one(logits, o, rng), 1);
}

// Sequences that join a running batch at different steps, leave it as they finish and
// outgrow the context window (64 positions) in it get the tokens each gets alone; a
// sequence whose callback throws ends with that exception and the others go on.
TEST(GenerationBatch, GivesEachSequenceTheTokensItGetsAlone) {
  api::FamilyModel<models::GPT> lm(testing::fixture_path("threads/lm.safetensors"), "gpt", "a language model", ModelOptions{});
  struct Case {
    std::vector<int> prompt;
    float temperature;
    int64_t tokens, joins_at;
  };
  const std::vector<Case> cases{{{5, 6, 7}, 0.8f, 150, 0}, {{9}, 0.0f, 20, 0}, {std::vector<int>(70, 11), 1.0f, 40, 3},
                                {{12, 13}, 0.5f, 90, 3}, {{14}, 0.8f, 5, 30}};
  std::vector<std::vector<int>> alone, together(cases.size());
  std::vector<int> finished(cases.size(), 0);
  auto options = [](const Case& c, uint64_t seed) {
    decode::SamplingOptions o;
    o.max_new_tokens = c.tokens, o.temperature = c.temperature, o.seed = seed, o.top_k = 20;
    if (seed % 2 == 1) o.repetition_penalty = 1.3f, o.frequency_penalty = 0.2f, o.presence_penalty = 0.3f, o.min_p = 0.05f;  // (the tokens so far too)
    return o;
  };
  for (size_t i = 0; i < cases.size(); ++i) alone.push_back(decode::generate(lm.model, cases[i].prompt, options(cases[i], 100 + i)));
  decode::GenerationBatch batch(lm.model);
  for (int64_t step = 0; step < 200 && (step <= 30 || batch.size() > 0); ++step) {
    for (size_t i = 0; i < cases.size(); ++i)
      if (cases[i].joins_at == step)
        batch.join(cases[i].prompt, options(cases[i], 100 + i), [&, i](int id) { return together[i].push_back(id), true; },
                   [&, i](std::exception_ptr e) { finished[i] += e ? 100 : 1; });
    batch.step();
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(together[i], alone[i]) << "sequence " << i;
    EXPECT_EQ(finished[i], 1) << "sequence " << i << " finished once, without an error";
  }
  // A callback that throws ends its own sequence only.
  std::vector<int> other;
  std::string error;
  batch.join({5, 6, 7}, options(cases[0], 100), [](int) -> bool { throw std::runtime_error("stop here"); },
             [&](std::exception_ptr e) {
               try {
                 if (e) std::rethrow_exception(e);
               } catch (const std::exception& x) {
                 error = x.what();
               }
             });
  batch.join({9}, options(cases[1], 101), [&](int id) { return other.push_back(id), true; }, [](std::exception_ptr) {});
  while (batch.size() > 0) batch.step();
  EXPECT_EQ(error, "stop here");
  EXPECT_EQ(other, alone[1]);
}

// Prompts of one length that join together run as one batch, and each sequence still
// gets the tokens it gets alone; one whose prompt fails (an id outside the vocabulary)
// ends with its error, and the others of its length go on.
TEST(GenerationBatch, PromptsOfOneLengthRunTogetherAndAFailingOneEndsAlone) {
  api::FamilyModel<models::GPT> lm(testing::fixture_path("threads/lm.safetensors"), "gpt", "a language model", ModelOptions{});
  const int bad = static_cast<int>(lm.model.config().vocab);
  const std::vector<std::vector<int>> prompts{{5, 6, 7}, {bad, 6, 7}, {8, 9, 10}, {11, 12, 13}};
  std::vector<std::vector<int>> alone(prompts.size()), together(prompts.size());
  std::vector<std::string> errors(prompts.size());
  auto options = [](size_t i) {
    decode::SamplingOptions o;
    o.max_new_tokens = 20, o.temperature = 0.8f, o.seed = 40 + i;
    return o;
  };
  for (size_t i : {0u, 2u, 3u}) alone[i] = decode::generate(lm.model, prompts[i], options(i));
  for (bool with_bad : {false, true}) {
    decode::GenerationBatch batch(lm.model);
    for (size_t i = 0; i < prompts.size(); ++i) {
      together[i].clear();
      if (i == 1 && !with_bad) continue;
      batch.join(prompts[i], options(i), [&, i](int id) { return together[i].push_back(id), true; }, [&, i](std::exception_ptr e) {
        try {
          if (e) std::rethrow_exception(e);
        } catch (const std::exception& x) {
          errors[i] = x.what();
        }
      });
    }
    while (batch.size() > 0) batch.step();
    for (size_t i : {0u, 2u, 3u}) EXPECT_EQ(together[i], alone[i]) << "sequence " << i << (with_bad ? " beside the failing one" : "");
  }
  EXPECT_NE(errors[1].find("outside the vocabulary"), std::string::npos) << errors[1];
  EXPECT_TRUE(together[1].empty());
  EXPECT_TRUE(errors[0].empty() && errors[2].empty() && errors[3].empty());
}

// With room for two sequences, a third waits until one finishes, then runs, and each gets
// the tokens it gets alone; the room is what a whole window of every layer could take.
TEST(GenerationBatch, AtMostMaxRowsRunAndTheOthersWaitTheirTurn) {
  api::FamilyModel<models::GPT> lm(testing::fixture_path("threads/lm.safetensors"), "gpt", "a language model", ModelOptions{});
  const std::vector<std::vector<int>> prompts{{5, 6, 7}, {9}, {12, 13}};
  const std::vector<int64_t> lengths{10, 30, 20};
  std::vector<std::vector<int>> alone, together(prompts.size());
  auto options = [&](size_t i) {
    decode::SamplingOptions o;
    o.max_new_tokens = lengths[i], o.temperature = 0.8f, o.seed = 7 + i;
    return o;
  };
  for (size_t i = 0; i < prompts.size(); ++i) alone.push_back(decode::generate(lm.model, prompts[i], options(i)));
  decode::GenerationBatch batch(lm.model, /*max_rows=*/2);
  for (size_t i = 0; i < prompts.size(); ++i)
    batch.join(prompts[i], options(i), [&, i](int id) { return together[i].push_back(id), true; }, [](std::exception_ptr) {});
  batch.step();
  EXPECT_EQ(batch.waiting(), 1);
  EXPECT_TRUE(together[2].empty());
  for (int step = 1; step < 10; ++step) batch.step();  // the first finishes at its 10th token
  EXPECT_EQ(batch.waiting(), 0);
  while (batch.size() > 0) batch.step();
  EXPECT_EQ(together, alone);
  const models::StackConfig& c = lm.model.config();  // 64 positions (96 and 16 as storage grows), 4 layers' keys and values
  EXPECT_EQ(decode::GenerationBatch::row_bytes(c), (c.max_len * 3 / 2 + 16) * c.d_model * 2 * c.layers * 4);
}

// The penalties against transformers' RepetitionPenaltyLogitsProcessor and OpenAI's
// frequency and presence penalties (tests/reference/make_sampling_fixtures.py).
TEST(Sampling, PenaltiesAreTransformersAndOpenAIs) {
  std::ifstream in(testing::fixture_path("sampling/penalties.json"));
  const nlohmann::json cases = nlohmann::json::parse(in).at("cases");
  ASSERT_EQ(cases.size(), 3u);
  for (const nlohmann::json& c : cases) {
    const std::vector<int> seen = c.at("seen").get<std::vector<int>>();
    ops::SampledRow row;
    row.seen = seen, row.generated = c.at("generated").get<int64_t>();
    row.sampling.repetition_penalty = c.at("repetition_penalty").get<float>();
    std::vector<float> logits = c.at("logits").get<std::vector<float>>();
    ops::penalize(logits, row);
    const std::vector<float> repeated = c.at("repeated").get<std::vector<float>>(), penalized = c.at("penalized").get<std::vector<float>>();
    for (size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(logits[i], repeated[i], 1e-6) << "repetition penalty, logit " << i;
    row.sampling.frequency_penalty = c.at("frequency_penalty").get<float>(), row.sampling.presence_penalty = c.at("presence_penalty").get<float>();
    logits = c.at("logits").get<std::vector<float>>();
    ops::penalize(logits, row);
    for (size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(logits[i], penalized[i], 1e-6) << "the three penalties, logit " << i;
  }
}

// Greedy choice sees the penalties: the likeliest token, once seen, gives way.
TEST(Sampling, GreedyChoiceAfterARepetitionPenalty) {
  const std::vector<float> logits{0.1f, 2.0f, -1.0f, 1.9f};
  const std::vector<int> seen{1};
  ops::Sampling greedy;
  greedy.temperature = 0.0f, greedy.repetition_penalty = 1.2f;
  Rng rng(1);
  const Tensor row = Tensor::from_vector({1, 4}, logits);
  EXPECT_EQ(ops::sample(row, {{greedy, &rng, seen, 0}}).values<int32_t>()[0], 3);
  greedy.repetition_penalty = 1.0f, greedy.presence_penalty = 0.2f;
  EXPECT_EQ(ops::sample(row, {{greedy, &rng, seen, 0}}).values<int32_t>()[0], 1) << "the presence penalty counts generated tokens only";
  EXPECT_EQ(ops::sample(row, {{greedy, &rng, seen, 1}}).values<int32_t>()[0], 3);
}

// min_p keeps the tokens transformers' MinPLogitsWarper keeps (its definition in
// tests/reference/make_sampling_fixtures.py): every draw among them, each of them drawn.
TEST(Sampling, MinPKeepsTheTokensTransformersKeeps) {
  std::ifstream in(testing::fixture_path("sampling/penalties.json"));
  const nlohmann::json fixture = nlohmann::json::parse(in);
  for (const nlohmann::json& c : fixture.at("cases")) {
    const std::vector<float> logits = c.at("logits").get<std::vector<float>>();
    decode::SamplingOptions o;
    o.temperature = c.at("temperature").get<float>(), o.min_p = c.at("min_p").get<float>();
    Rng rng(5);
    std::set<int> drawn;
    for (int i = 0; i < 3000; ++i) drawn.insert(sample_one(logits, o, rng));
    const std::vector<int> kept = c.at("min_p_kept").get<std::vector<int>>();
    EXPECT_EQ(std::vector<int>(drawn.begin(), drawn.end()), kept);
  }
}

TEST(Sampling, FrequenciesFollowTheTemperedSoftmax) {
  const std::vector<float> logits{0.0f, 1.0f, 2.0f};
  decode::SamplingOptions o;
  o.temperature = 2.0f;
  Rng rng(11);
  std::vector<int> counts(3);
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(sample_one(logits, o, rng))];
  double z = 0;
  for (float l : logits) z += std::exp(l / 2.0);
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(counts[static_cast<size_t>(k)] / double(n), std::exp(logits[static_cast<size_t>(k)] / 2.0) / z, 0.015);
}

models::StackConfig tiny_gpt(int64_t context) {
  models::StackConfig c = training::default_language_model();
  c.vocab = 12, c.d_model = 16, c.heads = 2, c.d_ff = 32, c.layers = 2, c.max_len = context;
  return c;
}

// The same model in the Llama family's settings: RMS norms, rotary positions, SwiGLU,
// grouped-query heads (4 over 2), no biases, an untied head.
models::StackConfig tiny_llama(int64_t context) {
  models::StackConfig c = tiny_gpt(context);
  c.heads = 4, c.kv_heads = 2, c.rms_norm = true, c.rotary = true, c.learned_positions = false, c.gated = true;
  c.activation = nn::Activation::SiLU, c.qkv_bias = c.out_bias = c.ff_bias = false, c.tied_head = false;
  return c;
}

// (Rotary positions count from the cache; grouped-query heads read the cache's K/V heads.)
TEST(Generation, CachedEqualsRecomputedWithinTheWindow) {
  for (const models::StackConfig& c : {tiny_gpt(32), tiny_llama(32)}) {
    models::GPT model(c);
    Rng init(5);
    model.init_parameters(init);
    decode::SamplingOptions o;
    o.max_new_tokens = 25, o.temperature = 1.0f, o.seed = 9;
    std::vector<int> cached = decode::generate(model, {1, 7, 3}, o);
    o.use_cache = false;
    EXPECT_EQ(decode::generate(model, {1, 7, 3}, o), cached);
    EXPECT_EQ(cached.size(), 25u);
  }
}

// The prefill's logits: the last position of each row only, as the whole forward pass
// gives it, with and without a cached prefix, in f32 and bf16 frozen products.
TEST(Generation, LastLogitsAreTheWholeForwardsLastRow) {
  for (const models::StackConfig& c : {tiny_gpt(32), tiny_llama(32)})
    for (ops::Precision p : {ops::Precision::f32, ops::Precision::bf16}) {
      models::GPT model(c);
      Rng init(5);
      model.init_parameters(init);
      model.eval();
      model.products().set_precision(p);
      model.products().freeze();
      autograd::NoGradGuard no_grad;
      const std::vector<int> ids = {1, 7, 3, 4, 2, 9, 5, 8, 0, 6};  // two rows of 5
      const Tensor all = model.forward({ids, 2, 5});  // [2, 5, vocab]
      const Tensor last = ops::reshape(ops::slice(all, 1, 4, 5), {2, c.vocab});
      const Tensor head = model.last_logits({ids, 2, 5});
      ASSERT_EQ(head.shape(), (Shape{2, c.vocab}));
      EXPECT_LT(testing::compare(head, last).relative, 1e-5) << testing::compare(head, last).describe("last_logits");
      std::vector<nn::KVCache> caches;  // 3 positions cached, then 2
      model.forward({{1, 7, 3}, 1, 3}, &caches);
      const Tensor continued = model.last_logits({{4, 2}, 1, 2}, &caches);
      EXPECT_LT(testing::compare(continued, ops::slice(last, 0, 0, 1)).relative, 1e-5);
    }
}

// Inference keeps one copy of each product's weight: the bf16 or int8 copy, the f32
// weight released; a weight the embedding reads too (GPT's tied head) stays. The tokens
// are those of the model that keeps both, and a released weight cannot be read.
TEST(Generation, FrozenCopiesStandInForTheWeightsTheyRelease) {
  for (const models::StackConfig& c : {tiny_gpt(32), tiny_llama(32)})
    for (ops::Precision p : {ops::Precision::f32, ops::Precision::bf16, ops::Precision::int8}) {
      auto frozen = [&] {
        auto model = std::make_unique<models::GPT>(c);
        Rng init(5);
        model->init_parameters(init);
        model->eval();
        model->products().set_precision(p);
        model->products().freeze();
        return model;
      };
      const auto both = frozen(), one = frozen();
      const int64_t released = one->keep_product_copies_only();
      int64_t released_bytes = 0;
      for (const auto& [name, w] : one->named_parameters())
        if (w.impl()->storage->released()) released_bytes += w.numel() * 4;
      EXPECT_EQ(released, released_bytes);
      const nn::MultiHeadAttention& attention = *one->blocks->layers[0]->self_attn;
      if (p != ops::Precision::f32) {  // (f32's packed copies stand in where oneDNN packs for this CPU)
        EXPECT_TRUE(attention.in_proj_weight.impl()->storage->released());
        EXPECT_TRUE(one->blocks->layers[1]->feed_forward->linear2->weight.impl()->storage->released());
        if (one->lm_head) EXPECT_TRUE(one->lm_head->weight.impl()->storage->released());
        EXPECT_NE(error_of([&] { (void)attention.in_proj_weight.to_vector(); }).find("released for inference"), std::string::npos);
      }
      EXPECT_FALSE(one->tok_embed->weight.impl()->storage->released()) << "the embedding reads it";
      EXPECT_FALSE(one->blocks->layers[0]->norm1->weight.impl()->storage->released());
      decode::SamplingOptions o;
      o.max_new_tokens = 12, o.temperature = 1.0f, o.seed = 3;
      EXPECT_EQ(decode::generate(*one, {1, 7, 3}, o), decode::generate(*both, {1, 7, 3}, o));
    }
}

TEST(Generation, ContinuesPastTheContextWindow) {
  models::GPT model(tiny_gpt(8));
  Rng init(5);
  model.init_parameters(init);
  decode::SamplingOptions o;
  o.max_new_tokens = 40;
  std::vector<int> streamed;
  std::vector<int> out = decode::generate(model, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, o, [&](int id) { streamed.push_back(id); });
  EXPECT_EQ(out.size(), 40u);
  EXPECT_EQ(streamed, out);
}

std::string repeated_text() {
  std::string text;
  for (int i = 0; i < 300; ++i) text += "the quick brown fox jumps over the lazy dog\n";
  return text;
}

struct LmRun {
  TrainingOptions options = LanguageModelTask::training_defaults();
  LanguageModelTask task;
};

LmRun tiny_run(const TempDir& dir, const std::string& out, int64_t steps, const models::StackConfig& config = tiny_gpt(16)) {
  LmRun r;
  r.task.data.text = dir.path("text.txt");
  nlohmann::json model = nlohmann::json::parse(config.to_json());
  model.erase("vocab");  // the tokenizer decides it
  r.task.model = model.dump();
  r.task.batch = 8, r.task.sample_tokens = 0;
  r.options.out_dir = dir.path(out), r.options.max_steps = steps, r.options.validate_every = 50, r.options.log_every = 10;
  r.options.schedule.warmup = 10, r.options.schedule.lr = 1e-2f;
  return r;
}

// Trains through the library's call (tfm::train), logging to `log`.
TrainingResult run_training(const LmRun& r, std::ostream& log) { return tfm::train(r.options, r.task, {}, &log); }

TEST(LanguageModelTraining, LearnsARepeatedSentence) {
  TempDir dir;
  testing::write_file(dir.path("text.txt"), repeated_text());
  std::ostringstream log;
  LmRun o = tiny_run(dir, "run", 300);
  ASSERT_FALSE(run_training(o, log).stopped) << log.str();
  // Uniform guessing over 31 tokens costs ln 31 = 3.4 nats; the sentence is nearly deterministic.
  const std::string metrics = testing::read_file(dir.path("run/metrics.jsonl"));
  const size_t at = metrics.rfind("\"valid_loss\":");
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_LT(std::stod(metrics.substr(at + 13)), 0.3) << log.str();

  testing::CliResult g = testing::run_tfm("generate " + dir.path("run/best.safetensors") + " --prompt 'the quick' --max-new-tokens 20 --temperature 0");
  EXPECT_EQ(g.code, 0) << g.output;
  EXPECT_EQ(g.output.rfind("the quick", 0), 0u) << g.output;
  EXPECT_GE(g.output.size(), 29u) << g.output;
  testing::CliResult full =
      testing::run_command("{ " + std::string(TFM_BINARY) + " generate " + dir.path("run/best.safetensors") + " --prompt 'the' > /dev/full; }");
  EXPECT_EQ(full.code, 1);
  EXPECT_EQ(full.output, "tfm: error: writing stdout: No space left on device\n") << "generation must stop at a failed write";
  testing::CliResult bad = testing::run_tfm("generate " + testing::fixture_path("model_post_relu.safetensors"));
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.output.find("not a language model"), std::string::npos) << bad.output;
}

// SentencePiece drops the leading space of a piece decoded alone: generate must not lose the spaces.
// The Llama family's settings learn it too (their backward: RMS norm, rotary, SwiGLU,
// grouped-query attention).
TEST(LanguageModelTraining, LlamaSettingsLearnARepeatedSentence) {
  TempDir dir;
  testing::write_file(dir.path("text.txt"), repeated_text());
  std::ostringstream log;
  ASSERT_FALSE(run_training(tiny_run(dir, "run", 300, tiny_llama(16)), log).stopped) << log.str();
  const std::string metrics = testing::read_file(dir.path("run/metrics.jsonl"));
  const size_t at = metrics.rfind("\"valid_loss\":");
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_LT(std::stod(metrics.substr(at + 13)), 0.3) << log.str();
}

TEST(LanguageModelTraining, GeneratesSentencePieceTextWithItsSpaces) {
  TempDir dir;
  testing::write_file(dir.path("text.txt"), repeated_text());
  ASSERT_EQ(testing::run_tfm("vocab --text " + dir.path("text.txt") + " --size 40 --out " + dir.path("v")).code, 0);
  testing::CliResult t = testing::run_tfm("lm train --text " + dir.path("text.txt") + " --vocab " + dir.path("v.model") +
                                          " --layers 1 --d-model 32 --heads 2 --d-ff 64 --context 16 --steps 100 --lr 1e-2 --warmup 10"
                                          " --validate-every 100 --sample-tokens 0 --out " + dir.path("run"));
  ASSERT_EQ(t.code, 0) << t.output;
  testing::CliResult g = testing::run_tfm("generate --model " + dir.path("run/best.safetensors") +
                                          " --prompt 'the quick' --max-new-tokens 30 --temperature 0");
  ASSERT_EQ(g.code, 0) << g.output;
  EXPECT_GE(std::count(g.output.begin(), g.output.end(), ' '), 5) << g.output;  // "the quick brown fox jumps over the lazy dog"
}

// Resumed on a text with characters its vocabulary never saw: a warning, then training (the review's F13).
TEST(LanguageModelTraining, ResumingOnATextWithNewCharactersWarns) {
  TempDir dir;
  testing::write_file(dir.path("text.txt"), repeated_text());
  std::ostringstream log;
  ASSERT_FALSE(run_training(tiny_run(dir, "run", 2), log).stopped) << log.str();
  testing::write_file(dir.path("other.txt"), repeated_text() + "\xce\xa9\xce\xa9\n");  // two omegas
  LmRun rest = tiny_run(dir, "run", 3);
  rest.task.data.text = dir.path("other.txt");
  rest.options.resume = dir.path("run/last.safetensors");
  std::ostringstream resumed;
  ASSERT_FALSE(run_training(rest, resumed).stopped) << resumed.str();
  EXPECT_NE(resumed.str().find("warning: 2 tokens of " + dir.path("other.txt") + " are not in the vocabulary of " + rest.options.resume),
            std::string::npos)
      << resumed.str();
  EXPECT_EQ(log.str().find("not in the vocabulary"), std::string::npos) << log.str();
}

TEST(LanguageModelTraining, ResumeEndsWithTheSameWeightsAsAnUninterruptedRun) {
  TempDir dir;
  testing::write_file(dir.path("text.txt"), repeated_text());
  std::ostringstream log;
  ASSERT_FALSE(run_training(tiny_run(dir, "straight", 8), log).stopped) << log.str();
  ASSERT_FALSE(run_training(tiny_run(dir, "split", 4), log).stopped) << log.str();
  LmRun rest = tiny_run(dir, "split", 8);
  rest.options.resume = dir.path("split/last.safetensors");
  ASSERT_FALSE(run_training(rest, log).stopped) << log.str();
  testing::expect_same_checkpoint_tensors(dir.path("straight/last.safetensors"), dir.path("split/last.safetensors"));
  // Each run logs its last step's training loss whatever --log-every (10 here), so that
  // a short run's curve is not empty (the review's F6); the resumed run once more.
  const std::string metrics = testing::read_file(dir.path("split/metrics.jsonl"));
  std::ostringstream done;  // resumed at its last step: nothing to train, nothing logged again
  ASSERT_FALSE(run_training(rest, done).stopped) << done.str();
  EXPECT_NE(done.str().find(rest.options.resume + " is at step 8 of 8: nothing to train"), std::string::npos) << done.str();
  EXPECT_EQ(testing::read_file(dir.path("split/metrics.jsonl")), metrics);
  EXPECT_NE(metrics.find("\"step\":4,\"train_loss\""), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\"step\":8,\"train_loss\""), std::string::npos) << metrics;
}

// On the simulated device (tensor/device.h), resumed there: the CPU's weights bit for bit.
TEST(LanguageModelTraining, TrainsOnTheSimulatedDeviceAsOnTheCpu) {
  TempDir dir;
  testing::write_file(dir.path("text.txt"), repeated_text());
  const LmRun run = tiny_run(dir, "", 8);
  testing::expect_the_simulated_device_trains_and_resumes_as_the_cpu(dir.path(""), run.options, run.task);
}

}  // namespace
}  // namespace tfm
