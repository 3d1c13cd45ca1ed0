#pragma once
// TFM_HOST_DEVICE marks the element rules that every device's kernels share (the counter
// hash of tensor/rng.h, the number formats of tensor/float_formats.h): compiled for the
// GPU too where nvcc reads them, so that both devices compute them alike.
#ifdef __CUDACC__
#define TFM_HOST_DEVICE __host__ __device__
#else
#define TFM_HOST_DEVICE
#endif
