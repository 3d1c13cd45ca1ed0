#pragma once
// One converter per family (hf/model.h's convert chooses): each reads config.json into
// tfm's configuration and names the tensors of each tfm parameter (hf/tensor_rules.h).
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hf/directory.h"
#include "hf/tensor_rules.h"
#include "models/config.h"
#include "models/stack_config.h"

namespace tfm::hf {

// The parts of a converter: tfm's configuration and the rules between the two layouts.
models::TransformerConfig marian_config(const Directory& d);
std::vector<TensorRule> marian_rules(const models::TransformerConfig& c);
bool marian_ignored(const std::string& name);

// The sizes of transformers' BART family (Marian, M2M100, mBART: both stacks of one head
// count and feed-forward width), each key's fallback its config class's default.
struct BartSizes {
  int64_t vocab, d_model, heads, d_ff, layers;
  const char* activation;
};
void read_bart_sizes(const Directory& d, const BartSizes& fallback, models::TransformerConfig& c);
// validate(), its errors naming config.json's keys of the BART family.
void validate_bart(const Directory& d, const models::TransformerConfig& c);
// The layers as transformers' BART family names them (Marian, M2M100, mBART): self_attn,
// encoder_attn (the decoder's), their LayerNorms, fc1, fc2 and final_layer_norm.
void add_bart_layers(std::vector<TensorRule>& rules, const models::TransformerConfig& c);
// model.shared.weight as tfm's one embedding, under the names of its tied copies too.
void add_shared_embedding(std::vector<TensorRule>& rules);
// Whether a tensor is one of those copies (encoder's, decoder's, lm_head), which saves may keep.
bool shared_embedding_copy(const std::string& name);
// final_logits_bias ([1, vocab]) as the generator's bias (Marian, mBART).
void add_final_logits_bias(std::vector<TensorRule>& rules, const models::TransformerConfig& c);

// M2M100 and NLLB (model_type m2m_100); their output layer has no bias (tfm's stays 0).
models::TransformerConfig m2m100_config(const Directory& d);
std::vector<TensorRule> m2m100_rules(const models::TransformerConfig& c);
bool m2m100_ignored(const std::string& name);
// mBART (model_type mbart: mBART-50's MBartForConditionalGeneration); it keeps no tensor
// tfm does not read but the shared embedding's copies.
models::TransformerConfig mbart_config(const Directory& d);
std::vector<TensorRule> mbart_rules(const models::TransformerConfig& c);

models::StackConfig gpt2_config(const Directory& d);
std::vector<TensorRule> gpt2_rules(const models::StackConfig& c, const std::string& prefix);
bool gpt2_ignored(const std::string& name);

// The Llama family (model_type llama, mistral or qwen2).
models::StackConfig llama_config(const Directory& d);
std::vector<TensorRule> llama_rules(const models::StackConfig& c);
bool llama_ignored(const std::string& name);

models::StackConfig bert_config(const Directory& d, const io::NamedTensors& weights);
std::vector<TensorRule> bert_rules(const models::StackConfig& c, const std::string& prefix);
bool bert_ignored(const std::string& name);
// "bert." as the task models (BertForPreTraining, BertForMaskedLM) save, "" as BertModel does.
std::string bert_prefix(const io::NamedTensors& weights);

// ViT and DeiT (model_type vit or deit): the heads the stored tensors hold.
models::StackConfig vit_config(const Directory& d, const io::NamedTensors& weights);
std::vector<TensorRule> vit_rules(const models::StackConfig& c, const std::string& prefix);
bool vit_ignored(const std::string& name);
// "vit." or "deit." as the task models save, "" as ViTModel and DeiTModel do.
std::string vit_prefix(const Directory& d, const io::NamedTensors& weights);

// nn::Activation's name for a Hugging Face activation_function / hidden_act.
std::string activation(const Directory& d, const char* key, const std::string& fallback);
// Refuses a setting of config.json whose value tfm does not compute as Hugging Face does.
template <class T>
void require(const Directory& d, const char* key, const T& wanted, const T& fallback) {
  const T value = setting<T>(d, key, fallback);
  TFM_CHECK(value == wanted, d.file("config.json") << ": " << key << " " << nlohmann::json(value).dump() << " is not supported (tfm computes "
                                                   << key << " " << nlohmann::json(wanted).dump() << ")");
}
// Refuses a setting that must equal another's (`other`, read first) with both named: tfm's
// translation models have one head count and one feed-forward width for both stacks.
void require_same(const Directory& d, const char* key, const char* other, int64_t fallback);
// `validate()`, whose errors name tfm's configuration fields, with each field's config.json
// key in its place (`names`: tfm's field, the key), so that the user reads what to change.
void with_hf_names(const Directory& d, const std::vector<std::pair<std::string, std::string>>& names, const std::function<void()>& validate);

// Whether a tensor of this name is present.
bool has_tensor(const io::NamedTensors& weights, const std::string& name);

}  // namespace tfm::hf
