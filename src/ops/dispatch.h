#pragma once
// The one place where an op's kernel is chosen: from the table of the device its
// tensors are on (ops/kernels.h).
#include <functional>
#include <initializer_list>
#include <string>

#include "ops/kernels.h"

namespace tfm::ops {

// The kernels of `device`; a clear error where this build has none for it.
const Kernels& kernels(Device device);

// The device named `name` ("cpu", "cuda"; "sim", the simulated device of the tests),
// after checking that this build and machine can compute on it: otherwise a one-line
// error saying why ("device cuda: no usable GPU (...)").
Device usable_device(const std::string& name);

using Tensors = std::initializer_list<std::reference_wrapper<const Tensor>>;

// The device that every defined tensor of an op's call is on; a clear error where
// they are on different devices.
Device device_of(const char* op, Tensors tensors);

[[noreturn]] void fail_unimplemented(const char* op, Device device);

// `op`'s kernel `entry` for the device of `tensors`; a clear error where they are on
// different devices or that device does not implement it.
template <class Fn>
Fn kernel(const char* op, Fn Kernels::*entry, Tensors tensors) {
  const Device device = device_of(op, tensors);
  Fn fn = kernels(device).*entry;
  if (!fn) fail_unimplemented(op, device);
  return fn;
}

// A clear error unless `t` (the op's argument `what`) holds `want`.
void expect_dtype(const char* op, const char* what, const Tensor& t, DType want);
// The same for each defined one of `tensors`.
void expect_dtype(const char* op, const char* what, Tensors tensors, DType want);

// x itself where contiguous, else a contiguous copy (no autograd: for kernels' inputs).
Tensor dense(const Tensor& x);

// Index arguments (i32 or i64: token ids, row numbers) on `device`, contiguous, each
// checked to lie in [0, bound), else Error(outside(index)). Indices in host memory, where
// a batch's ids and a beam's reordering are made, are checked there and copied over
// without waiting for the device's queued work; indices already on another device come
// back to be checked, which waits for it. So the kernels take valid indices only.
Tensor checked_indices(const Tensor& indices, int64_t bound, Device device, const std::function<std::string(int64_t)>& outside);

}  // namespace tfm::ops
