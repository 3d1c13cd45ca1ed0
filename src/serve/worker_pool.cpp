#include "serve/worker_pool.h"

#include <system_error>

#include "tensor/error.h"

namespace tfm::serve {

WorkerPool::WorkerPool(size_t max_threads, Starter start)
    : max_threads_(max_threads), start_(start ? std::move(start) : [](std::function<void()> f) { return std::thread(std::move(f)); }) {
  const std::lock_guard<std::mutex> lock(mutex_);
  TFM_CHECK(start_thread(), "cannot start a thread to answer requests (a task or memory limit?)");
}

void WorkerPool::enqueue(std::function<void()> job) {
  const std::lock_guard<std::mutex> lock(mutex_);
  jobs_.push_back(std::move(job));
  if (busy_ + jobs_.size() > threads_.size() && threads_.size() < max_threads_) start_thread();
  ready_.notify_one();
}

void WorkerPool::shutdown() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
}

size_t WorkerPool::threads() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return threads_.size();
}

bool WorkerPool::start_thread() {
  try {
    threads_.push_back(start_([this] { work(); }));
    return true;
  } catch (const std::system_error&) {
    return false;
  }
}

void WorkerPool::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    ready_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    ++busy_;
    lock.unlock();
    try {
      job();
    } catch (...) {  // out of memory, say: that request is lost, the server is not
    }
    lock.lock();
    --busy_;
  }
}

}  // namespace tfm::serve
