#include "api/inference.h"

#include "io/checkpoint.h"
#include "models/gpt.h"
#include "models/lora.h"
#include "ops/dispatch.h"
#include "ops/linear_products.h"
#include "tensor/allocator.h"
#include "tensor/error.h"

namespace tfm::api {

AttentionWeights weights_of(const std::vector<Tensor>& maps) {
  AttentionWeights w;
  w.layers = static_cast<int64_t>(maps.size());
  for (const Tensor& m : maps) {  // [1, heads, queries, keys]
    w.heads = m.size(1), w.queries = m.size(2), w.keys = m.size(3);
    const std::vector<float> v = m.to_vector();
    expect_finite(v.data(), v.size(), "attention weights");
    w.values.insert(w.values.end(), v.begin(), v.end());
  }
  return w;
}

TextAttention text_attention(const std::vector<int>& ids, const nn::AttentionMaps& maps, const data::Tokenizer& tokenizer) {
  TextAttention out{{}, weights_of(maps.self)};
  for (int id : ids) out.tokens.push_back(tokenizer.piece(id));
  return out;
}

void ready_for_inference(nn::Module& model, io::SafeTensors& file, const std::string& path, const ModelOptions& options) {
  const ops::Precision p = ops::parse_precision(options.precision);  // bad names fail before the weights load
  model.to(ops::usable_device(options.device));
  models::refuse_lora_checkpoint(file.metadata, path);
  io::take_parameters(model.named_parameters(), file, path);
  // The file's buffers and the model's first ones, freed now, go back to the system (a
  // cache keeps them otherwise, and nothing of that size is allocated again), before
  // the frozen copies are made beside the weights.
  allocator_for(Device::CPU).release_cached();
  if (!options.lora.empty()) {  // merged: generation as fast as the base's
    auto* gpt = dynamic_cast<models::GPT*>(&model);
    TFM_CHECK(gpt, options.lora << ": LoRA adapters are for language models (generate, chat, serve)");
    models::merge_lora_adapter(*gpt, options.lora);
  }
  model.eval();
  model.products().set_precision(p);
  model.products().freeze();
  // One copy of each weight a product reads: a Qwen2-0.5B-shaped model (1.9 GiB of f32
  // weights) generating in bf16 held 5693 MiB at its peak, now 1530 MiB once loaded (its
  // tied embedding table, 519 MiB, stays f32 beside its copy: the embedding reads it).
  if (auto* gpt = dynamic_cast<models::GPT*>(&model)) gpt->keep_product_copies_only();
}

}  // namespace tfm::api
