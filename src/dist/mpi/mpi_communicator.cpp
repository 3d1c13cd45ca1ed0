#include "dist/mpi/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstring>
#include <thread>

#include "tensor/error.h"

namespace tfm::dist {

namespace {

// One line for a failed MPI call. Where a peer has died (SIGKILL, a lost host), the call
// fails at once here, while the launcher, which sees the peer exit, stops the job and
// names the lost process in a moment: this process waits for that rather than exit first
// and be named itself as the job's failure. (Launchers that do not stop the job get the
// line after the wait.)
constexpr auto kLauncherGrace = std::chrono::seconds(10);

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  std::this_thread::sleep_for(kLauncherGrace);
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw Error(std::string(what) + " failed (" + std::string(text, static_cast<size_t>(length)) +
              "); another process of the job has probably stopped");
}

int as_int(int64_t n, const char* what) {
  TFM_CHECK(n >= 0 && n <= INT_MAX, what << ": " << n << " items is more than MPI takes in one call");
  return static_cast<int>(n);
}

// MPI counts are ints: a long buffer goes in pieces of at most 2^30.
constexpr int64_t kPiece = int64_t{1} << 30;

}  // namespace

MpiCommunicator::MpiCommunicator() {
  int provided = 0;
  // One thread makes every call, but not the one that initialised MPI: SERIALIZED.
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  TFM_CHECK(provided >= MPI_THREAD_SERIALIZED, "this MPI library cannot be called from a worker thread (MPI_THREAD_SERIALIZED)");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  // A write to a lost peer's socket then fails (EPIPE) instead of killing this process,
  // which the launcher would report as the job's failure in place of the lost peer.
  std::signal(SIGPIPE, SIG_IGN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  worker_ = std::thread([this] { work(); });
}

MpiCommunicator::~MpiCommunicator() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
  MPI_Finalize();
}

void MpiCommunicator::post(std::function<void()> call) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(call));
  }
  changed_.notify_all();
}

void MpiCommunicator::wait() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return queue_.empty() && !busy_; });
  if (failure_) std::rethrow_exception(failure_);
}

void MpiCommunicator::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::function<void()> call = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    const bool skip = failure_ != nullptr;  // the job is broken: later calls would hang or fail too
    lock.unlock();
    std::exception_ptr failed;
    try {
      if (!skip) call();
    } catch (...) {
      failed = std::current_exception();
    }
    lock.lock();
    if (failed && !failure_) failure_ = failed;
    busy_ = false;
    changed_.notify_all();
  }
}

void MpiCommunicator::start_sum(float* data, int64_t n) {
  post([this, data, n] {
    for (int64_t at = 0; at < n; at += kPiece)
      check(MPI_Allreduce(MPI_IN_PLACE, data + at, static_cast<int>(std::min(kPiece, n - at)), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
            "the all-reduce of a gradient bucket");
  });
}

void MpiCommunicator::sum(std::vector<double>& values) {
  run([&] {
    check(MPI_Allreduce(MPI_IN_PLACE, values.data(), as_int(static_cast<int64_t>(values.size()), "sum"), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "a sum across processes");
  });
}

std::vector<std::string> MpiCommunicator::all_gather(const std::string& mine) {
  std::vector<std::string> all(static_cast<size_t>(size_));
  run([&] {
    const int length = as_int(static_cast<int64_t>(mine.size()), "all_gather");
    std::vector<int> lengths(static_cast<size_t>(size_)), offsets(static_cast<size_t>(size_));
    check(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD), "a gather of lengths");
    int64_t total = 0;
    for (int r = 0; r < size_; ++r) offsets[static_cast<size_t>(r)] = as_int(total, "all_gather"), total += lengths[static_cast<size_t>(r)];
    std::string bytes(static_cast<size_t>(as_int(total, "all_gather")), '\0');
    check(MPI_Allgatherv(mine.data(), length, MPI_CHAR, bytes.data(), lengths.data(), offsets.data(), MPI_CHAR, MPI_COMM_WORLD),
          "a gather across processes");
    for (int r = 0; r < size_; ++r)
      all[static_cast<size_t>(r)] = bytes.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]), static_cast<size_t>(lengths[static_cast<size_t>(r)]));
  });
  return all;
}

void MpiCommunicator::reduce_scatter_sum(float* data, const std::vector<int64_t>& counts) {
  run([&] {
    std::vector<int> n(counts.size());
    int64_t offset = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      n[r] = as_int(counts[r], "reduce_scatter_sum");
      if (static_cast<int>(r) < rank_) offset += counts[r];
    }
    std::vector<float> mine(static_cast<size_t>(n[static_cast<size_t>(rank_)]));
    check(MPI_Reduce_scatter(data, mine.data(), n.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "the reduce-scatter of the gradients");
    std::copy(mine.begin(), mine.end(), data + offset);
  });
}

void MpiCommunicator::all_gather_parts(float* data, const std::vector<int64_t>& counts) {
  run([&] {
    std::vector<int> n(counts.size()), offsets(counts.size());
    int64_t offset = 0;
    for (size_t r = 0; r < counts.size(); ++r) n[r] = as_int(counts[r], "all_gather_parts"), offsets[r] = as_int(offset, "all_gather_parts"), offset += counts[r];
    check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, n.data(), offsets.data(), MPI_FLOAT, MPI_COMM_WORLD),
          "the all-gather of the weights");
  });
}

}  // namespace tfm::dist
