#pragma once
// Opt-in reduced precision for the linear layers' matrix products (ops::linear).
//
//   f32   the default: single precision throughout.
//   bf16  inputs rounded to bfloat16 (8 bits of mantissa), products accumulated in
//         single precision; forward and backward, so for training and inference.
//         On CPUs with AVX-512 BF16 the products run at twice the f32 rate.
//   int8  inference only, as CTranslate2 does it: weights quantised per output row,
//         activations per input row at run time, both symmetric to [-127, 127];
//         exact int32 products, rescaled to single precision.
//
// Everything else (attention scores, softmax, layer norm, the loss, optimiser
// state, checkpoints) stays in single precision.
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

namespace tfm::ops {

enum class Precision { f32, bf16, int8 };

// "f32", "bf16" or "int8"; anything else is a clear error.
Precision parse_precision(const std::string& name);
std::string to_string(Precision p);

// A device's converted copies of a model's frozen weights, made and read by that
// device's product kernels (the CPU's: bf16 copies, int8 quantisations, oneDNN's
// packed f32 layout; ops/cpu/products.cpp).
class FrozenCopies {
 public:
  virtual ~FrozenCopies() = default;
  virtual size_t count() const = 0;
  // Whether the copies made so far hold everything the products read of the f32 bytes
  // [begin, begin + bytes) of a weight, so that its memory may go (nn::Module::
  // release_product_weights). A device whose copies cannot stand in for weights: never.
  virtual bool stands_in_for(const void* /*begin*/, size_t /*bytes*/) const { return false; }
};

// How one model's linear layers compute their products (ops::linear,
// ops::linear_cross_entropy): the precision, and, once frozen, the converted copies of
// the weights they see (contiguous tensors: parameters or views of them), made on first
// use and kept instead of being converted at every product. Each model owns one
// (nn::Module::products()), so models of different precisions live side by side in one
// process; translation workers share one model's copies.
class LinearProducts {
 public:
  explicit LinearProducts(Precision precision = Precision::f32) : precision_(precision) {}
  LinearProducts(const LinearProducts&) = delete;
  LinearProducts& operator=(const LinearProducts&) = delete;

  // f32 and never frozen: for products outside a model (tests, tools).
  static const LinearProducts& f32() {
    static const LinearProducts products;
    return products;
  }

  Precision precision() const { return precision_; }
  void set_precision(Precision p) {  // drops the copies made so far
    const std::lock_guard<std::mutex> lock(mutex_);
    precision_ = p;
    copies_.reset();
  }
  // Drops the copies made so far (the weights moved: nn::Module::to).
  void drop_copies() {
    const std::lock_guard<std::mutex> lock(mutex_);
    copies_.reset();
  }
  // The weights will not change from now on (inference): keep their converted copies.
  // Training, whose weights change every step, must not freeze.
  void freeze() { frozen_ = true; }
  bool frozen() const { return frozen_; }
  // How many converted copies are held (one per weight used, in the precision's form).
  size_t copies() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return copies_ ? copies_->count() : 0;
  }
  // The frozen copies made so far stand in for these bytes of a weight (FrozenCopies).
  bool stands_in_for(const void* begin, size_t bytes) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return copies_ && copies_->stands_in_for(begin, bytes);
  }
  // For the product kernels: the holder of the frozen copies, made by `make` on first
  // use; null while not frozen (the kernels then convert the weights at each product).
  FrozenCopies* frozen_copies(std::unique_ptr<FrozenCopies> (*make)()) const {
    if (!frozen_) return nullptr;
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!copies_) copies_ = make();
    return copies_.get();
  }

 private:
  Precision precision_;
  bool frozen_ = false;
  mutable std::mutex mutex_;
  mutable std::unique_ptr<FrozenCopies> copies_;
};

}  // namespace tfm::ops
