#include "dist/nccl/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <string>

#include "tensor/cuda/library.h"
#include "tensor/cuda/runtime.h"
#include "tensor/error.h"

namespace tfm::dist {

namespace {

// NCCL's function `name`, resolved once per call site.
#define TFM_NCCL(name)                                                                                                            \
  ([]() {                                                                                                                         \
    static const auto fn =                                                                                                        \
        reinterpret_cast<decltype(&::name)>(cuda::library_function("libnccl.so.2", #name, "data parallelism between GPUs")); \
    return fn;                                                                                                                    \
  }())

void check(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) throw Error(std::string("nccl: ") + what + " failed (" + TFM_NCCL(ncclGetErrorString)(rc) + ")");
}

// This process's rank among the job's processes on its host, as the launchers say it.
int local_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return 0;
}

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(Communicator& bootstrap) : bootstrap_(bootstrap) {
    int devices = 0;
    cuda::check(cudaGetDeviceCount(&devices), "count the GPUs");
    cuda::check(cudaSetDevice(local_rank() % devices), "choose this process's GPU");
    ncclUniqueId id{};
    if (rank() == 0) check(TFM_NCCL(ncclGetUniqueId)(&id), "ncclGetUniqueId");
    const std::string first = bootstrap_.all_gather(std::string(reinterpret_cast<const char*>(&id), sizeof id))[0];  // rank 0's id
    std::copy(first.begin(), first.end(), reinterpret_cast<char*>(&id));
    check(TFM_NCCL(ncclCommInitRank)(&comm_, size(), id, rank()), "ncclCommInitRank");
    cuda::check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "create NCCL's stream");
    cuda::check(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "create an event");
  }
  ~NcclCommunicator() override {
    cudaStreamSynchronize(stream_);
    TFM_NCCL(ncclCommDestroy)(comm_);
    cudaEventDestroy(ready_);
    cudaStreamDestroy(stream_);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return bootstrap_.rank(); }
  int size() const override { return bootstrap_.size(); }
  bool takes_device_memory() const override { return true; }

  // NCCL's stream starts once the caller's stream has made the data (an event between
  // them: the host does not wait).
  void start_sum(float* data, int64_t n) override {
    follow(cuda::stream(), stream_);
    check(TFM_NCCL(ncclAllReduce)(data, data, static_cast<size_t>(n), ncclFloat, ncclSum, comm_, stream_), "ncclAllReduce");
  }
  // The caller's stream waits for the sums; the host does not.
  void wait() override { follow(stream_, cuda::stream()); }
  void sum(std::vector<double>& values) override { bootstrap_.sum(values); }
  std::vector<std::string> all_gather(const std::string& mine) override { return bootstrap_.all_gather(mine); }

  // Each part reduced to its rank, then each part broadcast from its rank: NCCL's
  // ReduceScatter and AllGather need parts of one size, the shares of whole parameters differ.
  void reduce_scatter_sum(float* data, const std::vector<int64_t>& counts) override {
    each_part(data, counts, [&](float* part, size_t n, int root) {
      check(TFM_NCCL(ncclReduce)(part, part, n, ncclFloat, ncclSum, root, comm_, stream_), "ncclReduce");
    });
  }
  void all_gather_parts(float* data, const std::vector<int64_t>& counts) override {
    each_part(data, counts, [&](float* part, size_t n, int root) {
      check(TFM_NCCL(ncclBroadcast)(part, part, n, ncclFloat, root, comm_, stream_), "ncclBroadcast");
    });
  }

 private:
  // `waiting` starts its next work once `first`'s work queued so far is done.
  void follow(cudaStream_t first, cudaStream_t waiting) {
    cuda::check(cudaEventRecord(ready_, first), "record an event");
    cuda::check(cudaStreamWaitEvent(waiting, ready_, 0), "wait for an event");
  }
  template <class Call>
  void each_part(float* data, const std::vector<int64_t>& counts, Call call) {
    follow(cuda::stream(), stream_);
    check(TFM_NCCL(ncclGroupStart)(), "ncclGroupStart");
    int64_t offset = 0;
    for (size_t r = 0; r < counts.size(); ++r) call(data + offset, static_cast<size_t>(counts[r]), static_cast<int>(r)), offset += counts[r];
    check(TFM_NCCL(ncclGroupEnd)(), "ncclGroupEnd");
    follow(stream_, cuda::stream());
  }

  Communicator& bootstrap_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> nccl_communicator(Communicator& bootstrap) { return std::make_unique<NcclCommunicator>(bootstrap); }

}  // namespace tfm::dist
