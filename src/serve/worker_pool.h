#pragma once
// The threads that compute requests' answers (serve/http_server.h: a request that
// waits for the library, never for a client). It grows a thread whenever every thread is
// busy, up to a maximum; idle threads wait for the next request.
//
// Where the system refuses another thread (a task or memory limit: a container, a
// systemd unit), the request waits for one of the threads already running, and the
// server goes on (the review's C1: the refusal had aborted it). The first thread is
// started with the pool, so that one always runs; an exception out of a job (out of
// memory) loses that request only.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tfm::serve {

class WorkerPool {
 public:
  // How a thread is started (std::thread's constructor, unless a test refuses some: it
  // throws std::system_error where the system refuses).
  using Starter = std::function<std::thread(std::function<void()>)>;
  explicit WorkerPool(size_t max_threads, Starter start = {});
  ~WorkerPool() { shutdown(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void enqueue(std::function<void()> job);
  // Runs every job queued, then joins the threads.
  void shutdown();
  size_t threads() const;

 private:
  bool start_thread();  // false where the system refuses; the mutex is held
  void work();

  const size_t max_threads_;
  const Starter start_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t busy_ = 0;
  bool stopping_ = false;
};

}  // namespace tfm::serve
