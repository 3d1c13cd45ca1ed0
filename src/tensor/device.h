#pragma once
// Where a tensor's memory lives. Only CPU is implemented; every Storage records its
// device so that a CUDA backend can be added by dispatching on this field.
#include <string>

namespace tfm {

enum class Device { CPU, CUDA };

inline std::string to_string(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

}  // namespace tfm
