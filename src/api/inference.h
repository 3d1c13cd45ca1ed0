#pragma once
// What every public model class does on loading: the checkpoint's weights into the
// model, evaluation mode, the chosen precision's products, weights frozen.
#include <string>
#include <utility>

#include "decode/family_checkpoint.h"
#include "tfm/attention.h"
#include "tfm/model_options.h"
#include "io/safetensors.h"
#include "nn/attention.h"
#include "nn/module.h"

namespace tfm::api {

// Every layer's attention probabilities ([1, heads, queries, keys] each) as one array.
AttentionWeights weights_of(const std::vector<Tensor>& maps);

// A text model's self-attention over `ids` (its maps from one forward pass), with each
// token's piece.
TextAttention text_attention(const std::vector<int>& ids, const nn::AttentionMaps& maps, const data::Tokenizer& tokenizer);

// Consumes file.tensors (io::take_parameters); the metadata stays for the class.
void ready_for_inference(nn::Module& model, io::SafeTensors& file, const std::string& path, const ModelOptions& options);

// A GPT, BERT or ViT checkpoint loaded for inference: the model, and its configuration
// and tokenizer (the weights are in the model). `args` follow the configuration into
// the model's constructor.
template <class Model>
struct FamilyModel {
  decode::FamilyCheckpoint checkpoint;
  Model model;

  template <class... Args>
  FamilyModel(const std::string& path, const char* kind, const char* made_by, const ModelOptions& options, Args&&... args)
      : checkpoint(decode::open_family_checkpoint(path, kind, made_by, options.vocab)), model(checkpoint.config, std::forward<Args>(args)...) {
    ready_for_inference(model, checkpoint.file, path, options);
  }
};

}  // namespace tfm::api
