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

}  // namespace tfm::ops
