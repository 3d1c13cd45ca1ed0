#pragma once
// Checkpoints: one safetensors file holding the model's parameters under their
// PyTorch state_dict names, the model configuration as JSON in the metadata
// ("tfm.config"), and optionally the training state: optimizer moments under the
// "optimizer." prefix and the step, RNG and data position in "tfm.train_state".
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>

#include "io/safetensors.h"

namespace tfm::io {

inline constexpr const char* kConfigKey = "tfm.config";
inline constexpr const char* kModelKindKey = "tfm.model";
inline constexpr const char* kTrainStateKey = "tfm.train_state";
inline constexpr const char* kOptimizerPrefix = "optimizer.";

struct Checkpoint {
  std::string model_kind;   // e.g. "encoder_decoder"
  std::string config_json;  // the model's configuration
  NamedTensors optimizer;   // names without the "optimizer." prefix
  std::string train_state;  // JSON, empty for weights-only files
  std::map<std::string, std::string> metadata;  // anything else a model records (e.g. its vocabularies)
};

// A checkpoint file's weights and metadata without its optimizer moments (two thirds of
// a trained checkpoint's bytes, still read for the checksum): what inference and
// --init-from need, in a third of the memory.
SafeTensors read_weights(const std::string& path);

// `parameters` is a model's named_parameters(): its weights under their state_dict names.
void save_checkpoint(const std::string& path, const NamedTensors& parameters, const Checkpoint& extra);

// Copies every tensor of `parameters` (a model's named_parameters(), whose storage it
// writes) from `file`. Fails on the first missing, unexpected or wrongly shaped tensor
// with one line naming it.
void load_parameters(const NamedTensors& parameters, const SafeTensors& file, const std::string& origin);
// The same for a file read for this model alone, which it empties: a parameter takes the
// storage of its f32 tensor where that is a whole buffer of its own on the model's device
// (no copy: the model's own buffer goes), and every tensor is dropped once its parameter
// has its values, so that the file's f32 tensors and the model are not held twice.
void take_parameters(const NamedTensors& parameters, SafeTensors& file, const std::string& origin);

// Refuses a file whose configuration describes a model of far more than the weights
// it holds (`weight_floats` is the configuration's estimate): a crafted or mismatched
// configuration would otherwise allocate gigabytes before the first missing tensor.
void check_holds_model(const SafeTensors& file, int64_t weight_floats, const std::string& origin);

// The configuration, model kind, optimizer tensors and training state of a file.
Checkpoint checkpoint_info(const SafeTensors& file, const std::string& origin);

// What users call a model kind: "translation" for "encoder_decoder" (translation and the
// copy task), else the kind itself ("gpt", "bert", "vit").
std::string kind_name(const std::string& model_kind);

// Refuses a checkpoint whose model kind is none of `kinds` before its configuration is
// read: "<origin>: is a gpt checkpoint, not <wanted>".
void check_model_kind(const std::string& model_kind, std::initializer_list<std::string_view> kinds, const std::string& origin,
                      const std::string& wanted);

}  // namespace tfm::io
