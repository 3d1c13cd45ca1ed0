#include "hf/export.h"

#include <charconv>
#include <cstdlib>

#include "hf/families.h"
#include "models/config.h"
#include "models/stack_config.h"

namespace tfm::hf {

namespace {

using nlohmann::json;

void refuse_unless(bool ok, const std::string& origin, const std::string& setting, const std::string& family) {
  TFM_CHECK(ok, origin << ": " << setting << " cannot be written as a Hugging Face " << family << " model");
}

// A float setting as the decimal a person would write (1e-12, not 9.99999996e-13): the
// shortest that reads back as the same float, so that reading the file back gives it.
double decimal(float f) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, f).ptr;
  return std::strtod(std::string(text, end).c_str(), nullptr);
}

// Hugging Face's name of a tfm activation.
std::string activation_name(nn::Activation a) {
  switch (a) {
    case nn::Activation::GELUTanh: return "gelu_new";
    case nn::Activation::SiLU: return "swish";
    default: return nn::to_string(a);  // relu, gelu
  }
}

Exported marian(const models::TransformerConfig& c, const io::NamedTensors& params, const std::string& origin) {
  refuse_unless(c.positions != "interleaved", origin, "positions \"interleaved\" (tfm's sinusoids; Marian's put the sines first)", "marian");
  refuse_unless(!c.norm_first, origin, "norm_first true (pre-norm; Marian is post-norm)", "marian");
  refuse_unless(!c.final_norm, origin, "final_norm true (a LayerNorm after each stack, which Marian lacks)", "marian");
  refuse_unless(c.share_embeddings || c.src_vocab == c.tgt_vocab, origin,
                "src_vocab " + std::to_string(c.src_vocab) + " and tgt_vocab " + std::to_string(c.tgt_vocab) +
                    " (Marian's decoder embedding has the encoder's vocab_size rows)",
                "marian");
  refuse_unless(c.norm_eps == 1e-5f, origin, "norm_eps " + std::to_string(c.norm_eps) + " (Marian's LayerNorms use 1e-5)", "marian");
  refuse_unless(c.scale_embedding && !c.embed_norm, origin, "scale_embedding false or embed_norm true (Marian scales its embeddings and does not "
                "normalise them)", "marian");
  Exported e;
  e.json_files["config.json"] = {{"model_type", "marian"}, {"architectures", {"MarianMTModel"}}, {"vocab_size", c.src_vocab},
                                 {"decoder_vocab_size", c.tgt_vocab}, {"d_model", c.d_model}, {"encoder_layers", c.encoder_layers},
                                 {"decoder_layers", c.decoder_layers}, {"encoder_attention_heads", c.heads}, {"decoder_attention_heads", c.heads},
                                 {"encoder_ffn_dim", c.d_ff}, {"decoder_ffn_dim", c.d_ff}, {"activation_function", activation_name(c.activation)},
                                 {"max_position_embeddings", c.max_len}, {"scale_embedding", true}, {"share_encoder_decoder_embeddings", c.share_embeddings},
                                 {"tie_word_embeddings", c.share_embeddings || c.tie_generator},
                                 {"static_position_embeddings", true}, {"normalize_before", false}, {"dropout", decimal(c.dropout)},
                                 {"is_encoder_decoder", true}, {"pad_token_id", c.pad_id}, {"eos_token_id", c.eos_id},
                                 {"decoder_start_token_id", c.bos_id}};
  json generation = {{"decoder_start_token_id", c.bos_id}, {"eos_token_id", c.eos_id}, {"pad_token_id", c.pad_id},
                     {"bad_words_ids", {{c.pad_id}}}, {"renormalize_logits", c.renormalize}, {"num_beams", 4}};
  if (c.forced_eos) generation["forced_eos_token_id"] = c.eos_id;
  if (c.max_length > 0) generation["max_length"] = c.max_length;
  e.json_files["generation_config.json"] = generation;
  e.tensors = to_hf(params, marian_rules(c), origin);
  return e;
}

