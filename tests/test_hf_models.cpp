// Hugging Face checkpoints (../shared/fixtures/hf, made by transformers 4.39) read into
// tfm's models compute what transformers computed, tensor by tensor: encoder outputs,
// hidden states and logits within 1e-4 of the largest reference magnitude.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "autograd/autograd.h"
#include "decode/beam_search.h"
#include "decode/sampling.h"
#include "hf/directory.h"
#include "hf/export.h"
#include "hf/model.h"
#include "io/checkpoint.h"
#include "models/bert.h"
#include "models/encoder_decoder.h"
#include "models/gpt.h"
#include "models/vit.h"
#include "nn/trace.h"
#include "ops/convert.h"
#include "ops/random.h"
#include "ops/shape.h"
#include "support/compare.h"
#include "support/fixture.h"
#include "support/process.h"
#include "tfm/classifier.h"

namespace tfm {
namespace {

constexpr double kTol = 1e-4;

#define EXPECT_THROW_MESSAGE(call, text)                                           \
  do {                                                                             \
    const std::string message_ = testing::error_of([&] { call; });                 \
    EXPECT_NE(message_.find(text), std::string::npos) << message_;                 \
  } while (0)

// A fixture of ../shared/fixtures/hf, or ours (tests/fixtures/hf, made by
// tests/reference/make_hf_fixtures.py).
std::string shared(const std::string& name) { return testing::hf_fixture_path(name); }
std::string ours(const std::string& name) { return testing::fixture_path("hf/" + name); }

struct Fixture {
  hf::Directory dir;
  io::SafeTensors weights;    // under tfm's names
  io::SafeTensors reference;  // reference.safetensors
  explicit Fixture(const std::string& path)
      : dir(hf::open(path)),
        weights(hf::convert(dir)),
        reference(io::read_safetensors(dir.file("reference.safetensors"))) {}
  const Tensor& ref(const std::string& name) const {
    const Tensor* t = reference.find(name);
    if (!t) throw Error("reference.safetensors has no '" + name + "'");
    return *t;
  }
  // An i64 id tensor [rows, cols] as tfm's i32 tokens.
  models::Tokens tokens(const std::string& name) const {
    models::Tokens t;
    t.ids = ops::to(ref(name), DType::i32);
    return t;
  }
  std::string config() const { return io::checkpoint_info(weights, dir.path).config_json; }
  template <class M>
  void load(M& model) const {
    io::load_parameters(model.named_parameters(), weights, dir.path);
    model.eval();
  }
};

// Each sentence's encoder output and teacher-forced logits (s0, s1, ... of reference.safetensors).
void expect_marian_outputs(const Fixture& f, int sentences) {
  models::EncoderDecoder model(models::TransformerConfig::from_json(f.config(), "converted"));
  f.load(model);
  const int pad = model.config().pad_id;
  for (int i = 0; i < sentences; ++i) {
    const std::string s = "s" + std::to_string(i);
    const models::Tokens src = f.tokens(s + ".input_ids");
    // The decoder starts from its start symbol (Marian's pad id, M2M100's </s>): the labels
    // shifted right (no padding to mask).
    const std::vector<int> labels = ops::to(f.ref(s + ".labels"), DType::i32).values<int>();
    std::vector<int> shifted = {model.config().bos_id};
    shifted.insert(shifted.end(), labels.begin(), labels.end() - 1);
    const models::Tokens tgt(shifted, 1, static_cast<int64_t>(shifted.size()));
    const ops::AttentionMask src_mask = models::padding_mask(src, pad, Device::CPU);
    const Tensor memory = model.encode(src, src_mask);
    EXPECT_TENSOR_NEAR(s + ".encoder_last_hidden_state", memory, f.ref(s + ".encoder_last_hidden_state"), kTol);
    ops::AttentionMask causal;
    causal.causal = true;
    const Tensor hidden = model.decode(memory, src_mask, tgt, causal);
    EXPECT_TENSOR_NEAR(s + ".logits", model.generator->logits(hidden), f.ref(s + ".logits"), kTol);
  }
}

TEST(HfModels, MarianEncoderOutputAndTeacherForcedLogits) { expect_marian_outputs(Fixture(shared("marian_opus_mt_tiny_de_en")), 5); }

// Language labels (>>fr<<, >>cmn_Hans<<, >>fra<<) as the source's first token.
TEST(HfModels, MarianMultiTargetEncoderOutputAndLogits) { expect_marian_outputs(Fixture(ours("marian_multi_target_tiny")), 7); }

// Separate vocabularies: the encoder's embedding and the decoder's apart, the head tied to
// the decoder's.
TEST(HfModels, MarianSeparateVocabsEncoderOutputAndLogits) {
  const Fixture f(ours("marian_separate_vocabs_tiny"));
  const models::TransformerConfig c = models::TransformerConfig::from_json(f.config(), "converted");
  EXPECT_FALSE(c.share_embeddings);
  EXPECT_TRUE(c.tie_generator);
  expect_marian_outputs(f, 4);
}

// A copy of one of our fixtures whose config.json and weights the test may change.
struct Copy {
  testing::TempDir tmp;
  std::string dir = tmp.path("copy");
  nlohmann::json config;
  io::NamedTensors weights;
  explicit Copy(const std::string& fixture) {
    std::filesystem::copy(ours(fixture), dir);
    for (const auto& f : std::filesystem::directory_iterator(dir))
      std::filesystem::permissions(f.path(), std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
    config = nlohmann::json::parse(testing::read_file(dir + "/config.json"));
    weights = io::read_safetensors(dir + "/model.safetensors").tensors;
  }
  // Writes the changed files and converts the directory.
  io::SafeTensors convert() const {
    testing::write_file(dir + "/config.json", config.dump());
    io::write_safetensors(dir + "/model.safetensors", weights, {});
    return hf::convert(hf::open(dir));
  }
};

const Tensor& named(const io::SafeTensors& file, const std::string& name) {
  const Tensor* t = file.find(name);
  if (!t) throw Error("no tensor '" + name + "'");
  return *t;
}

// tie_word_embeddings false: the head is lm_head.weight, apart from the decoder's embedding.
TEST(HfModels, MarianSeparateVocabsWithAnUntiedHead) {
  Copy copy("marian_separate_vocabs_tiny");
  copy.config["tie_word_embeddings"] = false;
  Tensor head = ops::scale(named(io::SafeTensors{{}, copy.weights}, "model.decoder.embed_tokens.weight"), 2.0f);
  copy.weights.emplace_back("lm_head.weight", head);
  const io::SafeTensors converted = copy.convert();
  EXPECT_EQ(named(converted, "generator.weight").to_vector(), head.to_vector());
  EXPECT_EQ(named(converted, "tgt_embed.weight").to_vector(), ops::scale(head, 0.5f).to_vector());
  EXPECT_FALSE(models::TransformerConfig::from_json(io::checkpoint_info(converted, "x").config_json, "x").tie_generator);
}

TEST(HfModels, MarianEmbeddingSettingsTransformersCannotLoadAreRefused) {
  Copy separate("marian_separate_vocabs_tiny");
  separate.config["decoder_vocab_size"] = 90;
  EXPECT_THROW_MESSAGE(separate.convert(), "config.json: decoder_vocab_size 90 differs from vocab_size 102 (transformers' MarianModel gives the "
                                           "decoder a copy of the vocab_size embedding)");
  Copy shared_embeddings("marian_multi_target_tiny");
  shared_embeddings.config["tie_word_embeddings"] = false;
  EXPECT_THROW_MESSAGE(shared_embeddings.convert(), "config.json: tie_word_embeddings false is not supported (tfm computes tie_word_embeddings true)");
}

// `fixture` with its weights renamed (`renames`: stored name -> new name), written to a
// temporary directory beside copies of its other files, converted.
io::SafeTensors converted_with_renames(const std::string& fixture, const std::map<std::string, std::string>& renames) {
  testing::TempDir tmp;
  const std::string dir = tmp.path("renamed");
  std::filesystem::create_directories(dir);
  for (const auto& f : std::filesystem::directory_iterator(fixture))
    if (f.path().filename() != "model.safetensors") std::filesystem::copy_file(f.path(), dir + "/" + f.path().filename().string());
  io::NamedTensors weights = io::read_safetensors(fixture + "/model.safetensors").tensors;
  for (auto& [name, t] : weights)
    if (renames.count(name)) name = renames.at(name);
  io::write_safetensors(dir + "/model.safetensors", weights, {});
  return hf::convert(hf::open(dir));
}

// Every parameter converted from `renamed` is the one converted from the fixture as stored.
void expect_same_parameters(const io::SafeTensors& renamed, const std::string& fixture, const std::string& what) {
  const io::SafeTensors original = hf::convert(hf::open(fixture));
  ASSERT_EQ(renamed.tensors.size(), original.tensors.size()) << what;
  for (size_t i = 0; i < original.tensors.size(); ++i) {
    EXPECT_EQ(renamed.tensors[i].first, original.tensors[i].first) << what;
    EXPECT_EQ(renamed.tensors[i].second.to_vector(), original.tensors[i].second.to_vector()) << what << ": " << original.tensors[i].first;
  }
}

// A tied tensor stored under any one of its names loads, as transformers loads it.
TEST(HfModels, TiedWeightsLoadUnderAnyOfTheirNames) {
  for (const char* alias : {"lm_head.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"})
    expect_same_parameters(converted_with_renames(shared("marian_opus_mt_tiny_de_en"), {{"model.shared.weight", alias}}),
                           shared("marian_opus_mt_tiny_de_en"), alias);
  expect_same_parameters(converted_with_renames(ours("marian_separate_vocabs_tiny"), {{"model.decoder.embed_tokens.weight", "lm_head.weight"}}),
                         ours("marian_separate_vocabs_tiny"), "separate vocabularies' lm_head.weight");
  expect_same_parameters(converted_with_renames(shared("gpt2_tiny"), {{"transformer.wte.weight", "lm_head.weight"}}), shared("gpt2_tiny"),
                         "gpt2's lm_head.weight");
  expect_same_parameters(converted_with_renames(shared("bert_tiny_uncased"), {{"bert.embeddings.word_embeddings.weight", "cls.predictions.decoder.weight"},
                                                                             {"cls.predictions.bias", "cls.predictions.decoder.bias"}}),
                         shared("bert_tiny_uncased"), "bert's MLM decoder");
  EXPECT_THROW_MESSAGE(converted_with_renames(shared("marian_opus_mt_tiny_de_en"), {{"model.shared.weight", "model.other.weight"}}),
                       ": missing tensor 'model.shared.weight' (nor its tied copies 'model.encoder.embed_tokens.weight', "
                       "'model.decoder.embed_tokens.weight', 'lm_head.weight'), which config.json's architecture needs");
}

// mBART's settings as tfm reads them: its class's defaults where config.json lacks a key
// (scale_embedding false; forced_eos_token_id 2 where generate() starts from config.json,
// none where generation_config.json lacks it), its learned tables [max_len + 2, d_model].
TEST(HfModels, MBartSettingsAndTheirDefaults) {
  const auto config_of = [](const io::SafeTensors& converted) {
    return models::TransformerConfig::from_json(io::checkpoint_info(converted, "x").config_json, "x");
  };
  Copy copy("mbart50_tiny");
  const io::SafeTensors converted = copy.convert();
  models::TransformerConfig c = config_of(converted);
  EXPECT_EQ(c.positions, "learned");
  EXPECT_TRUE(c.embed_norm && c.scale_embedding && c.forced_eos && c.final_norm && c.norm_first);
  EXPECT_EQ(c.bos_id, 2);
  EXPECT_EQ(named(converted, "src_pos.weight").shape(), (Shape{66, 16}));
  for (const char* key : {"scale_embedding", "forced_eos_token_id"}) copy.config.erase(key);
  std::filesystem::remove(copy.dir + "/generation_config.json");
  c = config_of(copy.convert());
  EXPECT_FALSE(c.scale_embedding);
  EXPECT_TRUE(c.forced_eos);  // MBartConfig's
  testing::write_file(copy.dir + "/generation_config.json", R"({"decoder_start_token_id": 2, "eos_token_id": 2})");
  EXPECT_FALSE(config_of(copy.convert()).forced_eos);  // GenerationConfig's default: none
  copy.config["tie_word_embeddings"] = false;
  EXPECT_THROW_MESSAGE(copy.convert(), "config.json: tie_word_embeddings false is not supported (tfm computes tie_word_embeddings true)");
}

// A translation model's settings that its family's Hugging Face class lacks are refused by
// name on export: mBART's embedding LayerNorm and unscaled embeddings for M2M100 and Marian,
// learned positions without that LayerNorm for mBART.
TEST(HfModels, TranslationSettingsAFamilyLacksAreRefusedOnExport) {
  const auto refusal = [](const std::string& settings) {
    const std::string config = R"({"src_vocab": 30, "tgt_vocab": 30, "d_model": 16, "heads": 2, "share_embeddings": true, )" + settings + "}";
    return testing::error_of([&] { hf::export_model("encoder_decoder", config, {}, {}, "m"); });
  };
  EXPECT_EQ(refusal(R"("positions": "fairseq", "embed_norm": true)"),
            "m: scale_embedding false or embed_norm true (M2M100 scales its embeddings and does not normalise them) cannot be written as a "
            "Hugging Face m2m_100 model");
  EXPECT_EQ(refusal(R"("positions": "split", "norm_first": false, "final_norm": false, "scale_embedding": false)"),
            "m: scale_embedding false or embed_norm true (Marian scales its embeddings and does not normalise them) cannot be written as a "
            "Hugging Face marian model");
  EXPECT_EQ(refusal(R"("positions": "learned")"),
            "m: embed_norm false (mBART normalises embeddings + positions: layernorm_embedding) cannot be written as a Hugging Face mbart model");
  EXPECT_EQ(refusal(R"("positions": "learned", "embed_norm": true, "final_norm": false)"),
            "m: norm_first false, final_norm false, separate embeddings or norm_eps other than 1e-5 (MBartForConditionalGeneration is pre-norm "
            "with final LayerNorms and embeddings shared three ways) cannot be written as a Hugging Face mbart model");
}

// Which settings generate() starts from, as transformers 4.39 chooses them.
TEST(HfModels, MarianLengthLimitFollowsTransformersGenerationSettings) {
  const auto max_length = [](const Copy& copy) {
    return models::TransformerConfig::from_json(io::checkpoint_info(copy.convert(), "x").config_json, "x").max_length;
  };
  Copy copy("marian_multi_target_tiny");  // config.json: max_length 512; generation_config.json: 40
  const nlohmann::json config = copy.config;
  EXPECT_EQ(max_length(copy), 40);
  const nlohmann::json generation = nlohmann::json::parse(testing::read_file(copy.dir + "/generation_config.json"));
  nlohmann::json changed = generation;
  changed.erase("max_length");  // a key the file lacks takes GenerationConfig's default, not config.json's
  testing::write_file(copy.dir + "/generation_config.json", changed.dump());
  EXPECT_EQ(max_length(copy), 20);
  changed["_from_model_config"] = true;  // generate()'s legacy rule: config.json's own generation parameters win
  testing::write_file(copy.dir + "/generation_config.json", changed.dump());
  EXPECT_EQ(max_length(copy), 512);
  for (const char* key : {"max_length", "bad_words_ids", "num_beams", "forced_eos_token_id"}) copy.config.erase(key);
  EXPECT_EQ(max_length(copy), 20);  // config.json's: MarianConfig's forced_eos_token_id 0 counts as set
  copy.config["forced_eos_token_id"] = nullptr;
  changed["max_length"] = 30;  // PretrainedConfig's defaults all round: generation_config.json's
  testing::write_file(copy.dir + "/generation_config.json", changed.dump());
  EXPECT_EQ(max_length(copy), 30);
  copy.config = config;
  changed = generation;
  changed["max_new_tokens"] = 7;  // takes precedence over max_length
  testing::write_file(copy.dir + "/generation_config.json", changed.dump());
  EXPECT_EQ(max_length(copy), 8);
  std::filesystem::remove(copy.dir + "/generation_config.json");  // GenerationConfig.from_model_config
  EXPECT_EQ(max_length(copy), 512);
  copy.config.erase("max_length");
  EXPECT_EQ(max_length(copy), 20);
  copy.config["max_new_tokens"] = -1;
  EXPECT_THROW_MESSAGE(copy.convert(), "config.json: max_new_tokens -1 is not a number of tokens");
}

// bert-base-uncased's model.safetensors keeps TensorFlow's LayerNorm.gamma and
// LayerNorm.beta; transformers renames them weight and bias as it loads them.
TEST(HfModels, BertLayerNormGammaAndBetaAreWeightAndBias) {
  const std::string bert = shared("bert_tiny_uncased");
  std::map<std::string, std::string> renames;
  for (const auto& [name, t] : io::read_safetensors(bert + "/model.safetensors").tensors) {
    if (name.ends_with("LayerNorm.weight")) renames[name] = name.substr(0, name.size() - 6) + "gamma";
    if (name.ends_with("LayerNorm.bias")) renames[name] = name.substr(0, name.size() - 4) + "beta";
  }
  ASSERT_EQ(renames.size(), 12u);  // the embeddings', 2 per layer, the MLM head's: weight and bias each
  expect_same_parameters(converted_with_renames(bert, renames), bert, "gamma and beta");
  // A renamed tensor replaces one stored under its new name, as transformers' state dict does.
  io::NamedTensors weights = io::read_safetensors(bert + "/model.safetensors").tensors;
  testing::TempDir tmp;
  const std::string dir = tmp.path("both");
  std::filesystem::copy(bert, dir);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all, std::filesystem::perm_options::add);
  std::filesystem::permissions(dir + "/model.safetensors", std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  weights.emplace_back("bert.embeddings.LayerNorm.gamma", Tensor::full({32}, 3.0f));
  io::write_safetensors(dir + "/model.safetensors", weights, {});
  EXPECT_EQ(named(hf::convert(hf::open(dir)), "embed_norm.weight").to_vector(), std::vector<float>(32, 3.0f));
}

TEST(HfModels, MarianPositionTableIsSinesThenCosines) {
  Fixture f(shared("marian_opus_mt_tiny_de_en"));
  const Tensor table = ops::sinusoids(64, 32, ops::SinusoidLayout::split);
  EXPECT_TENSOR_NEAR("encoder.embed_positions", table, f.ref("encoder.embed_positions"), 1e-6);
}

TEST(HfModels, Gpt2LogitsAndHiddenStates) {
  Fixture f(shared("gpt2_tiny"));
  models::GPT model(models::StackConfig::from_json(f.config(), "converted", "gpt"));
  f.load(model);
  for (const std::string p : {"p0", "p1"}) {
    for (const std::string which : {".input_ids", ".greedy_ids"}) {
      nn::TraceRecorder trace;
      const Tensor logits = model.forward(f.tokens(p + which));
      const std::string expected = which == ".input_ids" ? ".logits" : ".greedy_full_logits";
      EXPECT_TENSOR_NEAR(p + expected, logits, f.ref(p + expected), kTol);
      if (which == ".input_ids") EXPECT_TENSOR_NEAR(p + ".last_hidden_state", trace.outputs.at("blocks.norm"), f.ref(p + ".last_hidden_state"), kTol);
    }
  }
}

// scale_attn_by_inverse_layer_idx (layer i's scores divided by i + 1 too) and
// reorder_and_upcast_attn: logits within 1e-4, and greedy search, recomputed over the whole
// sequence at each step, gives transformers' ids.
TEST(HfModels, Gpt2WithScoresScaledByLayer) {
  Fixture f(ours("gpt2_layer_scaled_tiny"));
  const models::StackConfig c = models::StackConfig::from_json(f.config(), "converted", "gpt");
  EXPECT_TRUE(c.scores_by_layer);
  models::GPT model(c);
  f.load(model);
  for (const std::string p : {"p0", "p1"}) {
    EXPECT_TENSOR_NEAR(p + ".logits", model.forward(f.tokens(p + ".input_ids")), f.ref(p + ".logits"), kTol);
    std::vector<int> ids = ops::to(f.ref(p + ".input_ids"), DType::i32).values<int>();
    const std::vector<int> expected = ops::to(f.ref(p + ".greedy_ids"), DType::i32).values<int>();
    while (ids.size() < expected.size()) {
      const Tensor logits = model.forward(models::Tokens(ids, 1, static_cast<int64_t>(ids.size())));
      const std::vector<float> last = ops::contiguous(ops::slice(logits, 1, logits.size(1) - 1, logits.size(1))).to_vector();
      ids.push_back(static_cast<int>(std::max_element(last.begin(), last.end()) - last.begin()));
    }
    EXPECT_EQ(ids, expected) << p;
  }
}

// The Llama family (tests/reference/make_hf_llama_fixtures.py): the logits of every
// position within 1e-4 of transformers', and greedy search through the KV cache
// (grouped-query heads, rotary positions counted from the cache) gives its ids, each
// prompt alone (decode::generate) and both in one ragged batch (decode::GenerationBatch).
void expect_llama_family(const std::string& name, int64_t kv_heads, bool tied) {
  Fixture f(ours(name));
  const models::StackConfig c = models::StackConfig::from_json(f.config(), "converted", "gpt");
  EXPECT_TRUE(c.rotary && c.rms_norm && c.gated);
  EXPECT_EQ(c.kv_heads, kv_heads);
  EXPECT_EQ(c.tied_head, tied);
  models::GPT model(c);
  f.load(model);
  autograd::NoGradGuard no_grad;
  decode::SamplingOptions greedy;
  greedy.temperature = 0.0f, greedy.max_new_tokens = 10, greedy.ends = {2};  // config.json's eos_token_id
  decode::GenerationBatch batch(model);
  std::vector<std::vector<int>> expected(2), batched(2);
  double worst = 0.0;
  for (int i = 0; i < 2; ++i) {
    const std::string p = "p" + std::to_string(i);
    const Tensor logits = model.forward(f.tokens(p + ".input_ids"));
    EXPECT_TENSOR_NEAR(p + ".logits", logits, f.ref(p + ".logits"), kTol);
    worst = std::max(worst, testing::compare(logits, f.ref(p + ".logits")).max_abs);
    std::vector<int> ids = ops::to(f.ref(p + ".input_ids"), DType::i32).values<int>();
    const std::vector<int> prompt = ids;
    expected[i] = ops::to(f.ref(p + ".greedy_ids"), DType::i32).values<int>();
    for (int id : decode::generate(model, prompt, greedy)) ids.push_back(id);
    EXPECT_EQ(ids, expected[i]) << p;
    batched[i] = prompt;
    batch.join(prompt, greedy, [&batched, i](int id) { return batched[i].push_back(id), true; },
               [](std::exception_ptr e) { EXPECT_FALSE(e) << "a sequence of the batch failed"; });
  }
  while (batch.size() > 0) batch.step();
  EXPECT_EQ(batched, expected);
  std::cout << name << ": largest logit difference " << worst << "\n";
}

TEST(HfModels, LlamaLogitsAndGreedySearch) { expect_llama_family("llama_tiny", 2, false); }
// bf16 weights in three shards, multi-query attention, attention_bias, a tied head.
TEST(HfModels, LlamaBf16ShardedMultiQuery) { expect_llama_family("llama_bf16_sharded_tiny", 1, true); }
TEST(HfModels, MistralLogitsAndGreedySearch) { expect_llama_family("mistral_tiny", 2, false); }
TEST(HfModels, Qwen2LogitsAndGreedySearch) { expect_llama_family("qwen2_tiny", 2, true); }

// Settings of these families that tfm does not compute as transformers are refused by
// name; Mistral's sliding window becomes the context, which never reaches past it.
TEST(HfModels, LlamaFamilySettingsTfmLacksAreRefusedByName) {
  testing::TempDir tmp;
  const std::string dir = tmp.path("llama");
  std::filesystem::copy(ours("llama_tiny"), dir);
  nlohmann::json config = nlohmann::json::parse(testing::read_file(dir + "/config.json"));
  auto with = [&](const nlohmann::json& changes) {
    nlohmann::json changed = config;
    changed.update(changes);
    testing::write_file(dir + "/config.json", changed.dump());
    return testing::error_of([&] { hf::convert(hf::open(dir)); });
  };
  EXPECT_NE(with({{"rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}}}}).find("rope_scaling type 'dynamic' is not supported"), std::string::npos);
  EXPECT_NE(with({{"head_dim", 16}}).find("head_dim 16 is not hidden_size / num_attention_heads"), std::string::npos);
  EXPECT_NE(with({{"num_key_value_heads", 3}}).find("cannot share 3 num_key_value_heads"), std::string::npos);
  EXPECT_EQ(with({{"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                                   {"original_max_position_embeddings", 64}}}}),
            "");
  const models::StackConfig mistral = models::StackConfig::from_json(Fixture(ours("mistral_tiny")).config(), "converted", "gpt");
  EXPECT_EQ(mistral.max_len, 48);  // sliding_window, below max_position_embeddings 128
}

TEST(HfModels, BertHiddenStatesPoolerMlmAndNsp) {
  Fixture f(shared("bert_tiny_uncased"));
  models::BERT model(models::StackConfig::from_json(f.config(), "converted", "bert"), 0);
  f.load(model);
  for (int i = 0; i < 3; ++i) {
    const std::string s = "s" + std::to_string(i);
    const models::Tokens ids = f.tokens(s + ".input_ids");
    const Tensor hidden = model.encode(ids);  // [1, T, 32]
    EXPECT_TENSOR_NEAR(s + ".last_hidden_state", hidden, f.ref(s + ".last_hidden_state"), kTol);
    const Tensor pooled = model.pooled(hidden);
    EXPECT_TENSOR_NEAR(s + ".pooler_output", pooled, f.ref(s + ".pooler_output"), kTol);
    EXPECT_TENSOR_NEAR(s + ".nsp_logits", model.nsp_logits(pooled), f.ref(s + ".nsp_logits"), kTol);
    const Tensor mlm = model.mlm_logits(ops::reshape(hidden, {ids.cols(), -1}));
    EXPECT_TENSOR_NEAR(s + ".mlm_logits", ops::reshape(mlm, {1, ids.cols(), -1}), f.ref(s + ".mlm_logits"), kTol);
  }
}

TEST(HfModels, BertPaddedBatchMatchesWhereTheMaskIsOne) {
  Fixture f(shared("bert_tiny_uncased"));
  models::BERT model(models::StackConfig::from_json(f.config(), "converted", "bert"), 0);
  f.load(model);
  const Tensor hidden = model.encode(f.tokens("batch.input_ids"));  // [3, 33, 32]
  const std::vector<int64_t> mask = f.ref("batch.attention_mask").values<int64_t>();
  const Tensor& expected = f.ref("batch.last_hidden_state");
  const int64_t rows = hidden.size(0), cols = hidden.size(1), width = hidden.size(2);
  int compared = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      if (!mask[r * cols + c]) continue;
      const Tensor a = ops::contiguous(ops::slice(ops::slice(hidden, 0, r, r + 1), 1, c, c + 1));
      const Tensor b = ops::contiguous(ops::slice(ops::slice(expected, 0, r, r + 1), 1, c, c + 1));
      EXPECT_LE(testing::compare(a, b).max_abs, kTol * width) << "row " << r << " position " << c;
      ++compared;
    }
  EXPECT_GT(compared, 40);
}

TEST(HfModels, VitEmbeddingsAndLogitsFromPixelValues) {
  Fixture f(shared("vit_tiny"));
  models::ViT model(models::StackConfig::from_json(f.config(), "converted", "vit"));
  f.load(model);
  nn::TraceRecorder trace;
  const Tensor logits = model.forward(f.ref("pixel_values"));  // [2, 10]
  EXPECT_TENSOR_NEAR("logits", logits, f.ref("logits"), kTol);
}

TEST(HfModels, DirectoriesOfOtherKindsAreOneLine) {
  const std::string dir = ::testing::TempDir() + "/hf_models_kinds";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  EXPECT_THROW_MESSAGE(hf::open(dir), "without config.json");
  { std::ofstream(dir + "/config.json") << R"({"model_type": "t5"})"; }
  EXPECT_THROW_MESSAGE(hf::open(dir),
                       "is a Hugging Face 't5' model; tfm reads marian (opus-mt), m2m_100 (M2M100 and NLLB), mbart (mBART-50), gpt2, llama, "
                       "mistral, qwen2, bert, vit and deit");
  { std::ofstream(dir + "/config.json") << R"({"model_type": "bert"})"; }
  EXPECT_THROW_MESSAGE(hf::open(dir), "holds no model.safetensors or pytorch_model.bin (nor their shards' index)");
  { std::ofstream(dir + "/tf_model.h5") << "hdf5"; }
  EXPECT_THROW_MESSAGE(hf::open(dir), "holds TensorFlow or Flax weights only; tfm reads model.safetensors or pytorch_model.bin");
  { std::ofstream(dir + "/pytorch_model.bin") << "pickle"; }  // read, and refused as what it is
  EXPECT_THROW_MESSAGE(hf::convert(hf::open(dir)), "/pytorch_model.bin: not a zip archive");
}

}  // namespace
}  // namespace tfm

namespace tfm {
namespace {

// Hugging Face's generated ids (the start symbol first, the end symbol and padding after)
// as a hypothesis's tokens.
std::vector<int> generated(const Tensor& ids, int64_t row, int eos) {
  const std::vector<int64_t> all = ids.values<int64_t>();
  const int64_t cols = ids.size(1);
  std::vector<int> out;
  for (int64_t c = 1; c < cols && all[row * cols + c] != eos; ++c) out.push_back(static_cast<int>(all[row * cols + c]));
  return out;
}

// Greedy and beam-4 search of each sentence (and of the padded batch, where the fixture
// has one) give transformers' ids and beam scores, within its own length limit; `forced`:
// the first token transformers was told to force (forced_bos_token_id), or -1.
void expect_marian_generations(const Fixture& f, int sentences, bool batch, int forced = -1) {
  models::EncoderDecoder model(models::TransformerConfig::from_json(f.config(), "converted"));
  f.load(model);
  const models::TransformerConfig& c = model.config();
  decode::SearchOptions o;  // max_len_a and max_len_b unset: the model's own limit, as transformers applies it
  o.bos = c.bos_id, o.eos = c.eos_id, o.forced_first = forced;
  for (int64_t beam : {1, 4}) {
    o.beam = beam;
    const std::string which = beam == 1 ? ".greedy_ids" : ".beam4_ids";
    for (int i = 0; i < sentences; ++i) {
      const std::string s = "s" + std::to_string(i);
      const decode::Hypothesis h = decode::beam_search(model, f.tokens(s + ".input_ids"), o)[0][0];
      EXPECT_EQ(h.tokens, generated(f.ref(s + which), 0, c.eos_id)) << s << which;
      if (beam == 4) EXPECT_NEAR(h.score, f.ref(s + ".beam4_sequences_scores").values<float>()[0], 1e-4) << s;
    }
    if (!batch) continue;
    const auto rows = decode::beam_search(model, f.tokens("batch.input_ids"), o);  // right-padded with the pad id
    for (int64_t r = 0; r < 5; ++r) EXPECT_EQ(rows[r][0].tokens, generated(f.ref("batch" + which), r, c.eos_id)) << "batch row " << r << which;
  }
}

TEST(HfModels, MarianGreedyAndBeamSearchAsTransformersGenerates) {
  expect_marian_generations(Fixture(shared("marian_opus_mt_tiny_de_en")), 5, true);
}

// Sentence 2 (11 source ids) runs to max_length 40, beyond tfm's own 1.5 n + 10.
TEST(HfModels, MarianMultiTargetGreedyAndBeamSearch) { expect_marian_generations(Fixture(ours("marian_multi_target_tiny")), 7, false); }

// generation_config.json's max_new_tokens (30) takes precedence over its max_length (512).
TEST(HfModels, MarianSeparateVocabsGreedyAndBeamSearch) { expect_marian_generations(Fixture(ours("marian_separate_vocabs_tiny")), 4, false); }

// M2M100 and NLLB (tests/reference/make_hf_m2m100_fixtures.py): pre-norm with final
// LayerNorms, fairseq's sinusoids from position pad + 1, the decoder starting from </s>,
// the target language forced first. mBART-50 (make_hf_mbart_fixtures.py): the same with
// learned positions from row 2, a LayerNorm over embeddings + positions, GELU,
// final_logits_bias, and embeddings scaled or not (scale_embedding).
TEST(HfModels, ManyToManyModelsOutputsLogitsAndGenerations) {
  for (const char* name : {"m2m100_tiny", "nllb_tiny", "mbart50_tiny", "mbart50_unscaled_tiny"}) {
    SCOPED_TRACE(name);
    const Fixture f(ours(name));
    expect_marian_outputs(f, 3);
    std::ifstream summary(f.dir.file("reference.json"));
    expect_marian_generations(f, 3, false, nlohmann::json::parse(summary).at("forced_bos_token_id").get<int>());
  }
}

// Their tables against transformers' M2M100SinusoidalPositionalEmbedding (d_model 16,
// positions from pad + 1 = 2), rows 0, 1 and 40, columns 0, 5, 8 and 15.
TEST(HfModels, M2M100PositionTableIsFairseqs) {
  const Tensor table = ops::sinusoids(64, 16, ops::SinusoidLayout::fairseq, 2);
  const std::vector<float> got = table.to_vector();
  const std::vector<std::pair<int, std::vector<float>>> want = {
      {0, {0.909297407f, 0.00277898763f, -0.416146845f, 1.0f}},
      {1, {0.141120002f, 0.00416847458f, -0.989992499f, 0.99999994f}},
      {40, {-0.916521549f, 0.058325693f, -0.399985313f, 0.999991179f}}};  // (get_embedding(66, 16, 1)[row + 2], transformers 4.39)
  for (const auto& [row, values] : want)
    for (size_t k = 0; k < values.size(); ++k) {
      const int column = std::vector<int>{0, 5, 8, 15}[k];
      EXPECT_NEAR(got[static_cast<size_t>(row * 16 + column)], values[k], 2e-6) << "row " << row << ", column " << column;
    }
}

// max_len_a or max_len_b given: tfm's rule a * n + b caps a Hugging Face model's output too.
TEST(HfModels, GivenMaximumLengthsStillApply) {
  const Fixture f(ours("marian_multi_target_tiny"));
  models::EncoderDecoder model(models::TransformerConfig::from_json(f.config(), "converted"));
  f.load(model);
  decode::SearchOptions o;
  o.bos = model.config().bos_id, o.eos = model.config().eos_id, o.beam = 1;
  // The last of the limit's tokens is the end symbol, forced (forced_eos_token_id).
  o.max_len_b = 5;  // a: 1.5, as where neither is given to a tfm model
  EXPECT_EQ(decode::beam_search(model, f.tokens("s2.input_ids"), o)[0][0].tokens.size(), 20u);  // 1.5 * 11 + 5 = 21
  o.max_len_a = 0.0f;
  EXPECT_EQ(decode::beam_search(model, f.tokens("s2.input_ids"), o)[0][0].tokens.size(), 4u);
  o.max_len_a.reset(), o.max_len_b.reset();  // transformers' max_length (40) alone
  EXPECT_EQ(decode::beam_search(model, f.tokens("s2.input_ids"), o)[0][0].tokens.size(), 38u);
}

}  // namespace
}  // namespace tfm

namespace tfm {
namespace {

// A safetensors file of one tensor of `dtype` holding `bits` (16-bit patterns).
std::string half_file(const std::string& dtype, const std::vector<uint16_t>& bits) {
  const std::string header = R"({"w":{"dtype":")" + dtype + R"(","shape":[)" + std::to_string(bits.size()) + R"(],"data_offsets":[0,)" +
                             std::to_string(2 * bits.size()) + "]}}";
  const uint64_t n = header.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + header + std::string(reinterpret_cast<const char*>(bits.data()), 2 * bits.size());
}

TEST(HfModels, F16AndBf16WeightsWidenExactly) {
  // f16: 1, -2.5, 65504 (the largest), 2^-24 (the smallest subnormal), -0
  const Tensor f16 = io::to_f32(io::parse_safetensors(half_file("F16", {0x3c00, 0xc100, 0x7bff, 0x0001, 0x8000}), "f16").tensors[0].second);
  EXPECT_EQ(f16.to_vector(), (std::vector<float>{1.0f, -2.5f, 65504.0f, std::ldexp(1.0f, -24), -0.0f}));
  // bf16: f32's upper 16 bits: 1, -2.5, 3.140625
  const Tensor bf16 = io::to_f32(io::parse_safetensors(half_file("BF16", {0x3f80, 0xc020, 0x4049}), "bf16").tensors[0].second);
  EXPECT_EQ(bf16.to_vector(), (std::vector<float>{1.0f, -2.5f, 3.140625f}));
  EXPECT_THROW_MESSAGE(io::parse_safetensors(half_file("F16", {0x7c00}), "inf"), "contains a non-finite value");
}

// A sharded checkpoint (model.safetensors.index.json) reads as the single file does.
TEST(HfModels, ShardedWeightsReadAsOneFile) {
  const std::string src = testing::hf_fixture_path("gpt2_tiny");
  testing::TempDir tmp;
  const std::string dir = tmp.path("gpt2_sharded");
  std::filesystem::create_directories(dir);
  for (const char* f : {"config.json", "vocab.json", "merges.txt", "tokenizer_config.json"})
    std::filesystem::copy_file(src + "/" + f, dir + "/" + f);
  const io::NamedTensors all = io::read_safetensors(src + "/model.safetensors").tensors;
  const size_t half = all.size() / 2;
  io::write_safetensors(dir + "/model-00001-of-00002.safetensors", io::NamedTensors(all.begin(), all.begin() + half), {});
  io::write_safetensors(dir + "/model-00002-of-00002.safetensors", io::NamedTensors(all.begin() + half, all.end()), {});
  nlohmann::json map;
  for (size_t i = 0; i < all.size(); ++i) map[all[i].first] = i < half ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  testing::write_file(dir + "/model.safetensors.index.json", nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump());
  const io::SafeTensors sharded = hf::convert(hf::open(dir)), whole = hf::convert(hf::open(src));
  ASSERT_EQ(sharded.tensors.size(), whole.tensors.size());
  for (size_t i = 0; i < whole.tensors.size(); ++i) {
    EXPECT_EQ(sharded.tensors[i].first, whole.tensors[i].first);
    EXPECT_EQ(sharded.tensors[i].second.to_vector(), whole.tensors[i].second.to_vector()) << whole.tensors[i].first;
  }
}

TEST(HfModels, MissingAndMisshapenTensorsAreOneLine) {
  const std::string src = testing::hf_fixture_path("gpt2_tiny");
  testing::TempDir tmp;
  const std::string dir = tmp.path("gpt2_broken");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(src + "/config.json", dir + "/config.json");
  io::NamedTensors all = io::read_safetensors(src + "/model.safetensors").tensors;
  all.erase(all.begin());  // one tensor fewer
  io::write_safetensors(dir + "/model.safetensors", all, {});
  EXPECT_THROW_MESSAGE(hf::convert(hf::open(dir)), ": missing tensor '");
  all = io::read_safetensors(src + "/model.safetensors").tensors;
  for (auto& [name, t] : all)
    if (name == "transformer.wpe.weight") t = Tensor::zeros({3, 32});
  io::write_safetensors(dir + "/model.safetensors", all, {});
  EXPECT_THROW_MESSAGE(hf::convert(hf::open(dir)), "tensor 'transformer.wpe.weight' has shape [3, 32], which does not fit config.json");
}

// A grouped-query model's key or value projection of the query's shape is named with the
// shape it must have: [num_key_value_heads * head_dim, hidden_size].
TEST(HfModels, GroupedQueryProjectionsOfTheWrongShapeNameTheirShape) {
  const std::string src = testing::fixture_path("hf/llama_tiny");  // 4 heads of 8, 2 K/V heads
  testing::TempDir tmp;
  const std::string dir = tmp.path("llama_broken");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(src + "/config.json", dir + "/config.json");
  io::NamedTensors all = io::read_safetensors(src + "/model.safetensors").tensors;
  for (auto& [name, t] : all)
    if (name == "model.layers.1.self_attn.v_proj.weight") t = Tensor::zeros({32, 32});
  io::write_safetensors(dir + "/model.safetensors", all, {});
  EXPECT_EQ(testing::error_of([&] { hf::convert(hf::open(dir)); }),
            dir + ": tensor 'model.layers.1.self_attn.v_proj.weight' has shape [32, 32], which does not fit config.json ([16, 32] expected)");
}

}  // namespace
}  // namespace tfm

namespace tfm {
namespace {

// The library's classifier on the fixture's image files (image1 resized by Pillow's
// filter): the softmax of transformers' logits.
TEST(HfModels, ClassifierOfImageFilesGivesTransformersProbabilities) {
  const std::string dir = testing::hf_fixture_path("vit_tiny");
  const tfm::Classifier classifier(dir);
  EXPECT_EQ(classifier.class_names().front(), "airplane");
  const std::vector<float> logits = io::read_safetensors(dir + "/reference.safetensors").find("logits")->to_vector();  // [2, 10]
  for (int i = 0; i < 2; ++i) {
    const tfm::Classification c = classifier.classify(classifier.pixels_of(tfm::read_image(dir + "/image" + std::to_string(i) + ".png")), 1);
    double sum = 0;
    for (int k = 0; k < 10; ++k) sum += std::exp(static_cast<double>(logits[i * 10 + k]));
    for (int k = 0; k < 10; ++k) EXPECT_NEAR(c.probabilities[k], std::exp(static_cast<double>(logits[i * 10 + k])) / sum, 1e-5) << i << " " << k;
  }
}

}  // namespace
}  // namespace tfm
