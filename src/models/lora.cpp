#include "models/lora.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "autograd/autograd.h"
#include "io/output_file.h"
#include "ops/elementwise.h"
#include "ops/shape.h"
#include "tensor/error.h"

namespace tfm::models {

using nlohmann::json;

namespace {

// tfm's target names and PEFT's modules of the Llama family.
const std::map<std::string, std::string> kTargets = {{"q", "self_attn.q_proj"}, {"k", "self_attn.k_proj"}, {"v", "self_attn.v_proj"},
                                                     {"o", "self_attn.o_proj"}, {"gate", "mlp.gate_proj"}, {"up", "mlp.up_proj"},
                                                     {"down", "mlp.down_proj"}};
const char* kTargetList = "q, k, v, o, gate, up or down";

// Where a target's adapter goes in one layer: a block of a product's output rows.
struct Site {
  nn::LoraBlocks* blocks;
  std::vector<int64_t> rows;  // the product's blocks
  size_t block;
  Tensor* weight;
  int64_t in;
};

Site site_of(nn::EncoderLayer& l, const StackConfig& c, const std::string& target) {
  const int64_t D = c.d_model, KV = D / c.heads * (c.kv_heads > 0 ? c.kv_heads : c.heads), F = c.d_ff;
  nn::MultiHeadAttention& a = *l.self_attn;
  nn::Linear &up = *l.feed_forward->linear1, &down = *l.feed_forward->linear2;
  if (target == "q" || target == "k" || target == "v")  // in_proj: q [D], k [KV], v [KV]
    return {&a.in_proj_lora, {D, KV, KV}, target == "q" ? 0u : target == "k" ? 1u : 2u, &a.in_proj_weight, D};
  if (target == "o") return {&a.out_proj->lora, {D}, 0, &a.out_proj->weight, D};
  if (target == "down") return {&down.lora, {D}, 0, &down.weight, F};
  TFM_CHECK(c.gated || target == "up", "LoRA target 'gate': the model has no gated feed-forward block (its linear1 is up_proj alone)");
  if (!c.gated) return {&up.lora, {F}, 0, &up.weight, D};
  return {&up.lora, {F, F}, target == "gate" ? 0u : 1u, &up.weight, D};  // linear1: gate, then up
}

// PEFT's module name of `target` in layer `layer`.
std::string peft_name(size_t layer, const std::string& target) {
  return "base_model.model.model.layers." + std::to_string(layer) + "." + kTargets.at(target);
}

std::string short_target(std::string name) {
  if (name.ends_with("_proj")) name.resize(name.size() - 5);
  return name;
}

}  // namespace

std::vector<std::string> parse_lora_targets(const std::string& list) {
  std::vector<std::string> targets;
  std::istringstream in(list);
  for (std::string t; std::getline(in, t, ',');) targets.push_back(short_target(t));
  return targets;
}

void LoraSettings::validate(const std::string& origin) const {
  TFM_CHECK(rank >= 1 && rank <= 65536, origin << ": LoRA rank " << rank << " must be from 1 to 65536");
  TFM_CHECK(std::isfinite(alpha) && alpha > 0, origin << ": LoRA alpha " << alpha << " must be a number greater than 0");
  TFM_CHECK(!targets.empty(), origin << ": LoRA needs at least one target (" << kTargetList << ")");
  std::set<std::string> seen;
  for (const std::string& t : targets) {
    TFM_CHECK(kTargets.count(t), origin << ": unknown LoRA target '" << t << "' (the targets are " << kTargetList << ")");
    TFM_CHECK(seen.insert(t).second, origin << ": LoRA target '" << t << "' is given twice");
  }
}

std::string LoraSettings::to_json() const {
  json modules = json::array();
  for (const std::string& t : targets) modules.push_back(t + "_proj");
  return json{{"peft_type", "LORA"}, {"task_type", "CAUSAL_LM"}, {"r", rank}, {"lora_alpha", alpha}, {"lora_dropout", 0.0},
              {"target_modules", modules}, {"bias", "none"}, {"fan_in_fan_out", false}, {"inference_mode", true},
              {"init_lora_weights", true}, {"use_rslora", false}, {"use_dora", false}, {"modules_to_save", nullptr},
              {"layers_to_transform", nullptr}, {"rank_pattern", json::object()}, {"alpha_pattern", json::object()},
              {"base_model_name_or_path", base}}
      .dump(2);
}

LoraSettings LoraSettings::from_json(const std::string& text, const std::string& origin) {
  const json j = json::parse(text, nullptr, false);
  TFM_CHECK(j.is_object(), origin << ": is not a JSON object");
  TFM_CHECK(j.value("peft_type", "") == "LORA", origin << ": peft_type " << j.value("peft_type", json()).dump() << " is not LORA");
  // What PEFT would compute otherwise than y = W x + (alpha / r) B A x on whole projections.
  TFM_CHECK(!j.value("use_rslora", false) && !j.value("use_dora", false) && !j.value("fan_in_fan_out", false) &&
                j.value("bias", "none") == "none" && j.value("layers_to_transform", json()).is_null() &&
                j.value("rank_pattern", json::object()).empty() && j.value("alpha_pattern", json::object()).empty(),
            origin << ": use_rslora, use_dora, fan_in_fan_out, bias, layers_to_transform, rank_pattern or alpha_pattern is set; tfm "
                      "computes plain LoRA on every layer");
  LoraSettings s;
  try {
    s.rank = j.at("r").get<int64_t>(), s.alpha = j.value("lora_alpha", 8.0);
    s.targets.clear();
    for (const json& m : j.at("target_modules")) s.targets.push_back(short_target(m.get<std::string>()));
    const json base = j.value("base_model_name_or_path", json());  // (PEFT writes null where it has no path)
    s.base = base.is_string() ? base.get<std::string>() : "";
  } catch (const json::exception&) {
    throw Error(origin + ": r, lora_alpha or target_modules (a list of module names) is missing or malformed");
  }
  s.validate(origin);
  return s;
}

LoraAdapter::LoraAdapter(GPT& model, const LoraSettings& settings) : model_(model), settings_(settings) {
  settings_.validate("LoRA");
  for (size_t i = 0; i < model.blocks->layers.size(); ++i)
    for (const std::string& t : settings_.targets) attach(i, t);
  to(model.device());  // (the adapters are made on the CPU; a model on a GPU adds them there)
}

LoraAdapter::~LoraAdapter() { detach(); }

void LoraAdapter::attach(size_t layer, const std::string& target) {
  const Site s = site_of(*model_.blocks->layers[layer], model_.config(), target);
  const int64_t out = s.rows[s.block];
  auto lora = register_module(peft_name(layer, target),
                              std::make_shared<nn::Lora>(s.in, out, settings_.rank, static_cast<float>(settings_.alpha)));
  if (s.blocks->rows.empty()) s.blocks->rows = s.rows, s.blocks->adapters.resize(s.rows.size());
  s.blocks->adapters[s.block] = lora;
  int64_t row = 0;
  for (size_t b = 0; b < s.block; ++b) row += s.rows[b];
  attached_.push_back({s.blocks, s.block, s.weight, row, lora});
}

void LoraAdapter::detach() {
  for (Attached& a : attached_) a.blocks->adapters[a.block] = nullptr;
  attached_.clear();
}

void LoraAdapter::init_parameters(Rng& rng) {
  for (Attached& a : attached_) a.lora->init_parameters(rng);
}

void LoraAdapter::load(const io::NamedTensors& tensors, const std::string& origin) {
  std::map<std::string, Tensor> by_name(tensors.begin(), tensors.end());
  for (auto& [name, p] : named_parameters()) {
    const auto it = by_name.find(name);
    TFM_CHECK(it != by_name.end(), origin << ": has no tensor '" << name << "' (an adapter for another model, or of other targets)");
    TFM_CHECK(it->second.shape() == p.shape(), origin << ": tensor '" << name << "' has shape " << shape_str(it->second.shape())
                                                      << ", this model's is " << shape_str(p.shape()) << " (an adapter for another model)");
    Tensor target = p;
    target.copy_from(io::to_f32(it->second));
    by_name.erase(it);
  }
  TFM_CHECK(by_name.empty(), origin << ": tensor '" << by_name.begin()->first
                                    << "' is not one of this model's adapters (an adapter for another model, or targets adapter_config.json does not list)");
}

void LoraAdapter::merge() {
  autograd::NoGradGuard no_grad;
  for (Attached& a : attached_) {
    const Tensor delta = a.lora->delta();  // [out, in]
    Tensor rows = ops::slice(*a.weight, 0, a.row, a.row + delta.size(0));
    rows.copy_from(ops::add(rows, delta));
  }
  detach();
}

void refuse_lora_checkpoint(const std::map<std::string, std::string>& metadata, const std::string& path) {
  TFM_CHECK(!metadata.count(kLoraCheckpointKey), path << ": holds a LoRA run's adapters, not a model; give the model it fine-tuned as --model "
                                                      "and the adapter directory beside this file (its name and _adapter) as --lora");
}

void save_lora_adapter(const LoraAdapter& adapter, const std::string& dir) {
  io::create_directories(dir);
  io::write_file_atomic(dir + "/adapter_config.json", adapter.settings().to_json() + "\n");
  io::write_safetensors(dir + "/adapter_model.safetensors", adapter.named_parameters(), {{"format", "pt"}});
}

std::pair<LoraSettings, io::NamedTensors> read_lora_adapter(const std::string& dir) {
  const std::string config = dir + "/adapter_config.json", weights = dir + "/adapter_model.safetensors";
  std::ifstream in(config);
  TFM_CHECK(in, config << ": cannot read (a LoRA adapter is a directory of adapter_config.json and adapter_model.safetensors)");
  std::stringstream text;
  text << in.rdbuf();
  return {LoraSettings::from_json(text.str(), config), io::read_safetensors(weights).tensors};
}

void merge_lora_adapter(GPT& model, const std::string& dir) {
  const auto [settings, tensors] = read_lora_adapter(dir);
  LoraAdapter adapter(model, settings);
  adapter.load(tensors, dir + "/adapter_model.safetensors");
  adapter.merge();
}

}  // namespace tfm::models
