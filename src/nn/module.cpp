#include "nn/module.h"

#include <unordered_set>

#include "ops/elementwise.h"

namespace tfm::nn {

std::string Module::join(const std::string& prefix, const std::string& name) {
  if (prefix.empty()) return name;
  if (name.empty()) return prefix;
  return prefix + "." + name;
}

void Module::set_path(const std::string& path) {
  path_ = path;
  for (auto& [name, child] : children_) child->set_path(join(path_, name));
}

void Module::share(const std::shared_ptr<Shared>& shared) {
  shared_ = shared;
  for (auto& [name, child] : children_) child->share(shared);
}

void Module::register_parameter(const std::string& name, Tensor& member) {
  if (!member.requires_grad()) member.set_requires_grad(true);
  params_.emplace_back(name, &member);
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [name, t] : params_) out.emplace_back(join(prefix, name), *t);
  for (const auto& [name, child] : children_) child->collect(join(prefix, name), out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> all, unique;
  collect("", all);
  std::unordered_set<const TensorImpl*> seen;
  for (auto& entry : all)
    if (seen.insert(entry.second.impl()).second) unique.push_back(std::move(entry));
  return unique;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

Tensor Module::dropout(const Tensor& x, float p) const {
  if (!training_ || p == 0.0f) return x;
  return ops::dropout(x, p, dropout_rng().next_u64());
}

}  // namespace tfm::nn
