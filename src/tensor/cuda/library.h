#pragma once
// Libraries of the CUDA toolkit that tfm loads on first use (dlopen) rather than links:
// cuBLASLt (540 MB; linking it cost every process 200 MB at start) and NCCL. A missing
// library or function is a one-line tfm::Error that says what needs it (`needed_for`).
namespace tfm::cuda {

// Function `name` of `library` (loaded once, kept for the process).
void* library_function(const char* library, const char* name, const char* needed_for);

}  // namespace tfm::cuda
