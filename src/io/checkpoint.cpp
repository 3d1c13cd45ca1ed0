#include "io/checkpoint.h"

#include <algorithm>
#include <set>

#include "tensor/error.h"

namespace tfm::io {

void save_checkpoint(const std::string& path, const NamedTensors& parameters, const Checkpoint& extra) {
  NamedTensors tensors = parameters;
  for (const auto& [name, t] : extra.optimizer) tensors.emplace_back(kOptimizerPrefix + name, t);
  std::map<std::string, std::string> metadata = extra.metadata;
  metadata[kConfigKey] = extra.config_json;
  metadata[kModelKindKey] = extra.model_kind;
  metadata["format"] = "pt";
  if (!extra.train_state.empty()) metadata[kTrainStateKey] = extra.train_state;
  write_safetensors(path, tensors, metadata);
}

SafeTensors read_weights(const std::string& path) {
  return read_safetensors(path, [](const std::string& name) { return name.rfind(kOptimizerPrefix, 0) == 0; });
}

namespace {

// The file's tensor for parameter `name`, checked against it, in f32.
Tensor value_for(const std::string& name, const Tensor& param, const SafeTensors& file, const std::string& origin) {
  const Tensor* src = file.find(name);
  TFM_CHECK(src, origin << ": missing parameter '" << name << "'");
  TFM_CHECK(src->shape() == param.shape(), origin << ": parameter '" << name << "' has shape " << shape_str(src->shape())
                                                  << " in the file but " << shape_str(param.shape()) << " in the model");
  const DType t = src->dtype();
  TFM_CHECK(t == DType::f32 || t == DType::f16 || t == DType::bf16,
            origin << ": parameter '" << name << "' holds " << to_string(t) << " values; weights are f32, f16 or bf16");
  return to_f32(*src);  // Hugging Face checkpoints may hold f16 or bf16
}

void refuse_unexpected(const NamedTensors& parameters, const SafeTensors& file, const std::string& origin) {
  std::set<std::string> expected;
  for (const auto& [name, param] : parameters) expected.insert(name);
  for (const auto& [name, t] : file.tensors)
    TFM_CHECK(expected.count(name) || name.rfind(kOptimizerPrefix, 0) == 0, origin << ": unexpected parameter '" << name << "'");
}

// `value`'s storage can become `param`'s: both whole, contiguous buffers of their own on
// one device (not a view into a larger tensor, nor a model's flat parameter buffer).
bool can_take(const Tensor& param, const Tensor& value) {
  auto whole = [](const Tensor& t) {
    return t.is_contiguous() && t.impl()->offset == 0 && t.impl()->storage.use_count() == 1 &&
           t.impl()->storage->bytes() == static_cast<size_t>(t.numel()) * size_of(t.dtype());
  };
  return value.device() == param.device() && value.dtype() == param.dtype() && whole(param) && whole(value);
}

}  // namespace

void load_parameters(const NamedTensors& parameters, const SafeTensors& file, const std::string& origin) {
  for (auto [name, param] : parameters) param.copy_from(value_for(name, param, file, origin));
  refuse_unexpected(parameters, file, origin);
}

void take_parameters(const NamedTensors& parameters, SafeTensors& file, const std::string& origin) {
  refuse_unexpected(parameters, file, origin);
  for (auto [name, param] : parameters) {
    Tensor value = value_for(name, param, file, origin);
    for (auto& [n, t] : file.tensors)
      if (n == name) t = Tensor();  // (value holds it where it is f32)
    if (can_take(param, value)) param.impl()->storage = value.impl()->storage;
    else param.copy_from(value);
  }
  file.tensors.clear();
}

Checkpoint checkpoint_info(const SafeTensors& file, const std::string& origin) {
  Checkpoint c;
  auto meta = [&](const char* key) {
    auto it = file.metadata.find(key);
    return it == file.metadata.end() ? std::string() : it->second;
  };
  c.config_json = meta(kConfigKey);
  TFM_CHECK(!c.config_json.empty(), origin << ": no model configuration in the metadata ('" << kConfigKey << "')");
  c.model_kind = meta(kModelKindKey);
  c.train_state = meta(kTrainStateKey);
  c.metadata = file.metadata;
  const std::string prefix = kOptimizerPrefix;
  for (const auto& [name, t] : file.tensors)
    if (name.rfind(prefix, 0) == 0) c.optimizer.emplace_back(name.substr(prefix.size()), t);
  return c;
}

std::string kind_name(const std::string& model_kind) {
  if (model_kind.empty()) return "unlabelled";
  return model_kind == "encoder_decoder" ? "translation" : model_kind;
}

void check_model_kind(const std::string& model_kind, std::initializer_list<std::string_view> kinds, const std::string& origin,
                      const std::string& wanted) {
  TFM_CHECK(std::find(kinds.begin(), kinds.end(), model_kind) != kinds.end(),
            origin << ": is " << (model_kind.empty() ? std::string("a checkpoint of no stated kind (no '") + kModelKindKey + "' in its metadata)"
                                                     : "a " + kind_name(model_kind) + " checkpoint")
                   << ", not " << wanted);
}

void check_holds_model(const SafeTensors& file, int64_t weight_floats, const std::string& origin) {
  int64_t held = 0;
  for (const auto& [name, t] : file.tensors) held += t.numel();
  // Twice what is held, and a million floats, of slack: the estimate counts position
  // tables that sinusoidal models compute rather than store.
  TFM_CHECK(weight_floats <= 2 * held + (int64_t{1} << 20),
            origin << ": its configuration describes a model of about " << weight_floats << " weights, but the file holds only " << held);
}

}  // namespace tfm::io
