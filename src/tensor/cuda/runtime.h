#pragma once
// The CUDA runtime as tfm uses it (builds with TFM_CUDA only): every call checked, one
// stream per host thread, and the device's allocator and memory for tensor/.
//
// Streams: each host thread queues its work on its own default stream
// (cudaStreamPerThread), so a server's request threads do not wait for each other and
// one thread's work runs in the order it was queued. A tensor is used by the thread
// that made it (as every tfm worker does); handing one to another thread needs a sync.
#include <cuda_runtime.h>

#include <string>

namespace tfm {
class Allocator;
class DeviceMemory;
}

namespace tfm::cuda {

// A one-line tfm::Error naming `what` and CUDA's message, unless `status` is success.
void check(cudaError_t status, const char* what);
// The last launch's error (an invalid configuration, a missing kernel image), named;
// with TFM_CUDA_PROFILE set, the kernel's time too (memory.cu).
void check_launch(const char* kernel);

// TFM_CUDA_PROFILE's totals start again from here (tfm_bench calls it after its warm-up
// steps, whose allocations and plans are not a step's); nothing without the profile.
void restart_profile();
// Whether TFM_CUDA_PROFILE is set: kernels may then name their launches in more detail
// (a product its shape), at a cost the unprofiled path does not pay.
bool profiling();
// Adds `ms` of host time to `what` in TFM_CUDA_PROFILE's table of host work (a
// product's plan, say); nothing without the profile.
void profile_host(const char* what, double ms);

// This thread's stream.
inline cudaStream_t stream() { return cudaStreamPerThread; }

// Whether a CUDA device is usable here; `why` says why not.
bool available(std::string* why = nullptr);
// The GPU's name, compute capability, memory, driver and runtime versions: one line.
std::string describe_device();

// Stream-ordered memory from CUDA's own pool (cudaMallocAsync), kept cached between
// steps (its release threshold is the whole pool), as PyTorch's caching allocator does.
Allocator& allocator();
DeviceMemory& memory();

}  // namespace tfm::cuda
