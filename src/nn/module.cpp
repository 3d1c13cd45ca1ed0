#include "nn/module.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ops/convert.h"
#include "ops/elementwise.h"
#include "tensor/error.h"

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

void Module::register_parameter(const std::string& name, Tensor& member, ReadBy read_by) {
  if (!member.requires_grad()) member.set_requires_grad(true);
  params_.emplace_back(name, &member);
  if (read_by == ReadBy::products) product_weights_.push_back(&member);
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

void FlatParameters::zero_stale_gradients() const {
  for (const Entry& e : entries)
    if (!e.param.impl()->grad) Tensor(e.param.impl()->grad_slot).fill(0.0f);
}

std::vector<std::pair<int64_t, int64_t>> FlatParameters::buckets(int64_t max_floats) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    const int64_t end = i + 1 < entries.size() ? entries[i + 1].offset : e.offset + e.param.numel();  // the padding too
    if (!out.empty() && end - out.back().first <= max_floats) out.back().second = end;
    else out.emplace_back(e.offset, end);
  }
  return out;
}

std::vector<int64_t> FlatParameters::cuts(int parts) const {
  const int64_t total = values.numel();
  std::vector<int64_t> out{0};
  size_t e = 0;
  for (int p = 1; p < parts; ++p) {  // the first parameter starting at or past p / parts of the buffer
    while (e < entries.size() && entries[e].offset < total * p / parts) ++e;
    out.push_back(std::max(out.back(), e < entries.size() ? entries[e].offset : total));
  }
  out.push_back(total);
  return out;
}

const FlatParameters& Module::flatten_parameters() {
  TFM_CHECK(path_.empty(), "flatten_parameters: '" << path_ << "' is part of a model; flatten the whole model");
  if (shared_->flat) return *shared_->flat;
  std::vector<std::pair<std::string, Tensor>> named = named_parameters();
  std::reverse(named.begin(), named.end());
  // Each parameter starts on a 64-byte boundary, as a buffer of its own would: the
  // products read weights at their aligned speed.
  constexpr int64_t kAlign = 16;
  auto aligned = [](int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; };
  int64_t total = 0;
  for (const auto& [name, p] : named) total += aligned(p.numel());
  auto flat = std::make_unique<FlatParameters>();
  flat->values = Tensor::zeros({total}, device());  // the gaps between parameters stay 0
  flat->grads = Tensor::zeros({total}, device());
  int64_t offset = 0;
  for (auto& [name, p] : named) {
    const Shape strides = contiguous_strides(p.shape());
    make_view(flat->values, p.shape(), strides, offset).copy_from(p);
    TensorImpl* impl = p.impl();  // tied parameters share it: one move serves every name
    impl->storage = flat->values.impl()->storage;
    impl->strides = strides;
    impl->offset = offset;
    impl->grad_slot = make_view(flat->grads, p.shape(), strides, offset).impl_ptr();
    if (impl->grad) {  // a gradient made before: into the slot
      Tensor(impl->grad_slot).copy_from(Tensor(impl->grad));
      impl->grad = impl->grad_slot;
    }
    flat->entries.push_back({name, p, offset});
    offset += aligned(p.numel());
  }
  shared_->flat = std::move(flat);
  return *shared_->flat;
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

void Module::collect_members(std::vector<std::pair<Tensor*, bool>>& out) {
  for (auto& [name, t] : params_) out.emplace_back(t, true);
  for (Tensor* t : buffers_) out.emplace_back(t, false);
  for (auto& [name, child] : children_) child->collect_members(out);
}

void Module::collect_readers(std::unordered_map<const TensorImpl*, std::pair<Tensor, bool>>& out) const {
  for (const auto& [name, t] : params_) {
    const bool products = std::find(product_weights_.begin(), product_weights_.end(), t) != product_weights_.end();
    auto [it, fresh] = out.try_emplace(t->impl(), *t, products);
    if (!fresh) it->second.second = it->second.second && products;
  }
  for (const auto& [name, child] : children_) child->collect_readers(out);
}

int64_t Module::release_product_weights() {
  TFM_CHECK(path_.empty(), "release_product_weights: '" << path_ << "' is part of a model; release the whole model's");
  TFM_CHECK(products().frozen(), "release_product_weights: the model's weights are not frozen (it is for inference)");
  std::unordered_map<const TensorImpl*, std::pair<Tensor, bool>> weights;
  collect_readers(weights);
  int64_t released = 0;
  for (const auto& [impl, entry] : weights) {
    const auto& [w, products_only] = entry;
    const size_t bytes = static_cast<size_t>(w.numel()) * size_of(w.dtype());
    // A whole buffer of its own (not a view into a flat one: the release would take others' memory).
    const bool own = impl->offset == 0 && impl->storage.use_count() == 1 && impl->storage->bytes() == bytes;
    if (!products_only || !own || impl->storage->released() || !products().stands_in_for(w.address(), bytes)) continue;
    impl->storage->release();
    released += static_cast<int64_t>(bytes);
  }
  return released;
}

void Module::freeze() {
  for (auto& [name, p] : named_parameters()) p.set_requires_grad(false);
}

void Module::to(Device device) {
  TFM_CHECK(path_.empty(), "to: '" << path_ << "' is part of a model; move the whole model");
  TFM_CHECK(!shared_->flat, "to: the model's parameters are already flattened on " << to_string(this->device()) << "; move it before");
  std::vector<std::pair<Tensor*, bool>> members;
  collect_members(members);
  std::unordered_map<const TensorImpl*, Tensor> moved;  // tied members share one impl: one copy for all
  for (auto& [member, is_parameter] : members) {
    auto [it, fresh] = moved.try_emplace(member->impl());
    if (fresh) {
      it->second = ops::to(member->detach(), device);
      if (is_parameter) it->second.set_requires_grad(true);
    }
    *member = it->second;
  }
  products().drop_copies();  // they were of the old tensors
  shared_->device = device;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

Tensor Module::dropout(const Tensor& x, float p, const ops::PackedRows& packed) const {
  if (!training_ || p == 0.0f) return x;
  const int64_t samples = packed ? packed->batch() : x.size(0);
  TFM_CHECK(shared_->rows == 0 || samples == shared_->rows,
            path_ << ": dropout over " << samples << " rows where the batch has " << shared_->rows << " samples (set_batch_rows)");
  return ops::dropout(x, p, dropout_key(), packed);
}

void Module::set_batch_rows(int64_t first, int64_t rows) {
  TFM_CHECK(first >= 0 && rows >= 0, "set_batch_rows: rows [" << first << ", " << first + rows << ") is not a range of a batch");
  shared_->first_row = first, shared_->rows = rows;
}

DropoutKey Module::dropout_key() const { return {dropout_rng().next_u64(), shared_->first_row}; }

}  // namespace tfm::nn
