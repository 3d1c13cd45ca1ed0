#pragma once
// Admission and shutdown: how many requests are admitted at once (a bounded queue: the
// next gets 503 with Retry-After), and the drain after a stop (admitted requests finish
// until the drain's deadline; later ones, and new ones, get 503).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <stop_token>

#include "serve/request.h"

namespace tfm::serve {

using Clock = std::chrono::steady_clock;

inline Clock::duration seconds(double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }

class Lifecycle {
 public:
  explicit Lifecycle(int64_t max_queue) : max_queue_(max_queue) {}

  // A place in the queue, held until the returned handle is dropped; 503 when full or draining.
  std::shared_ptr<void> admit() {
    refuse_if_draining();
    if (depth_.fetch_add(1) >= max_queue_) {
      --depth_;
      throw HttpError(503, "the server is busy: " + std::to_string(max_queue_) + " requests are in progress (--max-queue); retry", 1);
    }
    return std::shared_ptr<void>(nullptr, [this](void*) { --depth_; });
  }
  int64_t depth() const { return depth_.load(); }

  void drain(double seconds) {
    deadline_ = Clock::now() + serve::seconds(seconds);
    draining_ = true;
  }
  bool draining() const { return draining_; }
  void refuse_if_draining() const {
    if (draining_) throw HttpError(503, "the server is shutting down");
  }
  bool past_drain_deadline() const { return draining_ && Clock::now() >= deadline_.load(); }

  // Throws 504 past the request's `deadline` and 503 past the drain's.
  void check(Clock::time_point deadline) const {
    if (Clock::now() >= deadline) throw HttpError(504, "the request took longer than the server's --timeout");
    if (past_drain_deadline()) throw HttpError(503, "the server is shutting down and its --drain-timeout has passed");
  }

  // The future's value, waiting at most until either deadline (then `cancel`ling the work).
  template <class T>
  T wait(std::future<T>& result, Clock::time_point deadline, std::stop_source& cancel) const {
    while (result.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
      try {
        check(deadline);
      } catch (const HttpError&) {
        cancel.request_stop();
        throw;
      }
    }
    return result.get();
  }

 private:
  const int64_t max_queue_;
  std::atomic<int64_t> depth_{0};
  std::atomic<bool> draining_{false};
  std::atomic<Clock::time_point> deadline_{Clock::time_point::max()};
};

}  // namespace tfm::serve