// What m2m100_config and mbart_config read alike, written back: the sizes, and the
// generation settings.
Exported multilingual(const models::TransformerConfig& c, const std::string& model_type, const std::string& architecture, const std::string& origin) {
  refuse_unless(c.norm_first && c.final_norm && c.share_embeddings && c.norm_eps == 1e-5f, origin,
                "norm_first false, final_norm false, separate embeddings or norm_eps other than 1e-5 (" + architecture +
                    " is pre-norm with final LayerNorms and embeddings shared three ways)",
                model_type);
  Exported e;
  e.json_files["config.json"] = {{"model_type", model_type}, {"architectures", {architecture}}, {"vocab_size", c.src_vocab},
                                 {"d_model", c.d_model}, {"encoder_layers", c.encoder_layers}, {"decoder_layers", c.decoder_layers},
                                 {"encoder_attention_heads", c.heads}, {"decoder_attention_heads", c.heads}, {"encoder_ffn_dim", c.d_ff},
                                 {"decoder_ffn_dim", c.d_ff}, {"activation_function", activation_name(c.activation)},
                                 {"max_position_embeddings", c.max_len}, {"scale_embedding", c.scale_embedding}, {"dropout", decimal(c.dropout)},
                                 {"is_encoder_decoder", true}, {"pad_token_id", c.pad_id}, {"eos_token_id", c.eos_id},
                                 {"decoder_start_token_id", c.bos_id}, {"forced_eos_token_id", c.forced_eos ? json(c.eos_id) : json(nullptr)}};
  json generation = {{"decoder_start_token_id", c.bos_id}, {"eos_token_id", c.eos_id}, {"pad_token_id", c.pad_id}};
  if (c.forced_eos) generation["forced_eos_token_id"] = c.eos_id;
  if (c.max_length > 0) generation["max_length"] = c.max_length;
  e.json_files["generation_config.json"] = generation;
  return e;
}

// M2M100 and NLLB (positions "fairseq").
Exported m2m100(const models::TransformerConfig& c, const io::NamedTensors& params, const std::string& origin) {
  refuse_unless(c.scale_embedding && !c.embed_norm, origin, "scale_embedding false or embed_norm true (M2M100 scales its embeddings and does not "
                "normalise them)", "m2m_100");
  Exported e = multilingual(c, "m2m_100", "M2M100ForConditionalGeneration", origin);
  e.tensors = to_hf(params, m2m100_rules(c), origin);  // (tfm's output bias, always 0 here, has no place there)
  return e;
}

// mBART (positions "learned").
Exported mbart(const models::TransformerConfig& c, const io::NamedTensors& params, const std::string& origin) {
  refuse_unless(c.embed_norm, origin, "embed_norm false (mBART normalises embeddings + positions: layernorm_embedding)", "mbart");
  Exported e = multilingual(c, "mbart", "MBartForConditionalGeneration", origin);
  e.tensors = to_hf(params, mbart_rules(c), origin);
  return e;
}

Exported gpt2(const models::StackConfig& c, const io::NamedTensors& params, const std::string& origin) {
  refuse_unless(c.learned_positions, origin, "learned_positions false (tfm's sinusoid positions)", "gpt2");
  refuse_unless(c.norm_first && c.final_norm, origin, "norm_first false or final_norm false (GPT-2 is pre-norm with ln_f)", "gpt2");
  refuse_unless(!c.rotary && !c.rms_norm && !c.gated && c.kv_heads == 0 && c.qkv_bias && c.out_bias && c.ff_bias && c.tied_head, origin,
                "a Llama-family configuration (rotary, rms_norm, gated, kv_heads, biases or an untied head)", "gpt2");
  Exported e;
  e.json_files["config.json"] = {{"model_type", "gpt2"}, {"architectures", {"GPT2LMHeadModel"}}, {"vocab_size", c.vocab},
                                 {"n_positions", c.max_len}, {"n_embd", c.d_model}, {"n_head", c.heads}, {"n_inner", c.d_ff},
                                 {"n_layer", c.layers}, {"activation_function", activation_name(c.activation)},
                                 {"layer_norm_epsilon", decimal(c.norm_eps)}, {"resid_pdrop", decimal(c.dropout)}, {"embd_pdrop", decimal(c.dropout)},
                                 {"attn_pdrop", decimal(c.dropout)}, {"tie_word_embeddings", true},
                                 {"scale_attn_by_inverse_layer_idx", c.scores_by_layer}};
  e.tensors = to_hf(params, gpt2_rules(c, "transformer."), origin);
  return e;
}

