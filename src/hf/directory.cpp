#include "hf/directory.h"

#include <filesystem>
#include <set>

#include "io/input_file.h"
#include "io/torch_checkpoint.h"
#include "tensor/error.h"

namespace tfm::hf {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSupported = "marian (opus-mt), m2m_100 (M2M100 and NLLB), mbart (mBART-50), gpt2, llama, mistral, qwen2, bert, vit and deit";

nlohmann::json parse_json_file(const std::string& path) { return io::read_json_file(path, int64_t{64} << 20, "JSON file"); }

// The two formats of weights transformers saves, in the order from_pretrained prefers
// them: one file, or shards that an index's weight_map lists.
struct WeightFormat {
  const char* file;
  const char* index;
  io::SafeTensors (*read)(const std::string& path);
};
constexpr WeightFormat kWeightFormats[] = {
    {"model.safetensors", "model.safetensors.index.json", [](const std::string& path) { return io::read_safetensors(path); }},
    {"pytorch_model.bin", "pytorch_model.bin.index.json", io::read_torch_checkpoint}};

void check_weights_present(const std::string& path) {
  const auto has = [&](const char* name) { return fs::exists(path + "/" + name); };
  for (const WeightFormat& f : kWeightFormats)
    if (has(f.file) || has(f.index)) return;
  TFM_CHECK(!has("tf_model.h5") && !has("flax_model.msgpack"),
            path << ": holds TensorFlow or Flax weights only; tfm reads model.safetensors or pytorch_model.bin (save the model from "
                    "transformers' PyTorch class with save_pretrained)");
  throw Error(path + ": holds no model.safetensors or pytorch_model.bin (nor their shards' index)");
}

// The name transformers loads a stored tensor under, whatever the model
// (_load_state_dict_into_model): TensorFlow-era LayerNorm names, which bert-base-uncased's
// model.safetensors still has (LayerNorm.gamma, LayerNorm.beta), become weight and bias;
// "beta" first where a name holds both, every occurrence replaced.
std::string transformers_name(const std::string& name) {
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string out = name;
    for (size_t at = out.find(from); at != std::string::npos; at = out.find(from, at + to.size())) out.replace(at, from.size(), to);
    return out;
  };
  if (name.find("beta") != std::string::npos) return replaced("beta", "bias");
  if (name.find("gamma") != std::string::npos) return replaced("gamma", "weight");
  return name;
}

// Every tensor under transformers' name; a renamed one replaces a tensor already stored
// under its new name, as it does there.
io::NamedTensors with_transformers_names(io::NamedTensors all) {
  std::set<std::string> renamed;
  for (const auto& [name, t] : all)
    if (transformers_name(name) != name) renamed.insert(transformers_name(name));
  io::NamedTensors out;
  for (auto& [name, t] : all) {
    const std::string now = transformers_name(name);
    if (now == name && renamed.count(name)) continue;
    out.emplace_back(now, std::move(t));
  }
  return out;
}

}  // namespace

bool Directory::has(const std::string& name) const { return fs::exists(file(name)); }

nlohmann::json Directory::json_file(const std::string& name) const {
  return has(name) ? parse_json_file(file(name)) : nlohmann::json::object();
}

bool is_directory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

Directory open(const std::string& path) {
  TFM_CHECK(fs::exists(path + "/config.json"),
            path << ": is a directory without config.json; tfm reads a checkpoint file (.safetensors) or a Hugging Face model directory");
  // (A model's settings: 4 MiB hold the largest label lists; more is not a config.json.)
  Directory d{path, io::read_json_file(path + "/config.json", int64_t{4} << 20, "configuration"), ""};
  TFM_CHECK(d.config.is_object(), d.file("config.json") << ": is not a JSON object");
  d.model_type = setting<std::string>(d, "model_type", "");
  TFM_CHECK(!d.model_type.empty(), d.file("config.json") << ": names no model_type; tfm reads " << kSupported);
  static const std::set<std::string> known = {"marian", "m2m_100", "mbart", "gpt2", "llama", "mistral", "qwen2", "bert", "vit", "deit"};
  TFM_CHECK(known.count(d.model_type),
            path << ": is a Hugging Face '" << d.model_type << "' model; tfm reads " << kSupported
                 << " (other architectures need a converter of their own: see README, \"Models from Hugging Face\")");
  check_weights_present(path);
  return d;
}

namespace {

// Sharded weights: {"weight_map": {tensor name: shard file}}; each shard read once.
io::NamedTensors read_shards(const Directory& d, const WeightFormat& format) {
  const std::string index_file = d.file(format.index);
  const nlohmann::json index = d.json_file(format.index);
  TFM_CHECK(index.contains("weight_map") && index["weight_map"].is_object(), index_file << ": has no weight_map");
  std::set<std::string> shards;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    TFM_CHECK(shard.is_string(), index_file << ": the shard of '" << name << "' is not a file name");
    const std::string file = shard.get<std::string>();
    TFM_CHECK(fs::path(file).filename() == file, index_file << ": shard '" << file << "' is not a file of the directory");
    shards.insert(file);
  }
  io::NamedTensors all;
  for (const std::string& shard : shards)
    for (auto& entry : format.read(d.file(shard)).tensors) all.push_back(std::move(entry));
  return all;
}

}  // namespace

io::NamedTensors read_weights(const Directory& d) {
  for (const WeightFormat& f : kWeightFormats) {
    if (d.has(f.file)) return with_transformers_names(f.read(d.file(f.file)).tensors);
    if (d.has(f.index)) return with_transformers_names(read_shards(d, f));
  }
  throw Error(d.path + ": holds no model.safetensors or pytorch_model.bin (nor their shards' index)");
}

}  // namespace tfm::hf
