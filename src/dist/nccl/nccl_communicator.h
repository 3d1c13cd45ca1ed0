#pragma once
// Gradient sums between GPUs with NCCL (builds with TFM_CUDA and MPI): the buffers are
// the GPUs' own, summed by NCCL on a stream of its own while the backward pass goes on,
// where the MPI communicator would copy them to the host and back. The job's MPI
// communicator bootstraps it (NCCL's unique id) and keeps the host collectives (a few
// values, strings). One process per GPU: the process of local rank r on a host takes its
// GPU r modulo the host's GPUs, as the current device of the thread that makes this.
// NCCL (libnccl.so.2, in the CUDA toolkit) is loaded on first use, as cuBLASLt is.
//
// Written for the GPU windows of issue 35; not yet run on GPUs (no session so far had
// more than one).
#include <memory>

#include "dist/communicator.h"

namespace tfm::dist {

std::unique_ptr<Communicator> nccl_communicator(Communicator& bootstrap);

}  // namespace tfm::dist