// The Llama family's model_type: the one it was read as (`source`), else what its
// biases say (Qwen2's query, key and value projections alone have them).
std::string llama_type(const models::StackConfig& c, const json& source) {
  if (source.contains("model_type")) return source["model_type"].get<std::string>();
  return c.qkv_bias && !c.out_bias && !c.ff_bias ? "qwen2" : "llama";
}

// The biases `type`'s class has: Qwen2's on q/k/v alone, Mistral's none, Llama's as
// attention_bias (q/k/v and o together) and mlp_bias say.
void refuse_other_biases(const models::StackConfig& c, const std::string& type, const std::string& origin) {
  const bool fits = type == "qwen2" ? c.qkv_bias && !c.out_bias && !c.ff_bias
                    : type == "mistral" ? !c.qkv_bias && !c.out_bias && !c.ff_bias
                                        : c.qkv_bias == c.out_bias;
  refuse_unless(fits, origin, "qkv_bias " + std::to_string(c.qkv_bias) + ", out_bias " + std::to_string(c.out_bias) + " and ff_bias " +
                                  std::to_string(c.ff_bias), type);
}

// config.json's rope_scaling (null: none); llama3's as the files that have it write it.
json rope_scaling(const ops::RopeScaling& s) {
  if (s.type.empty()) return nullptr;
  if (s.type != "llama3") return {{"type", s.type}, {"factor", s.factor}};  // (transformers 4.39 wants these two fields alone)
  return {{"rope_type", s.type}, {"factor", s.factor}, {"low_freq_factor", s.low_freq_factor}, {"high_freq_factor", s.high_freq_factor},
          {"original_max_position_embeddings", s.original_max_positions}};
}

const char* llama_architecture(const std::string& type) {
  return type == "qwen2" ? "Qwen2ForCausalLM" : type == "mistral" ? "MistralForCausalLM" : "LlamaForCausalLM";
}

// Llama, Mistral and Qwen2: what llama_config reads, written back. The context is
// max_position_embeddings (Mistral's sliding window too, which it then never reaches);
// token ids and generation_config.json are the source directory's where there was one.
Exported llama(const models::StackConfig& c, const io::NamedTensors& params, const json& source, const std::string& origin) {
  const std::string type = llama_type(c, source);
  refuse_unless(c.norm_first && c.final_norm && c.rms_norm && c.rotary && c.gated && !c.learned_positions && !c.scores_by_layer, origin,
                "a configuration without rms_norm, rotary, gated, a final norm or pre-norm", type);
  refuse_unless(c.rope.layout == ops::RotaryLayout::half, origin, "rope_layout \"interleaved\" (Hugging Face's rotary pairs are the halves)", type);
  refuse_other_biases(c, type, origin);
  Exported e;
  json& config = e.json_files["config.json"];
  config = {{"model_type", type}, {"architectures", {llama_architecture(type)}}, {"vocab_size", c.vocab}, {"hidden_size", c.d_model},
            {"num_attention_heads", c.heads}, {"num_key_value_heads", c.kv_heads > 0 ? c.kv_heads : c.heads},
            {"intermediate_size", c.d_ff}, {"num_hidden_layers", c.layers}, {"max_position_embeddings", c.max_len},
            {"hidden_act", c.activation == nn::Activation::SiLU ? "silu" : activation_name(c.activation)},  // (the family's name of it)
            {"rms_norm_eps", decimal(c.norm_eps)}, {"rope_theta", c.rope.theta},
            {"rope_scaling", rope_scaling(c.rope.scaling)}, {"tie_word_embeddings", c.tied_head}, {"attention_dropout", 0.0},
            {"torch_dtype", "float32"}};
  if (type == "llama") config.update({{"attention_bias", c.qkv_bias}, {"mlp_bias", c.ff_bias}});
  if (type == "mistral") config["sliding_window"] = c.max_len;
  if (type == "qwen2") config.update({{"use_sliding_window", false}, {"sliding_window", c.max_len}});
  for (const char* id : {"bos_token_id", "eos_token_id", "pad_token_id"})
    if (source.contains(id)) config[id] = source[id];
  e.json_files["generation_config.json"] = source.value("generation_config", json::object());
  e.tensors = to_hf(params, llama_rules(c), origin);
  return e;
}

