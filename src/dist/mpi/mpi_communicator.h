#pragma once
// Communicator over MPI (OpenMPI in tfm's builds). Every MPI call is made by one worker
// thread, in the order the calls were asked for: the gradient sums it works through while
// the backward pass goes on (an MPI collective on TCP advances only inside MPI calls, so
// a call started and left would not run behind the pass), and the blocking collectives,
// which wait for it.
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "dist/communicator.h"

namespace tfm::dist {

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator();   // MPI_Init_thread; errors are returned, not fatal
  ~MpiCommunicator();  // MPI_Finalize
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void start_sum(float* data, int64_t n) override;
  void wait() override;
  void sum(std::vector<double>& values) override;
  std::vector<std::string> all_gather(const std::string& mine) override;
  void reduce_scatter_sum(float* data, const std::vector<int64_t>& counts) override;
  void all_gather_parts(float* data, const std::vector<int64_t>& counts) override;

 private:
  void post(std::function<void()> call);
  void run(std::function<void()> call) { post(std::move(call)), wait(); }
  void work();

  int rank_ = 0, size_ = 1;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false, stopping_ = false;
  std::exception_ptr failure_;
  std::thread worker_;
};

}  // namespace tfm::dist
