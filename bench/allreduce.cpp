// The all-reduce bandwidth that data-parallel training reaches (bench/scaling.py runs
// it under mpirun): tfm's own communicator (dist/), summing buffers of gradient sizes
// in 16 MiB buckets as training does, one line of JSON per size from rank 0. The bus
// bandwidth is PyTorch's and NCCL's figure of merit: 2 (N - 1) / N x bytes / seconds, what
// each process sends (and receives) in a ring all-reduce per second.
//   mpirun -np N build/bench/tfm_allreduce [MiB ...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "dist/launched_job.h"

int main(int argc, char** argv) {
  tfm::dist::join_launched_job();
  tfm::dist::Communicator* job = tfm::dist::launched_job();
  if (!job) {
    std::fprintf(stderr, "tfm_allreduce: run it under mpirun (mpirun -np 2 %s)\n", argv[0]);
    return 1;
  }
  std::vector<double> sizes_mib;
  for (int i = 1; i < argc; ++i) sizes_mib.push_back(std::atof(argv[i]));
  if (sizes_mib.empty()) sizes_mib = {16, 64, 256};
  constexpr int64_t kBucket = int64_t{1} << 22;  // floats: the Trainer's default 16 MiB
  for (const double mib : sizes_mib) {
    const int64_t n = static_cast<int64_t>(mib * (1 << 20) / 4);
    std::vector<float> data(static_cast<size_t>(n), 1.0f);
    auto sum_once = [&] {
      for (int64_t at = 0; at < n; at += kBucket) job->start_sum(data.data() + at, std::min(kBucket, n - at));
      job->wait();
    };
    sum_once();  // connections set up, pages touched
    const int rounds = std::max(3, static_cast<int>(1024 / std::max(mib, 1.0)));
    std::vector<double> time{0};
    job->sum(time);  // everyone starts together
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < rounds; ++r) sum_once();
    std::vector<double> seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / rounds};
    job->sum(seconds);
    const double s = seconds[0] / job->size(), bytes = static_cast<double>(n) * 4, procs = job->size();
    if (job->rank() == 0)
      std::printf("{\"processes\": %d, \"mib\": %g, \"seconds\": %.6f, \"bus_gbit_s\": %.3f}\n", job->size(), mib, s,
                  2 * (procs - 1) / procs * bytes * 8 / s / 1e9);
  }
  tfm::dist::leave_launched_job();
  return 0;
}
