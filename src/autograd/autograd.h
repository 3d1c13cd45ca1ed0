#pragma once
// Reverse-mode, define-by-run automatic differentiation.
//
// Every differentiable op computes its output, then calls `record(...)` with the
// inputs and a closure that maps the output's gradient to one gradient per input.
// `backward(loss)` walks the recorded graph in reverse topological order. All
// gradients passed between nodes are contiguous tensors of the input's shape.
//
// The graph holds no activations of its own: a node points at the nodes that made
// its inputs (or at the leaf parameters), not at the inputs' data, so an
// intermediate result lives only as long as some closure saved it for backward
// (as in PyTorch). Everything else is freed during the forward pass.
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tfm::autograd {

using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

struct Node;

// Where the gradient of one input of a node goes: to the node that computed the
// input, or to a leaf that requires grad. Neither: no gradient flows there.
struct Edge {
  std::shared_ptr<Node> producer;
  std::shared_ptr<TensorImpl> leaf;
  Shape shape;  // the input's, which its gradient must have
};

// For a view of one input (a slice): adds the gradient straight into the input's
// gradient accumulated so far, `accumulated`, making it (zeros of the input's shape)
// if there is none yet. The q, k and v slices of one fused projection then fill one
// buffer, where returning an input-shaped gradient each meant three zero-filled
// buffers and two sums (~4% of a `base` training step).
using AccumulateFn = std::function<void(const Tensor& grad_output, Tensor& accumulated)>;

struct Node {
  std::string name;          // the op's name, for error messages
  std::vector<Edge> inputs;  // one per input, in the order BackwardFn returns grads
  BackwardFn backward;       // emptied (with the tensors it saved) once it has run
  AccumulateFn accumulate;   // instead of backward, for views of one input
};

// Whether ops record graph nodes on this thread (see NoGradGuard).
bool grad_enabled();

// Disables graph recording in its scope (inference, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Attaches a node to `output` if grad mode is on and any input requires grad.
// The closure must not capture `output` itself (that would be a reference cycle);
// capture `output.detach()` when the backward needs the result.
Tensor record(Tensor output, const char* name, std::vector<Tensor> inputs, BackwardFn backward);

// The same for a view of `input` whose gradient is added in place (see AccumulateFn).
Tensor record_view(Tensor output, const char* name, const Tensor& input, AccumulateFn accumulate);

// Called once for each leaf the graph reaches, as soon as its gradient of this pass is
// complete (the leaf itself, whose .grad() may be null where no gradient reached it), so
// that a reduction of finished gradients can start while the pass goes on.
using LeafDone = std::function<void(TensorImpl* leaf)>;

// Accumulates d(root)/d(leaf) into every leaf's .grad(). Frees the graph as it goes.
void backward(const Tensor& root, const LeafDone& leaf_done = nullptr);

}  // namespace tfm::autograd
