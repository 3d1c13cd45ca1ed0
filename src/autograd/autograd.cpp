#include "autograd/autograd.h"

#include <unordered_map>
#include <unordered_set>

#include "ops/elementwise.h"
#include "tensor/error.h"

namespace tfm::autograd {

namespace {
thread_local bool g_grad_enabled = true;
}

bool grad_enabled() { return g_grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }

Tensor record(Tensor output, const char* name, std::vector<Tensor> inputs, BackwardFn backward) {
  if (!g_grad_enabled) return output;
  bool any = false;
  for (const Tensor& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!any) return output;
  auto node = std::make_shared<Node>();
  node->name = name;
  node->inputs = std::move(inputs);
  node->backward = std::move(backward);
  output.impl()->grad_fn = std::move(node);
  return output;
}

namespace {

// Post-order DFS without recursion (graphs of deep models are thousands of nodes).
// Holds owning pointers: freeing a node during backward must not free tensors still to visit.
std::vector<std::shared_ptr<TensorImpl>> topological_order(const std::shared_ptr<TensorImpl>& root) {
  std::vector<std::shared_ptr<TensorImpl>> order;
  std::unordered_set<TensorImpl*> seen;
  std::vector<std::pair<std::shared_ptr<TensorImpl>, size_t>> stack{{root, 0}};
  seen.insert(root.get());
  while (!stack.empty()) {
    auto& [impl, next] = stack.back();
    Node* node = impl->grad_fn.get();
    if (node && next < node->inputs.size()) {
      const std::shared_ptr<TensorImpl>& child = node->inputs[next++].impl_ptr();
      if (child && child->grad_fn && seen.insert(child.get()).second) stack.push_back({child, 0});
      continue;
    }
    order.push_back(std::move(impl));
    stack.pop_back();
  }
  return order;  // children before parents
}

void accumulate_leaf(TensorImpl* leaf, const Tensor& g) {
  if (!leaf->grad) {
    leaf->grad = g.clone().impl_ptr();  // own the buffer: g may be shared with other grads
  } else {
    Tensor acc(leaf->grad);
    ops::add_(acc, g);
  }
}

}  // namespace

void backward(const Tensor& root) {
  TFM_CHECK(root.numel() == 1, "backward() needs a scalar, got shape " << shape_str(root.shape()));
  TFM_CHECK(root.requires_grad(), "backward() on a tensor that does not require grad");
  if (!root.impl()->grad_fn) {
    accumulate_leaf(root.impl(), Tensor::ones(root.shape()));
    return;
  }
  NoGradGuard no_grad;  // backward closures compute plain tensors, never new graph
  std::vector<std::shared_ptr<TensorImpl>> order = topological_order(root.impl_ptr());
  std::unordered_map<TensorImpl*, Tensor> grads;
  grads[root.impl()] = Tensor::ones(root.shape());
  for (size_t i = order.size(); i-- > 0;) {
    TensorImpl* impl = order[i].get();
    auto it = grads.find(impl);
    if (it == grads.end()) continue;  // no path from root carries gradient here
    Tensor g = std::move(it->second);
    grads.erase(it);
    std::shared_ptr<Node> node = std::move(impl->grad_fn);  // frees saved tensors after use
    std::vector<Tensor> input_grads = node->backward(g);
    TFM_CHECK(input_grads.size() == node->inputs.size(), "op " << node->name << " returned the wrong number of gradients");
    for (size_t k = 0; k < input_grads.size(); ++k) {
      const Tensor& in = node->inputs[k];
      const Tensor& ig = input_grads[k];
      if (!in.defined() || !ig.defined() || !in.requires_grad()) continue;
      TFM_CHECK(ig.shape() == in.shape(), "op " << node->name << " produced a gradient of shape " << shape_str(ig.shape())
                                                  << " for an input of shape " << shape_str(in.shape()));
      TensorImpl* target = in.impl();
      if (!target->grad_fn) {
        if (target->requires_grad) accumulate_leaf(target, ig);
        continue;
      }
      auto [slot, inserted] = grads.try_emplace(target, ig);
      if (!inserted) slot->second = ops::add(slot->second, ig);
    }
  }
}

}  // namespace tfm::autograd