// id2label and label2id of `classes` labels named by `names` (LABEL_i where it has none).
std::pair<json, json> label_maps(const std::vector<std::string>& names, int64_t classes) {
  json id2label = json::object(), label2id = json::object();
  for (int64_t i = 0; i < classes; ++i) {
    const std::string name = i < static_cast<int64_t>(names.size()) ? names[static_cast<size_t>(i)] : "LABEL_" + std::to_string(i);
    id2label[std::to_string(i)] = name, label2id[name] = i;
  }
  return {id2label, label2id};
}

// transformers' class for a tfm BERT's head (and pooler).
const char* bert_architecture(const models::StackConfig& c) {
  if (c.head == "none") return "BertModel";
  if (c.head == "sequence") return "BertForSequenceClassification";
  if (c.head == "token") return "BertForTokenClassification";
  return c.pooler ? "BertForPreTraining" : "BertForMaskedLM";
}

Exported bert(models::StackConfig c, io::NamedTensors params, const Labels& labels, const std::string& origin) {
  refuse_unless(!c.norm_first, origin, "norm_first true (tfm's pre-norm; BERT is post-norm: give \"norm_first\": false when training)", "bert");
  refuse_unless(!c.final_norm, origin, "final_norm true (a LayerNorm after the last layer, which BERT has not: give \"final_norm\": false when training)",
                "bert");
  refuse_unless(c.norm_eps == 1e-12f, origin, "norm_eps " + std::to_string(c.norm_eps) + " (BERT's LayerNorms all use one epsilon, 1e-12 in tfm's)",
                "bert");
  if (c.type_vocab == 0) {  // BERT always adds a token-type row: zeros add nothing
    c.type_vocab = 2;
    params.emplace_back("type_embed.weight", Tensor::zeros({2, c.d_model}));
  }
  Exported e;
  e.json_files["config.json"] = {{"model_type", "bert"}, {"architectures", {bert_architecture(c)}},
                                 {"vocab_size", c.vocab}, {"max_position_embeddings", c.max_len}, {"hidden_size", c.d_model},
                                 {"num_attention_heads", c.heads}, {"intermediate_size", c.d_ff}, {"num_hidden_layers", c.layers},
                                 {"hidden_act", activation_name(c.activation)}, {"layer_norm_eps", decimal(c.norm_eps)}, {"type_vocab_size", c.type_vocab},
                                 {"hidden_dropout_prob", decimal(c.dropout)}, {"attention_probs_dropout_prob", decimal(c.dropout)}, {"pad_token_id", 0},
                                 {"position_embedding_type", "absolute"}};
  if (c.classifies_text()) {
    const auto [id2label, label2id] = label_maps(labels.names, c.classes);
    e.json_files["config.json"].update({{"id2label", id2label}, {"label2id", label2id}});
    if (c.head == "sequence")
      e.json_files["config.json"]["problem_type"] = c.multi_label ? "multi_label_classification" : "single_label_classification";
  }
  e.tensors = to_hf(params, bert_rules(c, c.head == "none" ? "" : "bert."), origin);  // (BertModel's names have no prefix)
  return e;
}

