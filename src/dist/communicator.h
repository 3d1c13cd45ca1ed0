#pragma once
// The processes of one data-parallel training job, and the collectives training needs:
// sums of gradient buckets that run behind the backward pass (as PyTorch DDP's), and
// sums and gathers of a few values (token counts, validation results, stop requests).
// One implementation per transport: MPI (mpi_communicator.cpp, in builds with MPI), and
// NCCL between GPUs over it (nccl/nccl_communicator.cpp, in builds with CUDA and MPI);
// one process alone needs none (the Trainer's default). The launcher's job:
// launched_job.h.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tfm::dist {

// Items [begin, end) of a list.
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// The items of n that process `rank` of `size` takes: contiguous, in rank order, shares
// differing by at most one item (rank 0's share comes first, as one process's would).
Range share(int64_t n, int rank, int size);

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  Range share(int64_t n) const { return dist::share(n, rank(), size()); }
  // Whether the float buffers of start_sum, reduce_scatter_sum and all_gather_parts are
  // in the GPU's memory (NCCL's) rather than the host's.
  virtual bool takes_device_memory() const { return false; }

  // Starts summing data[0, n) across the processes, in place, and returns at once. Sums
  // run one after another in the order they were started, which must be the same on
  // every process; the data must stay untouched until wait().
  virtual void start_sum(float* data, int64_t n) = 0;
  // Returns once every started sum is complete (or throws the first failure).
  virtual void wait() = 0;
  // Sums a few values across the processes, in place; every process gets the same sums.
  virtual void sum(std::vector<double>& values) = 0;
  // Every process's bytes, in rank order.
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
  // ZeRO-1 (sharded optimiser state): data holds counts[r] floats for each rank r in
  // turn. reduce_scatter_sum leaves in this rank's part the sum of every process's part
  // (the other parts are left undefined); all_gather_parts copies every rank's part of
  // its data into the others' data.
  virtual void reduce_scatter_sum(float* data, const std::vector<int64_t>& counts) = 0;
  virtual void all_gather_parts(float* data, const std::vector<int64_t>& counts) = 0;
};

// Every process's strings, concatenated in rank order (e.g. the translations of each
// process's share of a validation set, in the set's order).
std::vector<std::string> gather_strings(Communicator& comm, const std::vector<std::string>& mine);

// The sums of `values` across the processes of `comm`, or `values` where comm is null.
std::vector<double> sum_over(Communicator* comm, std::vector<double> values);

// The communicator that sums `job`'s buffers where the gradients are on `gpu` (true: a
// GPU): NCCL's over the job's, where this build has it; null: the job's own.
std::unique_ptr<Communicator> device_communicator(Communicator& job, bool gpu);

}  // namespace tfm::dist
