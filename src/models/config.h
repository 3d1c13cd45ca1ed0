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
  bool norm_first = true;  // pre-norm, as the CLI's default (false: the paper's post-norm)
  // Ties source embedding, target embedding and generator weights (needs src_vocab == tgt_vocab).
  bool share_embeddings = false;
  // Without share_embeddings: ties the generator to the target embedding alone (Marian's
  // separate vocabularies with tie_word_embeddings).
  bool tie_generator = false;
  int64_t max_len = 5000;
  int pad_id = 0;
  // Marian's, M2M100's and mBART's variations (Hugging Face's MarianMT, M2M100, NLLB and
  // mBART-50): the positions, sinusoids with their columns "interleaved" (the paper's),
  // "split" (sines, then cosines) or "fairseq" (split, fairseq's frequencies, positions
  // from pad_id + 1: ops::SinusoidLayout), or "learned" (a trained table per stack, position
  // p at row p + 2: mBART's); LayerNorm epsilon; whether each stack ends with a LayerNorm;
  // whether embeddings + positions are normalised (`embed_norm`, mBART's
  // layernorm_embedding); whether embeddings are scaled by sqrt(d_model) (mBART's
  // scale_embedding: the paper's, and M2M100's, are).
  std::string positions = "interleaved";
  float norm_eps = 1e-5f;
  bool final_norm = true, embed_norm = false, scale_embedding = true;
  // Decoding: the start and end symbols, and the search's rules. tfm's own models start
  // from bos 2 and end with eos 3; a Hugging Face model keeps its generation_config's:
  // `hf_search` (BeamSearchScorer: an end symbol counts only among the beam's best K, the K best
  // finished are kept, a sentence is done when no open beam can beat them), `forced_eos`
  // (the last token at the length limit is the end symbol), `renormalize` (log-probabilities
  // over the tokens allowed), `max_length` (start symbol included; 0: none).
  int bos_id = 2, eos_id = 3;
  bool hf_search = false, forced_eos = false, renormalize = false;
  int64_t max_length = 0;

  nn::LayerOptions layer_options() const;
  ops::SinusoidLayout sinusoid_layout() const;
  nn::PositionOptions position_options() const;
  std::string to_json() const;
  // Parses the settings `text` gives over `base` (absent fields keep base's values) and,
  // unless the caller checks fields first, validates the result; `origin` names the
  // source in error messages.
  static TransformerConfig from_json(const std::string& text, const std::string& origin, const TransformerConfig& base,
                                     bool validate = true);
  static TransformerConfig from_json(const std::string& text, const std::string& origin);  // over the defaults
  static TransformerConfig from_file(const std::string& path, const TransformerConfig& base, bool validate = true);
  // Every field within its bounds (models/json_fields.h), the weights within kMaxWeightFloats.
  void validate(const std::string& origin) const;
  // About how many floats the weights and position tables take (tied weights counted apart).
  int64_t weight_floats() const;
};

// Named sizes: "base" is the paper's (512 / 2048 / 8 heads / 6 + 6 layers),
// "small" is 256 / 1024 / 4 heads / 3 + 3 layers. Vocabulary sizes are left 0.
TransformerConfig preset(const std::string& name);

}  // namespace tfm::models
