#include "hf/model.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "hf/families.h"
#include "io/checkpoint.h"
#include "models/bert.h"
#include "models/encoder_decoder.h"
#include "models/gpt.h"
#include "models/vit.h"

namespace tfm::hf {

namespace {

io::SafeTensors checkpoint(const std::string& kind, const std::string& config_json, io::NamedTensors weights) {
  io::SafeTensors file;
  file.tensors = std::move(weights);
  file.metadata = {{io::kModelKindKey, kind}, {io::kConfigKey, config_json}};
  return file;
}

}  // namespace

std::string activation(const Directory& d, const char* key, const std::string& fallback) {
  const std::string name = setting<std::string>(d, key, fallback);
  if (name == "gelu") return "gelu";
  if (name == "gelu_new" || name == "gelu_pytorch_tanh") return "gelu_tanh";
  if (name == "swish" || name == "silu") return "silu";
  if (name == "relu") return "relu";
  throw Error(d.file("config.json") + ": " + key + " '" + name + "' is not supported (tfm has gelu, gelu_new, swish and relu)");
}

void require_same(const Directory& d, const char* key, const char* other, int64_t fallback) {
  const int64_t wanted = setting<int64_t>(d, other, fallback), value = setting<int64_t>(d, key, wanted);
  TFM_CHECK(value == wanted, d.file("config.json") << ": " << key << " " << value << " differs from " << other << " " << wanted
                                                   << " (tfm's translation models use one value for both stacks)");
}

void with_hf_names(const Directory& d, const std::vector<std::pair<std::string, std::string>>& names, const std::function<void()>& validate) {
  try {
    validate();
  } catch (const Error& e) {
    std::string message = e.what();
    const std::string prefix = d.file("config.json") + ": ";  // the path stays as it is
    const size_t start = message.rfind(prefix, 0) == 0 ? prefix.size() : 0;
    const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    for (const auto& [field, key] : names)
      for (size_t at = message.find(field, start); at != std::string::npos; at = message.find(field, at + 1)) {
        const size_t end = at + field.size();
        if ((at > 0 && word(message[at - 1])) || (end < message.size() && word(message[end]))) continue;  // a part of another word
        message.replace(at, field.size(), key);
        at += key.size() - 1;
      }
    throw Error(message);
  }
}

bool has_tensor(const io::NamedTensors& weights, const std::string& name) {
  return std::any_of(weights.begin(), weights.end(), [&](const auto& e) { return e.first == name; });
}

io::SafeTensors convert(const Directory& d) {
  io::NamedTensors hf = read_weights(d);  // (moved into to_tfm, which drops each tensor once used)
  const std::string origin = d.path;
  if (d.model_type == "marian") {
    const models::TransformerConfig c = marian_config(d);
    const io::NamedTensors shapes = models::EncoderDecoder(c).named_parameters();
    return checkpoint("encoder_decoder", c.to_json(), to_tfm(std::move(hf), marian_rules(c), shapes, marian_ignored, origin));
  }
  if (d.model_type == "m2m_100") {
    const models::TransformerConfig c = m2m100_config(d);
    const models::EncoderDecoder model(c);
    io::NamedTensors weights = to_tfm(std::move(hf), m2m100_rules(c), model.named_parameters(), m2m100_ignored, origin);
    weights.emplace_back("generator.bias", Tensor::zeros({c.tgt_vocab}));
    return checkpoint("encoder_decoder", c.to_json(), std::move(weights));
  }
  if (d.model_type == "mbart") {
    const models::TransformerConfig c = mbart_config(d);
    const io::NamedTensors shapes = models::EncoderDecoder(c).named_parameters();
    return checkpoint("encoder_decoder", c.to_json(), to_tfm(std::move(hf), mbart_rules(c), shapes, shared_embedding_copy, origin));
  }
  if (d.model_type == "gpt2") {
    const models::StackConfig c = gpt2_config(d);
    const std::string prefix = has_tensor(hf, "transformer.wpe.weight") ? "transformer." : "";  // wpe: never a tied copy
    return checkpoint("gpt", c.to_json(), to_tfm(std::move(hf), gpt2_rules(c, prefix), models::GPT(c).named_parameters(), gpt2_ignored, origin));
  }
  if (d.model_type == "llama" || d.model_type == "mistral" || d.model_type == "qwen2") {
    const models::StackConfig c = llama_config(d);
    return checkpoint("gpt", c.to_json(), to_tfm(std::move(hf), llama_rules(c), models::GPT(c).named_parameters(), llama_ignored, origin));
  }
  if (d.model_type == "bert") {
    const models::StackConfig c = bert_config(d, hf);
    const io::NamedTensors shapes = models::BERT(c, setting<int>(d, "pad_token_id", 0)).named_parameters();
    const std::vector<TensorRule> rules = bert_rules(c, bert_prefix(hf));  // (before hf moves)
    return checkpoint("bert", c.to_json(), to_tfm(std::move(hf), rules, shapes, bert_ignored, origin));
  }
  const models::StackConfig c = vit_config(d, hf);  // open() admits vit and deit only besides
  const std::vector<TensorRule> rules = vit_rules(c, vit_prefix(d, hf));  // (before hf moves)
  return checkpoint("vit", c.to_json(), to_tfm(std::move(hf), rules, models::ViT(c).named_parameters(), vit_ignored, origin));
}

}  // namespace tfm::hf
