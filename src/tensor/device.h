#pragma once
// Where a tensor's memory lives: the host (CPU), an NVIDIA GPU (CUDA, in builds with
// TFM_CUDA), or the simulated device (Sim).
//
// The simulated device keeps its memory on the host and runs the CPU's kernels, but
// generic code may not read or write it, as if it were a GPU's: Tensor::data() refuses
// it, except while one of its kernels (or its DeviceMemory) runs, which the kernels'
// wrappers allow with a SimulatedKernel guard. Tests place models on it to find, on a
// machine without a GPU, every place where code above the kernels assumes host memory
// (PyTorch's `meta` device serves the same purpose); its numbers are the CPU's, bitwise.
#include <atomic>
#include <cstddef>
#include <optional>
#include <string>

namespace tfm {

enum class Device { CPU, CUDA, Sim };

inline std::string to_string(Device d) {
  switch (d) {
    case Device::CPU: return "cpu";
    case Device::CUDA: return "cuda";
    case Device::Sim: return "sim";
  }
  return "?";
}

// "cpu", "cuda" or "sim"; nullopt for anything else.
inline std::optional<Device> parse_device(const std::string& name) {
  if (name == "cpu") return Device::CPU;
  if (name == "cuda") return Device::CUDA;
  if (name == "sim") return Device::Sim;
  return std::nullopt;
}

// While one lives (on any thread: the CPU kernels' OpenMP workers read memory too), the
// simulated device's memory may be read and written as host memory.
class SimulatedKernel {
 public:
  SimulatedKernel() { ++running(); }
  ~SimulatedKernel() { --running(); }
  SimulatedKernel(const SimulatedKernel&) = delete;
  SimulatedKernel& operator=(const SimulatedKernel&) = delete;
  static bool active() { return running().load(std::memory_order_relaxed) > 0; }

 private:
  static std::atomic<int>& running() {
    static std::atomic<int> count{0};
    return count;
  }
};

// How many copies of the simulated device's memory to the host there have been, in the
// whole process (tensor/strided.cpp): the waits a GPU would make at the same places,
// which the tests count in a training step.
size_t simulated_copies_to_host();

// Whether host code may read and write `d`'s memory now.
inline bool host_accessible(Device d) { return d == Device::CPU || (d == Device::Sim && SimulatedKernel::active()); }

}  // namespace tfm
