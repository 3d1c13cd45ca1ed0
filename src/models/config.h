#pragma once
// The hyper-parameters of an encoder-decoder Transformer. Stored as JSON in every
// checkpoint's metadata and accepted from the command line as a JSON file.
#include <cstdint>
#include <string>

#include "nn/transformer.h"

namespace tfm::models {

struct TransformerConfig {
  int64_t src_vocab = 0, tgt_vocab = 0;
  int64_t d_model = 512, heads = 8, d_ff = 2048;
  int64_t encoder_layers = 6, decoder_layers = 6;
  float dropout = 0.1f;
  nn::Activation activation = nn::Activation::ReLU;
  bool norm_first = false;
  // Ties source embedding, target embedding and generator weights (needs src_vocab == tgt_vocab).
  bool share_embeddings = false;
  int64_t max_len = 5000;
  int pad_id = 0;

  nn::LayerOptions layer_options() const;
  std::string to_json() const;
  // Parses and (unless told not to, for callers that fill in fields first)
  // validates; `origin` names the source in error messages.
  static TransformerConfig from_json(const std::string& text, const std::string& origin, bool validate = true);
  static TransformerConfig from_file(const std::string& path, bool validate = true);
  void validate(const std::string& origin) const;
};

// Named sizes: "base" is the paper's (512 / 2048 / 8 heads / 6 + 6 layers),
// "small" is 256 / 1024 / 4 heads / 3 + 3 layers. Vocabulary sizes are left 0.
TransformerConfig preset(const std::string& name);

}  // namespace tfm::models
