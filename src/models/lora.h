#pragma once
// LoRA adapters on a GPT-family model's projections (nn/lora.h), named and configured as
// PEFT names and configures them, so that an adapter trained here loads into PEFT over
// the Hugging Face model (base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight,
// adapter_config.json) and PEFT's loads here. The adapter is a model of its own (its
// parameters alone: what the optimiser and checkpoints see); the base model's products
// call its adapters, and the base stays as it was unless merged.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/gpt.h"
#include "nn/module.h"

namespace tfm::models {

// PEFT's LoraConfig defaults: r 8, lora_alpha 8, the query and value projections.
struct LoraSettings {
  int64_t rank = 8;                               // r
  double alpha = 8.0;                             // lora_alpha: the change is scaled by alpha / r
  std::vector<std::string> targets = {"q", "v"};  // of q, k, v, o (attention), gate, up, down (feed-forward)
  std::string base;                               // base_model_name_or_path

  // One-line errors for rank 0, a non-positive alpha, an unknown or repeated target.
  void validate(const std::string& origin) const;
  // adapter_config.json as PEFT writes it (target_modules q_proj, v_proj, ...).
  std::string to_json() const;
  static LoraSettings from_json(const std::string& text, const std::string& origin);
};

// "q,k,v" -> {"q", "k", "v"} (as --lora-targets takes them; PEFT's q_proj is read as q).
std::vector<std::string> parse_lora_targets(const std::string& list);

class LoraAdapter : public nn::Module {
 public:
  // Adapters on every layer's targets of `model`, attached to its products. B is zero:
  // the model computes as before until they train or load.
  LoraAdapter(GPT& model, const LoraSettings& settings);
  ~LoraAdapter() override;  // detaches the adapters from the model
  LoraAdapter(const LoraAdapter&) = delete;
  LoraAdapter& operator=(const LoraAdapter&) = delete;

  void init_parameters(Rng& rng);  // A as PEFT draws it, B zeros
  // Loads A and B from `tensors` (PEFT's names); a missing, unexpected or misshapen
  // tensor is one error saying the adapter is not this model's.
  void load(const io::NamedTensors& tensors, const std::string& origin);
  // Adds scaling B A to the base weights (what export writes) and detaches the adapters.
  void merge();
  const LoraSettings& settings() const { return settings_; }

 private:
  struct Attached {
    nn::LoraBlocks* blocks;  // the model's product
    size_t block;
    Tensor* weight;          // its weight, whose rows [row, row + adapter's out) the adapter changes
    int64_t row;
    std::shared_ptr<nn::Lora> lora;
  };
  void attach(size_t layer, const std::string& target);
  void detach();
  GPT& model_;
  LoraSettings settings_;
  std::vector<Attached> attached_;
};

// A LoRA run's checkpoints record its adapters' settings (adapter_config.json, the base's
// path) under this key; they hold the adapters, not a model.
inline constexpr const char* kLoraCheckpointKey = "tfm.lora";
// Refuses such a checkpoint (`metadata`) where a model is wanted, saying what to give instead.
void refuse_lora_checkpoint(const std::map<std::string, std::string>& metadata, const std::string& path);

// An adapter as PEFT saves one: adapter_config.json and adapter_model.safetensors in `dir`.
void save_lora_adapter(const LoraAdapter& adapter, const std::string& dir);
// Reads `dir` (PEFT's layout) into the settings and tensors LoraAdapter takes.
std::pair<LoraSettings, io::NamedTensors> read_lora_adapter(const std::string& dir);
// The adapter directory `dir` loaded onto `model` and merged into its weights
// (generation with --lora, export with --lora).
void merge_lora_adapter(GPT& model, const std::string& dir);

}  // namespace tfm::models