Exported vit(const models::StackConfig& c, const io::NamedTensors& params, const Labels& labels, const std::string& origin) {
  refuse_unless(c.norm_first && c.final_norm, origin, "norm_first false or final_norm false (ViT is pre-norm with a final LayerNorm)", "vit");
  const auto [id2label, label2id] = label_maps(labels.names, c.classes);
  Exported e;
  e.json_files["config.json"] = {{"model_type", "vit"}, {"architectures", {"ViTForImageClassification"}}, {"image_size", c.image_size},
                                 {"patch_size", c.patch}, {"num_channels", c.channels}, {"hidden_size", c.d_model},
                                 {"num_attention_heads", c.heads}, {"intermediate_size", c.d_ff}, {"num_hidden_layers", c.layers},
                                 {"hidden_act", activation_name(c.activation)}, {"layer_norm_eps", decimal(c.norm_eps)}, {"qkv_bias", true},
                                 {"hidden_dropout_prob", decimal(c.dropout)}, {"attention_probs_dropout_prob", decimal(c.dropout)}, {"id2label", id2label},
                                 {"label2id", label2id}};
  if (labels.mnist_style) e.json_files["config.json"]["tfm_mnist_style"] = true;
  // tfm's pixels: x / 127.5 - 1, which is ViTImageProcessor's rescale by 1/255 then (x - 0.5) / 0.5
  const json half(std::vector<double>(static_cast<size_t>(c.channels), 0.5));
  e.json_files["preprocessor_config.json"] = {{"image_processor_type", "ViTImageProcessor"}, {"do_resize", true},
                                              {"size", {{"height", c.image_size}, {"width", c.image_size}}}, {"resample", 2},
                                              {"do_rescale", true}, {"rescale_factor", 1.0 / 255.0}, {"do_normalize", true},
                                              {"image_mean", half}, {"image_std", half}};
  refuse_unless(c.classes > 0 && !c.distilled && !c.pooler, origin, "a base, a pooler or DeiT's distillation token (tfm exports ViTForImageClassification)", "vit");
  e.tensors = to_hf(params, vit_rules(c, "vit."), origin);
  return e;
}

}  // namespace

nlohmann::json source_record(const Directory& d) {
  json j = {{"model_type", d.model_type}};
  for (const char* id : {"bos_token_id", "eos_token_id", "pad_token_id"})
    if (d.config.contains(id) && !d.config[id].is_null()) j[id] = d.config[id];
  if (d.has("generation_config.json")) j["generation_config"] = d.json_file("generation_config.json");
  return j;
}

Exported export_model(const std::string& kind, const std::string& config_json, io::NamedTensors parameters,
                      const Labels& labels, const std::string& origin, const nlohmann::json& source) {
  if (kind == "encoder_decoder") {
    const models::TransformerConfig c = models::TransformerConfig::from_json(config_json, origin);
    if (c.positions == "learned") return mbart(c, parameters, origin);
    return c.positions == "fairseq" ? m2m100(c, parameters, origin) : marian(c, parameters, origin);
  }
  TFM_CHECK(kind == "gpt" || kind == "bert" || kind == "vit", origin << ": a " << kind << " model has no Hugging Face form in tfm");
  const models::StackConfig c = models::StackConfig::from_json(config_json, origin, kind);
  if (kind == "gpt") return c.rotary || c.rms_norm || c.gated ? llama(c, parameters, source, origin) : gpt2(c, parameters, origin);
  if (kind == "bert") return bert(c, std::move(parameters), labels, origin);
  return vit(c, parameters, labels, origin);
}

}  // namespace tfm::hf
