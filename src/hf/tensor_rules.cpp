#include "hf/tensor_rules.h"

#include <algorithm>
#include <map>
#include <set>

#include "tensor/error.h"

namespace tfm::hf {

namespace {

// [rows, cols] -> [cols, rows]
Tensor transposed(const Tensor& t) {
  TFM_CHECK(t.dim() == 2, "a transposed weight must be a matrix, got " << shape_str(t.shape()));
  const int64_t rows = t.size(0), cols = t.size(1);
  Tensor out = Tensor::empty({cols, rows});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out.data()[c * rows + r] = t.data()[r * cols + c];
  return out;
}

// The tensors stacked by rows (dimension 0).
Tensor stacked(const std::vector<Tensor>& parts) {
  Shape shape = parts[0].shape();
  shape[0] = 0;
  for (const Tensor& p : parts) shape[0] += p.size(0);
  Tensor out = Tensor::empty(shape);
  int64_t at = 0;
  for (const Tensor& p : parts) {
    std::copy(p.data(), p.data() + p.numel(), out.data() + at);
    at += p.numel();
  }
  return out;
}

// The rows of each of `rule`'s stacked tensors when tfm's parameter has `rows` rows.
std::vector<int64_t> rows_of(const TensorRule& rule, int64_t rows) {
  if (!rule.rows.empty()) return rule.rows;
  return std::vector<int64_t>(rule.hf.size(), rows / static_cast<int64_t>(rule.hf.size()));
}

// `t` cut into blocks of `rows` rows.
std::vector<Tensor> unstacked(const Tensor& t, const std::vector<int64_t>& rows) {
  const int64_t row = t.numel() / t.size(0);
  std::vector<Tensor> parts;
  int64_t at = 0;
  for (const int64_t n : rows) {
    Shape shape = t.shape();
    shape[0] = n;
    Tensor p = Tensor::empty(shape);
    std::copy(t.data() + at * row, t.data() + (at + n) * row, p.data());
    parts.push_back(p);
    at += n;
  }
  return parts;
}

// The shape of `rule`'s Hugging Face tensor `i` when tfm's parameter is `want`.
Shape hf_shape_of(const TensorRule& rule, Shape want, size_t i) {
  if (!rule.hf_shape.empty()) return rule.hf_shape;
  if (rule.transposed) std::reverse(want.begin(), want.end());
  const size_t stacked = rule.transposed ? 1 : 0;
  if (rule.hf.size() > 1) want[stacked] = rows_of(rule, want[stacked])[i];
  return want;
}

std::string names(const std::vector<std::string>& hf) {
  std::string out;
  for (const std::string& n : hf) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

// Where `rule`'s tensor `name` is stored: under its name, else under the first of its
// aliases the checkpoint has; a missing one is named with its aliases.
std::map<std::string, Tensor>::const_iterator stored(const std::map<std::string, Tensor>& by_name, const TensorRule& rule,
                                                     const std::string& name, const std::string& origin) {
  auto it = by_name.find(name);
  for (size_t i = 0; it == by_name.end() && i < rule.aliases.size(); ++i) it = by_name.find(rule.aliases[i]);
  TFM_CHECK(it != by_name.end(), origin << ": missing tensor '" << name << "'"
                                        << (rule.aliases.empty() ? "" : " (nor its tied copies " + names(rule.aliases) + ")")
                                        << ", which config.json's architecture needs");
  return it;
}

// A Hugging Face tensor of the wrong shape, named with the shape config.json implies.
void expect_shape(const Shape& got, const Shape& expected, const std::string& name, const std::string& origin) {
  TFM_CHECK(got == expected, origin << ": tensor '" << name << "' has shape " << shape_str(got) << ", which does not fit config.json ("
                                    << shape_str(expected) << " expected)");
}
void expect_shape(const Tensor& t, const Shape& expected, const std::string& name, const std::string& origin) {
  expect_shape(t.shape(), expected, name, origin);
}

}  // namespace

void add_weight_and_bias(std::vector<TensorRule>& rules, const std::string& tfm, const std::string& hf, bool transposed) {
  rules.push_back({tfm + ".weight", {hf + ".weight"}, transposed});
  rules.push_back({tfm + ".bias", {hf + ".bias"}});
}

void add_stacked_qkv(std::vector<TensorRule>& rules, const std::string& tfm, const std::string& q, const std::string& k,
                     const std::string& v) {
  rules.push_back({tfm + ".in_proj_weight", {q + ".weight", k + ".weight", v + ".weight"}});
  rules.push_back({tfm + ".in_proj_bias", {q + ".bias", k + ".bias", v + ".bias"}});
}

void add_bert_style_layer(std::vector<TensorRule>& rules, const std::string& tfm, const std::string& hf, const std::string& attention,
                          const std::string& norm1, const std::string& norm2) {
  add_stacked_qkv(rules, tfm + ".self_attn", hf + attention + ".query", hf + attention + ".key", hf + attention + ".value");
  add_weight_and_bias(rules, tfm + ".self_attn.out_proj", hf + ".attention.output.dense");
  add_weight_and_bias(rules, tfm + ".norm1", hf + norm1);
  add_weight_and_bias(rules, tfm + ".linear1", hf + ".intermediate.dense");
  add_weight_and_bias(rules, tfm + ".linear2", hf + ".output.dense");
  add_weight_and_bias(rules, tfm + ".norm2", hf + norm2);
}

io::NamedTensors to_tfm(io::NamedTensors hf, const std::vector<TensorRule>& rules, const io::NamedTensors& shapes,
                        bool (*ignored)(const std::string& name), const std::string& origin) {
  std::vector<std::string> in_file;
  std::map<std::string, Tensor> by_name;
  for (auto& [name, t] : hf) in_file.push_back(name), by_name.emplace(name, std::move(t));
  hf.clear();
  // How many rules' parts read each stored tensor: it is dropped once the last one has, so
  // that the checkpoint and its converted copy are never held whole at once (Qwen2-0.5B's
  // fused q/k/v and gate/up tensors: 0.9 GiB more at the loading's peak).
  std::map<std::string, int> readers;
  for (const TensorRule& rule : rules)
    for (const std::string& name : rule.hf) ++readers[stored(by_name, rule, name, origin)->first];
  std::map<std::string, Shape> wanted;
  for (const auto& [name, t] : shapes) wanted[name] = t.shape();
  std::set<std::string> used;
  io::NamedTensors out;
  for (const TensorRule& rule : rules) {
    std::vector<Tensor> parts;
    std::vector<std::string> read;  // the names they were stored under
    for (const std::string& name : rule.hf) {
      const auto it = stored(by_name, rule, name, origin);
      const DType t = it->second.dtype();
      TFM_CHECK(t == DType::f32 || t == DType::f16 || t == DType::bf16, origin << ": tensor '" << it->first << "' holds " << to_string(t)
                                                                                << " values; weights are f32, f16 or bf16");
      parts.push_back(io::to_f32(it->second));  // f32 tensors are used as read, not copied
      used.insert(it->first);
      read.push_back(it->first);
      if (--readers[it->first] == 0) by_name.erase(it);
    }
    const Shape& want = wanted.at(rule.tfm);
    for (size_t i = 0; i < parts.size() && rule.hf_shape.empty(); ++i)  // each stacked part its own rows (grouped-query K/V)
      expect_shape(parts[i], hf_shape_of(rule, want, i), read[i], origin);
    Tensor t = parts.size() == 1 ? parts[0] : stacked(parts);
    if (rule.transposed) t = transposed(t);
    if (!rule.hf_shape.empty() && t.numel() != shape_numel(want)) expect_shape(parts[0], rule.hf_shape, read[0], origin);
    out.emplace_back(rule.tfm, t.shape() == want ? t : Tensor::from_vector(want, t.to_vector()));
  }
  for (const std::string& name : in_file)
    TFM_CHECK(used.count(name) || ignored(name), origin << ": unexpected tensor '" << name << "' (not part of the architecture config.json describes)");
  return out;
}

io::NamedTensors to_hf(const io::NamedTensors& tfm, const std::vector<TensorRule>& rules, const std::string& origin) {
  std::map<std::string, Tensor> by_name(tfm.begin(), tfm.end());
  io::NamedTensors out;
  for (const TensorRule& rule : rules) {
    auto it = by_name.find(rule.tfm);
    TFM_CHECK(it != by_name.end(), origin << ": has no parameter '" << rule.tfm << "'");
    Tensor t = it->second.clone();
    if (rule.transposed) t = transposed(t);
    if (!rule.hf_shape.empty()) t = Tensor::from_vector(rule.hf_shape, t.to_vector());
    const std::vector<Tensor> parts = rule.hf.size() == 1 ? std::vector<Tensor>{t} : unstacked(t, rows_of(rule, t.size(0)));
    for (size_t i = 0; i < parts.size(); ++i) out.emplace_back(rule.hf[i], parts[i]);
  }
  return out;
}

}  // namespace tfm::hf
