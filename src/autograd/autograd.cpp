#include "autograd/autograd.h"

#include <unordered_map>
#include <unordered_set>

#include "tensor/error.h"
#include "tensor/strided.h"

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
  node->inputs.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    Edge& e = node->inputs.emplace_back();
    if (!t.defined()) continue;
    e.shape = t.shape();
    if (t.impl()->grad_fn)
      e.producer = t.impl()->grad_fn;
    else if (t.impl()->requires_grad)
      e.leaf = t.impl_ptr();
  }
  node->backward = std::move(backward);
  output.impl()->grad_fn = std::move(node);
  return output;
}

Tensor record_view(Tensor output, const char* name, const Tensor& input, AccumulateFn accumulate) {
  output = record(output, name, {input}, nullptr);
  if (output.impl()->grad_fn) output.impl()->grad_fn->accumulate = std::move(accumulate);
  return output;
}

namespace {

// Post-order DFS without recursion (graphs of deep models are thousands of nodes).
std::vector<std::shared_ptr<Node>> topological_order(const std::shared_ptr<Node>& root) {
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<Node*> seen;
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack{{root, 0}};
  seen.insert(root.get());
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs.size()) {
      const std::shared_ptr<Node>& child = node->inputs[next++].producer;
      if (child && seen.insert(child.get()).second) stack.push_back({child, 0});
      continue;
    }
    order.push_back(std::move(node));
    stack.pop_back();
  }
  return order;  // children before parents
}

// The first gradient of a leaf in its slot (zeros there first where `zero`), or null
// where it has no slot.
std::shared_ptr<TensorImpl> take_slot(TensorImpl* leaf, bool zero) {
  if (!leaf->grad_slot) return nullptr;
  if (zero) Tensor(leaf->grad_slot).fill(0.0f);
  return leaf->grad_slot;
}

void accumulate_leaf(TensorImpl* leaf, const Tensor& g) {
  if (!leaf->grad) {
    if (std::shared_ptr<TensorImpl> slot = take_slot(leaf, /*zero=*/false)) {
      Tensor(slot).copy_from(g);
      leaf->grad = std::move(slot);
    } else {
      leaf->grad = g.clone().impl_ptr();  // own the buffer: g may be shared with other grads
    }
  } else {
    Tensor acc(leaf->grad);
    strided_add(g, acc);
  }
}

}  // namespace

// How many nodes of the pass still have an edge to each leaf; a leaf's gradient is
// complete once none has.
class LeafCounts {
 public:
  LeafCounts(const std::vector<std::shared_ptr<Node>>& order, const LeafDone& done) : done_(done) {
    if (!done_) return;
    for (const std::shared_ptr<Node>& node : order)
      for (const Edge& e : node->inputs)
        if (e.leaf) ++pending_[e.leaf.get()];
  }
  // `node` has run (or no gradient reached it): its leaves wait for one node fewer.
  void ran(const Node& node) {
    if (!done_) return;
    for (const Edge& e : node.inputs)
      if (e.leaf && --pending_[e.leaf.get()] == 0) done_(e.leaf.get());
  }

 private:
  const LeafDone& done_;
  std::unordered_map<TensorImpl*, int64_t> pending_;
};

void backward(const Tensor& root, const LeafDone& leaf_done) {
  TFM_CHECK(root.numel() == 1, "backward() needs a scalar, got shape " << shape_str(root.shape()));
  TFM_CHECK(root.requires_grad(), "backward() on a tensor that does not require grad");
  if (!root.impl()->grad_fn) {
    accumulate_leaf(root.impl(), Tensor::ones(root.shape(), root.device()));
    if (leaf_done) leaf_done(root.impl());
    return;
  }
  TFM_CHECK(root.impl()->grad_fn->backward, "backward() through a graph that a previous backward() already freed");
  NoGradGuard no_grad;  // backward closures compute plain tensors, never new graph
  std::vector<std::shared_ptr<Node>> order = topological_order(root.impl()->grad_fn);
  LeafCounts leaves(order, leaf_done);
  std::unordered_map<Node*, Tensor> grads;
  // Nodes whose accumulated gradient is a buffer of its own, made here (a sum, or a
  // view's AccumulateFn), which may be added to in place. Any other may be shared: an
  // op's backward can hand one tensor to several inputs.
  std::unordered_set<Node*> owned;
  grads[order.back().get()] = Tensor::ones(root.shape(), root.device());
  for (size_t i = order.size(); i-- > 0;) {
    const std::shared_ptr<Node> node = std::move(order[i]);
    auto it = grads.find(node.get());
    if (it == grads.end()) {  // no path from root carries gradient here
      leaves.ran(*node);
      continue;
    }
    Tensor g = std::move(it->second);
    grads.erase(it);
    owned.erase(node.get());
    TFM_CHECK(node->backward || node->accumulate, "backward() through a graph that a previous backward() already freed");
    if (node->accumulate) {
      const Edge& in = node->inputs.at(0);
      if (in.leaf) {  // a leaf's .grad is always its own buffer (accumulate_leaf)
        std::shared_ptr<TensorImpl> held = in.leaf->grad ? in.leaf->grad : take_slot(in.leaf.get(), /*zero=*/true);
        Tensor acc = held ? Tensor(held) : Tensor();
        node->accumulate(g, acc);
        in.leaf->grad = acc.impl_ptr();
      } else if (in.producer) {
        Tensor& acc = grads[in.producer.get()];
        if (acc.defined() && !owned.count(in.producer.get())) acc = acc.clone();
        node->accumulate(g, acc);
        owned.insert(in.producer.get());
      }
      node->accumulate = nullptr;
      leaves.ran(*node);
      node->inputs.clear();
      continue;
    }
    std::vector<Tensor> input_grads = node->backward(g);
    node->backward = nullptr;  // frees the tensors it saved
    TFM_CHECK(input_grads.size() == node->inputs.size(), "op " << node->name << " returned the wrong number of gradients");
    for (size_t k = 0; k < input_grads.size(); ++k) {
      const Edge& in = node->inputs[k];
      const Tensor& ig = input_grads[k];
      if (!ig.defined() || (!in.producer && !in.leaf)) continue;
      TFM_CHECK(ig.shape() == in.shape, "op " << node->name << " produced a gradient of shape " << shape_str(ig.shape())
                                              << " for an input of shape " << shape_str(in.shape));
      if (in.leaf) {
        accumulate_leaf(in.leaf.get(), ig);
        continue;
      }
      auto [slot, inserted] = grads.try_emplace(in.producer.get(), ig);
      if (inserted) continue;
      if (owned.count(in.producer.get())) {
        strided_add(ig, slot->second);
      } else {  // a buffer of its own, which later gradients may be added to in place
        slot->second = strided_sum(slot->second, ig);
        owned.insert(in.producer.get());
      }
    }
    leaves.ran(*node);
    node->inputs.clear();  // lets the nodes below go as soon as their own backward has run
  }
}

}  // namespace tfm::autograd
