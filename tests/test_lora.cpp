// LoRA adapters (nn/lora.h, models/lora.h): the layer's backward against finite
// differences and its forward against PyTorch's; a frozen base under trained adapters;
// merging; PEFT's files; and the command line's fine-tuning, resume, generation and export.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "autograd/autograd.h"
#include "hf/directory.h"
#include "hf/model.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "models/gpt.h"
#include "models/lora.h"
#include "nn/lora.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/shape.h"
#include "support/compare.h"
#include "support/fixture.h"
#include "support/gradcheck.h"
#include "support/process.h"

namespace tfm {
namespace {

using testing::random_tensor;
using testing::run_tfm;
using V = std::vector<Tensor>;

// A fused product of 7 output rows in blocks of 3, 2 and 2 (in_proj's q, k, v), adapters
// of rank 2 on the first and the last: x, W, A0, B0, A2, B2 -> W x + s B0 A0 x | 0 | s B2 A2 x.
struct FusedLora {
  std::shared_ptr<nn::Lora> first = std::make_shared<nn::Lora>(4, 3, 2, 3.0f), last = std::make_shared<nn::Lora>(4, 2, 2, 3.0f);
  nn::LoraBlocks blocks{{3, 2, 2}, {first, nullptr, last}};
  Tensor operator()(const V& x) {
    first->A = x[2], first->B = x[3], last->A = x[4], last->B = x[5];
    return blocks.add_to(ops::linear(x[0], x[1], Tensor(), ops::LinearProducts::f32()), x[0], 0, 7);
  }
};

V fused_inputs() {
  return {random_tensor({2, 3, 4}, 1), random_tensor({7, 4}, 2), random_tensor({2, 4}, 3),
          random_tensor({3, 2}, 4), random_tensor({2, 4}, 5), random_tensor({2, 2}, 6)};
}

TEST(Lora, BackwardMatchesFiniteDifferences) {
  FusedLora f;
  EXPECT_GRADCHECK([&f](const V& x) { return f(x); }, fused_inputs(), 2e-3);
  // Rows [3, 7) alone (the key and value projection of a decoding step's memory).
  EXPECT_GRADCHECK([&f](const V& x) {
    f(x);
    return f.blocks.add_to(ops::linear(x[0], ops::slice(x[1], 0, 3, 7), Tensor(), ops::LinearProducts::f32()), x[0], 3, 7);
  }, fused_inputs(), 2e-3);
}

// PyTorch's forward of the same inputs (tests/reference/make_lora_fixtures.py):
// F.linear(x, W) + scaling * F.linear(F.linear(x, A), B) on each block, as PEFT's Linear.
TEST(Lora, ForwardAsPyTorch) {
  const io::SafeTensors ref = io::read_safetensors(testing::fixture_path("lora_forward.safetensors"));
  std::map<std::string, Tensor> t(ref.tensors.begin(), ref.tensors.end());
  FusedLora f;
  autograd::NoGradGuard no_grad;
  const Tensor y = f({t.at("x"), t.at("W"), t.at("A0"), t.at("B0"), t.at("A2"), t.at("B2")});
  EXPECT_TENSOR_NEAR("lora forward", y, t.at("y"), 1e-6);
  EXPECT_TENSOR_NEAR("lora merged weight", ops::concat({f.first->delta(), Tensor::zeros({2, 4}), f.last->delta()}, 0),
                     t.at("delta"), 1e-6);
}

// PEFT's initialisation: A within nn.Linear's bound 1 / sqrt(in) and reaching near it, B zeros.
TEST(Lora, InitialisedAsPeft) {
  nn::Lora lora(64, 16, 8, 8.0f);
  Rng rng(1);
  lora.init_parameters(rng);
  float largest = 0;
  for (float a : lora.A.to_vector()) largest = std::max(largest, std::fabs(a));
  EXPECT_LE(largest, 0.125f);
  EXPECT_GT(largest, 0.12f);
  for (float b : lora.B.to_vector()) EXPECT_EQ(b, 0.0f);
  EXPECT_EQ(lora.scaling, 1.0f);
}

// A directory's model, as read wherever a checkpoint is accepted.
std::unique_ptr<models::GPT> read_gpt(const std::string& dir) {
  const io::SafeTensors file = hf::convert(hf::open(dir));
  auto model = std::make_unique<models::GPT>(models::StackConfig::from_json(file.metadata.at("tfm.config"), dir, "gpt"));
  io::load_parameters(model->named_parameters(), file, dir);
  return model;
}

std::unique_ptr<models::GPT> llama_tiny() { return read_gpt(testing::fixture_path("hf/llama_tiny")); }

models::LoraSettings every_target(int64_t rank) {
  models::LoraSettings s;
  s.rank = rank, s.alpha = 16, s.targets = {"q", "k", "v", "o", "gate", "up", "down"};
  return s;
}

// Random A and B (a fresh adapter's B is 0, which would change nothing).
void randomise(models::LoraAdapter& adapter) {
  uint64_t seed = 10;
  for (auto& [name, p] : adapter.named_parameters()) {
    Tensor q = p;
    q.copy_from(random_tensor(p.shape(), seed++, -0.3f, 0.3f));
  }
}

Tensor logits_of(models::GPT& model) {
  autograd::NoGradGuard no_grad;
  return model.forward(models::Tokens({1, 17, 200, 45, 3, 99, 128, 7}, 2, 4));
}

// Training moves the adapters alone: the base's weights keep their bits and get no
// gradient, and the loss falls.
TEST(Lora, TrainingLeavesTheBaseBitForBit) {
  const auto owned = llama_tiny();
  models::GPT& model = *owned;
  std::vector<std::vector<float>> before;
  for (auto& [name, p] : model.named_parameters()) before.push_back(p.to_vector());
  model.freeze();
  models::LoraAdapter adapter(model, every_target(4));
  Rng rng(3);
  adapter.init_parameters(rng);
  EXPECT_TENSOR_NEAR("a fresh adapter changes nothing", logits_of(model), logits_of(*llama_tiny()), 0);
  const models::Tokens input({1, 17, 200, 45, 3, 99, 128}, 1, 7);
  const Tensor targets = Tensor::from_values(std::vector<int>{17, 200, 45, 3, 99, 128, 7});
  std::vector<float> losses;
  for (int step = 0; step < 20; ++step) {
    Tensor loss = ops::cross_entropy(ops::reshape(model.forward(input), {7, -1}), targets, 0.0f, -1);
    losses.push_back(loss.item());
    autograd::backward(loss);
    autograd::NoGradGuard no_grad;
    for (auto& [name, p] : adapter.named_parameters()) {  // plain SGD
      std::vector<float> v = p.to_vector(), g = p.grad().to_vector();
      for (size_t i = 0; i < v.size(); ++i) v[i] -= 0.05f * g[i];
      Tensor q = p;
      q.copy_from(Tensor::from_vector(p.shape(), v));
      q.zero_grad();
    }
  }
  EXPECT_LT(losses.back(), losses.front() - 0.5f) << losses.front() << " -> " << losses.back();
  size_t i = 0;
  for (auto& [name, p] : model.named_parameters()) {
    EXPECT_FALSE(p.grad().defined()) << name;
    EXPECT_EQ(p.to_vector(), before[i++]) << name;
  }
}

// The merged weights give the logits of the base with its adapters.
TEST(Lora, MergedWeightsGiveTheAdaptedLogits) {
  const auto owned = llama_tiny();
  models::GPT& model = *owned;
  models::LoraAdapter adapter(model, every_target(3));
  randomise(adapter);
  const Tensor adapted = logits_of(model);
  EXPECT_GT(testing::compare(adapted, logits_of(*llama_tiny())).max_abs, 1e-2);
  adapter.merge();
  EXPECT_TENSOR_NEAR("merged", logits_of(model), adapted, 1e-5);
}

// A LoRA run's checkpoint records its base's weights: a resume on a base that has changed
// since (its own run went on) is refused, not trained on silently.
TEST(Lora, AResumeRefusesABaseThatHasChanged) {
  testing::TempDir tmp;
  std::string text;
  for (int i = 0; i < 60; ++i) text += "the cat sat on the mat. the dog sat on the log.\n";
  testing::write_file(tmp.path("text.txt"), text);
  const std::string quiet = " --text " + tmp.path("text.txt") + " --validate-every 0 --sample-tokens 0 2>&1";
  ASSERT_EQ(run_tfm("lm train --layers 1 --d-model 16 --heads 2 --context 16 --steps 3 --out " + tmp.path("base") + quiet).code, 0);
  ASSERT_EQ(run_tfm("lm train --init-from " + tmp.path("base/last.safetensors") + " --lora-rank 2 --steps 2 --out " + tmp.path("lora") + quiet).code, 0);
  const std::string resume_lora = "lm train --steps 3 --resume " + tmp.path("lora/last.safetensors") + quiet;
  EXPECT_EQ(run_tfm(resume_lora).code, 0);
  ASSERT_EQ(run_tfm("lm train --steps 5 --resume " + tmp.path("base/last.safetensors") + quiet).code, 0);  // the base goes on
  const testing::CliResult changed = run_tfm("lm train --steps 4 --resume " + tmp.path("lora/last.safetensors") + quiet);
  EXPECT_EQ(changed.code, 1) << changed.output;
  EXPECT_NE(changed.output.find("/base/last.safetensors: has changed since " + tmp.path("lora/last.safetensors") + "'s adapters were trained on it"),
            std::string::npos)
      << changed.output;
}

// PEFT's names and adapter_config.json, written and read back; another model's adapter,
// rank 0 and unknown targets refused in one line.
TEST(Lora, AdapterFilesAndRefusals) {
  testing::TempDir tmp;
  const auto owned = llama_tiny();
  models::GPT& model = *owned;
  models::LoraSettings s = every_target(2);
  s.base = "llama_tiny";
  models::LoraAdapter adapter(model, s);
  randomise(adapter);
  models::save_lora_adapter(adapter, tmp.path("adapter"));
  const auto names = io::read_safetensors(tmp.path("adapter/adapter_model.safetensors")).tensors;
  EXPECT_EQ(names.size(), 2u * 7u * 2u);
  EXPECT_TRUE(std::any_of(names.begin(), names.end(), [](const auto& e) {
    return e.first == "base_model.model.model.layers.1.self_attn.k_proj.lora_A.weight" && e.second.shape() == Shape{2, 32};
  }));
  EXPECT_TRUE(std::any_of(names.begin(), names.end(), [](const auto& e) {
    return e.first == "base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight" && e.second.shape() == Shape{16, 2};  // kv_heads 2 x 8
  }));
  const nlohmann::json config = nlohmann::json::parse(testing::read_file(tmp.path("adapter/adapter_config.json")));
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["r"], 2);
  EXPECT_EQ(config["lora_alpha"], 16.0);
  EXPECT_EQ(config["target_modules"], nlohmann::json({"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}));
  const auto written = models::read_lora_adapter(tmp.path("adapter"));
  const models::LoraSettings& read = written.first;
  const io::NamedTensors& tensors = written.second;  // (not a structured binding: clang 14's lambdas cannot capture one)
  EXPECT_EQ(read.targets, s.targets);
  const auto again_owned = llama_tiny();
  models::GPT& again = *again_owned;
  models::LoraAdapter loaded(again, read);
  loaded.load(tensors, "adapter");
  EXPECT_TENSOR_NEAR("read back", logits_of(again), logits_of(model), 0);

  models::StackConfig wider = model.config();
  wider.d_model = 64, wider.d_ff = 128;
  models::GPT other(wider);
  models::LoraAdapter mismatched(other, read);
  EXPECT_NE(testing::error_of([&] { mismatched.load(tensors, "adapter"); }).find("(an adapter for another model)"), std::string::npos);
  models::LoraSettings fewer = read;
  fewer.targets = {"q", "v"};
  models::LoraAdapter partial(again, fewer);
  EXPECT_NE(testing::error_of([&] { partial.load(tensors, "adapter"); }).find("is not one of this model's adapters"), std::string::npos);
  models::LoraSettings bad = read;
  bad.rank = 0;
  EXPECT_EQ(testing::error_of([&] { bad.validate("--lora-rank"); }), "--lora-rank: LoRA rank 0 must be from 1 to 65536");
  bad = read, bad.targets = models::parse_lora_targets("q,attn");
  EXPECT_EQ(testing::error_of([&] { bad.validate("--lora-targets"); }),
            "--lora-targets: unknown LoRA target 'attn' (the targets are q, k, v, o, gate, up or down)");
  EXPECT_EQ(models::parse_lora_targets("q_proj,v"), (std::vector<std::string>{"q", "v"}));
}

// The whole path on the command line: a Llama-architecture model trained by tfm and
// exported, LoRA fine-tuning from that directory (the loss falls, checkpoints hold the
// adapters alone, PEFT's directories beside them), resume, generation with the adapter,
// and export with it merged, which reads back as the base with its adapters.
TEST(Lora, FineTuneResumeGenerateAndExportOnTheCommandLine) {
  testing::TempDir tmp;
  std::string text;
  for (int i = 0; i < 60; ++i) text += "the cat sat on the mat. the dog sat on the log.\n";
  testing::write_file(tmp.path("text.txt"), text);
  testing::write_file(tmp.path("llama.json"), R"({"rms_norm": true, "rotary": true, "gated": true, "kv_heads": 1, "tied_head": false,
    "qkv_bias": false, "out_bias": false, "ff_bias": false, "learned_positions": false, "activation": "silu", "norm_eps": 1e-6})");
  const std::string quiet = " --validate-every 0 --sample-tokens 0 --log-every 1 2>&1";
  const testing::CliResult base = run_tfm("lm train --config " + tmp.path("llama.json") + " --text " + tmp.path("text.txt") +
                                          " --layers 2 --d-model 16 --heads 2 --context 16 --steps 5 --out " + tmp.path("base") + quiet);
  ASSERT_EQ(base.code, 0) << base.output;
  const testing::CliResult exported = run_tfm("export --model " + tmp.path("base/last.safetensors") + " --hf " + tmp.path("base_hf") + " 2>&1");
  ASSERT_EQ(exported.code, 0) << exported.output;
  const std::string lora = "lm train --text " + tmp.path("text.txt") + " --init-from " + tmp.path("base_hf") +
                           " --lora-rank 4 --lora-targets q,k,v,o,gate,up,down --lr 1e-2 --out " + tmp.path("lora");
  const testing::CliResult tuned = run_tfm(lora + " --steps 30" + quiet);
  ASSERT_EQ(tuned.code, 0) << tuned.output;
  EXPECT_NE(tuned.output.find("with LoRA adapters (rank 4"), std::string::npos) << tuned.output;
  std::vector<double> losses;
  std::istringstream metrics(testing::read_file(tmp.path("lora/metrics.jsonl")));
  for (std::string line; std::getline(metrics, line);)
    if (const auto j = nlohmann::json::parse(line); j.contains("train_loss")) losses.push_back(j["train_loss"]);
  ASSERT_GE(losses.size(), 2u);
  EXPECT_LT(losses.back(), losses.front()) << tuned.output;
  for (const auto& [name, t] : io::read_safetensors(tmp.path("lora/last.safetensors")).tensors)
    EXPECT_NE(name.find(".lora_"), std::string::npos) << name << ": a LoRA checkpoint holds the adapters (and their moments) alone";
  EXPECT_TRUE(std::filesystem::exists(tmp.path("lora/last_adapter/adapter_config.json")));
  const testing::CliResult info = run_tfm("info --model " + tmp.path("lora/last.safetensors"));
  EXPECT_NE(info.output.find("LoRA: adapters of rank 4 (alpha 8) on q, k, v, o, gate, up, down of the base " + tmp.path("base_hf")), std::string::npos)
      << info.output;

  // --force into the base's own run directory would delete the base the adapters name:
  // refused, the base untouched.
  const std::string base_bytes = testing::read_file(tmp.path("base/last.safetensors"));
  const testing::CliResult into_base = run_tfm("lm train --text " + tmp.path("text.txt") + " --init-from " + tmp.path("base/last.safetensors") +
                                               " --lora-rank 4 --steps 2 --force --out " + tmp.path("base") + quiet);
  EXPECT_EQ(into_base.code, 1) << into_base.output;
  EXPECT_NE(into_base.output.find("is one of the files of the run in " + tmp.path("base") + ", which this run would replace"), std::string::npos)
      << into_base.output;
  EXPECT_EQ(testing::read_file(tmp.path("base/last.safetensors")), base_bytes);

  const testing::CliResult resumed = run_tfm(lora + " --steps 35 --resume " + tmp.path("lora/last.safetensors") + quiet);
  EXPECT_NE(resumed.code, 0);  // --init-from and --resume are exclusive: the checkpoint records the base
  const std::string resume = "lm train --text " + tmp.path("text.txt") + " --lora-rank 4 --out " + tmp.path("lora") +
                             " --steps 35 --resume " + tmp.path("lora/last.safetensors") + quiet;
  const testing::CliResult again = run_tfm(resume);
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("resumed"), std::string::npos) << again.output;

  const std::string adapter = tmp.path("lora/last_adapter"), generate = " --prompt the --temperature 0 --max-new-tokens 20 2>&1";
  EXPECT_NE(run_tfm("generate --model " + tmp.path("lora/last.safetensors") + generate).output.find("holds a LoRA run's adapters, not a model"),
            std::string::npos);
  const testing::CliResult plain = run_tfm("generate --model " + tmp.path("base_hf") + generate);
  const testing::CliResult adapted = run_tfm("generate --model " + tmp.path("base_hf") + " --lora " + adapter + generate);
  ASSERT_EQ(adapted.code, 0) << adapted.output;
  EXPECT_NE(adapted.output, plain.output);
  const testing::CliResult merged = run_tfm("export --model " + tmp.path("base_hf") + " --lora " + adapter + " --hf " + tmp.path("merged") + " 2>&1");
  ASSERT_EQ(merged.code, 0) << merged.output;
  EXPECT_EQ(run_tfm("generate --model " + tmp.path("merged") + generate).output, adapted.output);

  // The merged directory's logits against the base with its adapters, in this process.
  const auto model = read_gpt(tmp.path("base_hf")), merged_model = read_gpt(tmp.path("merged"));
  const auto [settings, tensors] = models::read_lora_adapter(adapter);
  models::LoraAdapter on_base(*model, settings);
  on_base.load(tensors, adapter);
  autograd::NoGradGuard no_grad;
  const models::Tokens ids({1, 2, 3, 4, 5, 6, 7, 8}, 1, 8);
  EXPECT_TENSOR_NEAR("merged export", merged_model->forward(ids), model->forward(ids), 1e-5);

  const testing::CliResult zero = run_tfm("lm train --text " + tmp.path("text.txt") + " --init-from " + tmp.path("base_hf") +
                                          " --lora-rank 0 --lora-targets q,k --out " + tmp.path("zero") + quiet);
  EXPECT_NE(zero.output.find("give --lora-rank (at least 1; 0 trains every weight)"), std::string::npos) << zero.output;
  const testing::CliResult unknown = run_tfm("lm train --text " + tmp.path("text.txt") + " --init-from " + tmp.path("base_hf") +
                                             " --lora-rank 2 --lora-targets q,attn --out " + tmp.path("bad") + quiet);
  EXPECT_NE(unknown.output.find("unknown LoRA target 'attn'"), std::string::npos) << unknown.output;
}

}  // namespace
}  // namespace tfm
