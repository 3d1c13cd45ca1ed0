#pragma once
// Module: the base of every layer, as torch.nn.Module. A module owns named
// parameters and named child modules; full dotted names ("encoder.layers.0.norm1.weight")
// are the PyTorch state_dict names, which checkpoints use.
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ops/elementwise.h"
#include "ops/linear_products.h"
#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace tfm::nn {

// A model's parameters as views into one contiguous buffer (each on a 64-byte
// boundary), and their gradients as views into another of the same layout, so that an optimiser or a reduction across
// processes works on a few large ranges instead of hundreds of tensors. The layout is
// the reverse of registration order, about the order in which backward makes the
// gradients final (the output layers' first).
struct FlatParameters {
  struct Entry {
    std::string name;
    Tensor param;
    int64_t offset = 0;  // into values and grads
  };
  Tensor values, grads;        // [total]
  std::vector<Entry> entries;  // in buffer order
  // Consecutive whole parameters (with the padding after each but the last) in ranges
  // [begin, end) of at most `max_floats` each (a larger parameter alone), in order.
  std::vector<std::pair<int64_t, int64_t>> buckets(int64_t max_floats) const;
  // The buffer cut into `parts` consecutive ranges of whole parameters of about equal
  // size (the sharded optimiser's shares): part p is [cuts[p], cuts[p + 1]).
  std::vector<int64_t> cuts(int parts) const;
  // Zeroes the gradient slots of the parameters that have no gradient this step (what
  // an earlier step left there), so that `grads` holds exactly this step's gradients.
  void zero_stale_gradients() const;
};

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Every parameter once (tied parameters under their first name), in registration order.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  int64_t num_parameters() const;
  // Moves every parameter of this model (the root) into one buffer, and gives each a
  // gradient slot in another (see FlatParameters); their values stay. Once is enough.
  const FlatParameters& flatten_parameters();
  // Null until flatten_parameters().
  const FlatParameters* flat_parameters() const { return shared_->flat.get(); }

  // Moves every parameter and buffer of this model (the root) to `device`, tied
  // parameters staying tied, as torch.nn.Module.to does; before flatten_parameters().
  void to(Device device);
  Device device() const { return shared_->device; }  // where its parameters are

  // Its parameters no longer require gradients (a base model under LoRA adapters: backward
  // then keeps no gradient of them). to() makes them trainable again.
  void freeze();

  // Inference, once the products are frozen and have made their copies (a forward pass):
  // the parameters that only products read, and whose frozen copies stand in for them,
  // give their memory back (tensor/storage.h's release), so that the model holds each
  // such weight once, in the form its products use (bf16, int8, or oneDNN's packed f32).
  // A weight something else reads too (an embedding table that is also the output head)
  // stays. The products' precision and device are then final: a released weight can
  // no longer be read, converted nor moved. Returns the bytes released.
  int64_t release_product_weights();

  void train(bool on = true);
  void eval() { train(false); }
  bool training() const { return training_; }
  // This module's dotted name inside the root module ("" for the root).
  const std::string& path() const { return path_; }
  // What every module under one root shares, one per model (as its training flag is),
  // so that two models in one process share nothing: the generator behind the dropout
  // masks (the Trainer seeds it and checkpoints its state), and how the linear layers
  // compute their products (precision; frozen weights' converted copies for inference).
  Rng& dropout_rng() const { return shared_->dropout_rng; }
  ops::LinearProducts& products() const { return shared_->products; }
  // The forward passes that follow compute rows [first, first + rows) of a batch split
  // across processes (data-parallel training): dropout draws the whole batch's masks for
  // those rows (tensor/rng.h's DropoutKey), so that N processes compute what one process
  // would. (0, 0), the default: the whole batch.
  void set_batch_rows(int64_t first, int64_t rows);

 protected:
  // Who reads a parameter's values: anything, or only ops::linear's products, of it or of
  // rows of it (release_product_weights may then free it where their copies stand in).
  enum class ReadBy { anything, products };
  // Registers a Tensor member as a parameter. The module refers to the member, so
  // re-assigning it later (weight tying) is seen by named_parameters().
  void register_parameter(const std::string& name, Tensor& member, ReadBy read_by = ReadBy::anything);
  // Registers a Tensor member that is state but not a parameter (a table computed once,
  // as PyTorch's register_buffer): moved by to(), never trained nor saved.
  void register_buffer(Tensor& member) { buffers_.push_back(&member); }
  // An empty name registers the child "inline": its parameters appear directly
  // under this module's prefix (PyTorch's TransformerEncoderLayer keeps linear1 and
  // linear2 at layer level, while we give the feed-forward block its own class).
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    children_.emplace_back(name, child);
    static_cast<Module*>(child.get())->set_path(join(path_, name));
    static_cast<Module*>(child.get())->share(shared_);
    return child;
  }
  // Inverted dropout with this module's training flag and the model's generator, over
  // x's rows (its samples), or the sequences packed in x [1, tokens, features].
  Tensor dropout(const Tensor& x, float p, const ops::PackedRows& packed = {}) const;
  // The next dropout stream, whose samples start at set_batch_rows()'s first row.
  DropoutKey dropout_key() const;

 private:
  static std::string join(const std::string& prefix, const std::string& name);
  void set_path(const std::string& path);
  struct Shared {
    Rng dropout_rng;
    ops::LinearProducts products;
    std::unique_ptr<FlatParameters> flat;
    int64_t first_row = 0, rows = 0;  // set_batch_rows
    Device device = Device::CPU;      // to()
  };
  void share(const std::shared_ptr<Shared>& shared);
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;
  void collect_members(std::vector<std::pair<Tensor*, bool>>& out);  // (member, is a parameter)
  // Each parameter once (tied ones share an impl), and whether products alone read it
  // wherever it is registered.
  void collect_readers(std::unordered_map<const TensorImpl*, std::pair<Tensor, bool>>& out) const;

  std::string path_;
  bool training_ = true;
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  std::vector<std::pair<std::string, Tensor*>> params_;
  std::vector<const Tensor*> product_weights_;  // the members of params_ registered ReadBy::products
  std::vector<Tensor*> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace tfm::nn
