#include "io/average.h"

#include <algorithm>
#include <filesystem>

#include "io/checkpoint.h"
#include "tensor/error.h"

namespace tfm::io {

namespace {

// A running sum of one checkpoint's weights, in double.
struct WeightSums {
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  std::vector<std::vector<double>> sums;
};

void start_sums(WeightSums& s, const SafeTensors& file) {
  for (const auto& [name, t] : file.tensors) {
    s.names.push_back(name);
    s.shapes.push_back(t.shape());
    const Tensor w = to_f32(t);
    s.sums.emplace_back(w.data(), w.data() + w.numel());
  }
}

void add_to_sums(WeightSums& s, const SafeTensors& file, const std::string& path) {
  TFM_CHECK(file.tensors.size() == s.names.size(),
            path << ": holds " << file.tensors.size() << " weights where the first checkpoint holds " << s.names.size());
  for (size_t i = 0; i < s.names.size(); ++i) {
    const Tensor* t = file.find(s.names[i]);
    TFM_CHECK(t, path << ": has no weight '" << s.names[i] << "' (the first checkpoint has)");
    TFM_CHECK(t->shape() == s.shapes[i],
              path << ": weight '" << s.names[i] << "' has shape " << shape_str(t->shape()) << ", not " << shape_str(s.shapes[i]));
    const Tensor w = to_f32(*t);
    const float* v = w.data();
    for (size_t j = 0; j < s.sums[i].size(); ++j) s.sums[i][j] += v[j];
  }
}

// The metadata every checkpoint of one model shares.
void check_same_model(const Checkpoint& first, const Checkpoint& other, const std::string& path, const std::string& first_path) {
  TFM_CHECK(other.model_kind == first.model_kind && other.config_json == first.config_json,
            path << ": is another model than " << first_path << " (its kind or configuration differs); average checkpoints of one run");
  for (const char* key : {"tfm.vocab", "tfm.tokenizer"}) {
    const auto a = first.metadata.find(key), b = other.metadata.find(key);
    const bool same = (a == first.metadata.end()) == (b == other.metadata.end()) && (a == first.metadata.end() || a->second == b->second);
    TFM_CHECK(same, path << ": has another vocabulary than " << first_path);
  }
}

// Step N of "step-N.safetensors", or -1 for another name.
long step_of(const std::string& name) {
  const std::string prefix = "step-", suffix = ".safetensors";
  if (!name.starts_with(prefix) || !name.ends_with(suffix) || name.size() == prefix.size() + suffix.size()) return -1;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 12 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return -1;
  return std::stol(digits);
}

}  // namespace

SafeTensors average_checkpoints(const std::vector<std::string>& paths) {
  TFM_CHECK(paths.size() >= 2, "averaging needs at least two checkpoints (got " << paths.size() << ")");
  SafeTensors first = read_weights(paths[0]);
  const Checkpoint model = checkpoint_info(first, paths[0]);
  WeightSums sums;
  start_sums(sums, first);
  std::map<std::string, std::string> metadata = first.metadata;
  first = {};  // only its sums are kept: one model in memory at a time besides them
  for (size_t i = 1; i < paths.size(); ++i) {
    SafeTensors file = read_weights(paths[i]);
    check_same_model(model, checkpoint_info(file, paths[i]), paths[i], paths[0]);
    add_to_sums(sums, file, paths[i]);
    metadata = file.metadata;
  }
  SafeTensors out;
  for (size_t i = 0; i < sums.names.size(); ++i) {
    Tensor w = Tensor::empty(sums.shapes[i]);
    float* v = w.data();
    for (size_t j = 0; j < sums.sums[i].size(); ++j) v[j] = static_cast<float>(sums.sums[i][j] / static_cast<double>(paths.size()));
    out.tensors.emplace_back(sums.names[i], w);
  }
  metadata.erase(kTrainStateKey);
  std::string sources;
  for (const auto& p : paths) sources += (sources.empty() ? "" : ", ") + std::filesystem::path(p).filename().string();
  metadata["tfm.averaged"] = sources;
  out.metadata = std::move(metadata);
  return out;
}

std::vector<std::string> last_step_checkpoints(const std::string& dir, int n) {
  TFM_CHECK(std::filesystem::is_directory(dir), dir << ": is not a run directory");
  std::vector<std::pair<long, std::string>> saves;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const long step = step_of(entry.path().filename().string());
    if (step >= 0) saves.emplace_back(step, entry.path().string());
  }
  std::sort(saves.begin(), saves.end());
  TFM_CHECK(static_cast<int>(saves.size()) >= n, dir << ": holds " << saves.size() << " step-N checkpoints, fewer than the " << n
                                                     << " asked for (a run keeps them with --save-every N)");
  std::vector<std::string> paths;
  for (size_t i = saves.size() - n; i < saves.size(); ++i) paths.push_back(saves[i].second);
  return paths;
}

}  // namespace tfm::io
