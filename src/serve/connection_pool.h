#pragma once
// The threads that serve the server's connections. httplib serves each connection on a
// thread of its task queue for as long as the connection lives, so a fixed pool of a few
// threads is exhausted by as many slow clients: this one grows a thread whenever every
// thread is busy, up to --max-connections; idle threads wait for the next connection.
//
// Where the system refuses another thread (a task or memory limit: a container, a
// systemd unit), the connection waits for one of the threads already running, and the
// server goes on (the review's C1: the refusal had aborted it). The first thread is
// started with the pool, so that one always runs; an exception out of a connection's job
// (out of memory inside httplib) loses that connection only.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tfm::serve {

class ConnectionPool {
 public:
  // How a thread is started (std::thread's constructor, unless a test refuses some: it
  // throws std::system_error where the system refuses).
  using Starter = std::function<std::thread(std::function<void()>)>;
  explicit ConnectionPool(size_t max_threads, Starter start = {});
  ~ConnectionPool() { shutdown(); }
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  void enqueue(std::function<void()> job);
  // Finishes every connection queued, then joins the threads.
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
