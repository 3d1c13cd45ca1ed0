#pragma once
// How a Hugging Face checkpoint's tensors become tfm's parameters and back: one rule per
// tfm parameter, naming the Hugging Face tensors it is made of. Most are the same
// tensor under another name; attention's query, key and value projections are stacked
// into tfm's fused in_proj (nn.MultiheadAttention's layout); GPT-2's Conv1D weights are
// stored [in, out] and transposed. The same rules read a checkpoint and write one.
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace tfm::hf {

struct TensorRule {
  std::string tfm;              // tfm's parameter name
  std::vector<std::string> hf;  // its Hugging Face tensor, or the query, key and value tensors stacked by rows
  bool transposed = false;      // stored [in, out] (GPT-2's Conv1D)
  Shape hf_shape = {};          // where it differs from tfm's by dimensions of 1 (Marian's final_logits_bias [1, vocab])
  // The other names of a tied tensor (one `hf` name): a checkpoint may store it under any
  // of them alone (transformers loads it so), as Marian's lm_head.weight for model.shared.weight.
  std::vector<std::string> aliases = {};
  // The rows of each stacked tensor where they differ (grouped-query attention: the query
  // projection's d_model rows, then kv_heads * head_dim for the key's and the value's);
  // empty: equal blocks.
  std::vector<int64_t> rows = {};
};

// Rules for a module that is a Linear or a LayerNorm on both sides: its weight and bias.
void add_weight_and_bias(std::vector<TensorRule>& rules, const std::string& tfm, const std::string& hf, bool transposed = false);
// Rules for an attention's in_proj_weight and in_proj_bias from three Linear projections.
void add_stacked_qkv(std::vector<TensorRule>& rules, const std::string& tfm, const std::string& q, const std::string& k,
                     const std::string& v);

// Rules for one layer of transformers' BertLayer/ViTLayer layout under `hf`: the
// query/key/value projections of `attention`, attention.output.dense, intermediate.dense and
// output.dense, and the LayerNorms `norm1` (around attention) and `norm2` (feed-forward).
void add_bert_style_layer(std::vector<TensorRule>& rules, const std::string& tfm, const std::string& hf, const std::string& attention,
                          const std::string& norm1, const std::string& norm2);

// tfm's parameters from Hugging Face's tensors (f32, f16 or bf16, widened to f32), each
// checked against `shapes` (the tfm model's parameters: the shape config.json implies).
// A tensor missing under its name and its aliases, or of a wrong shape, is one error naming
// the Hugging Face tensor; a tensor no rule reads is an error unless `ignored` says it may
// be left (tied copies, buffers). Each tensor of `hf` is dropped once the last rule that
// reads it has (pass it with std::move: the checkpoint and its conversion are then never
// held whole at once).
io::NamedTensors to_tfm(io::NamedTensors hf, const std::vector<TensorRule>& rules, const io::NamedTensors& shapes,
                        bool (*ignored)(const std::string& name), const std::string& origin);

// Hugging Face's tensors from tfm's parameters: the rules run backwards.
io::NamedTensors to_hf(const io::NamedTensors& tfm, const std::vector<TensorRule>& rules, const std::string& origin);

}  // namespace tfm::hf
