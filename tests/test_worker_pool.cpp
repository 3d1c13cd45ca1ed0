// The server's worker threads (serve/worker_pool.h): where the system refuses a thread,
// the request waits for a running one, and every request is answered.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <system_error>
#include <thread>

#include "serve/worker_pool.h"
#include "tensor/error.h"

namespace tfm {
namespace {

// A starter that refuses every thread after the first `allowed`, as a task limit does.
serve::WorkerPool::Starter refusing_after(int allowed, std::atomic<int>& refused) {
  auto started = std::make_shared<std::atomic<int>>(0);
  return [allowed, started, &refused](std::function<void()> f) {
    if (++*started > allowed) {
      ++refused;
      throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again), "thread");
    }
    return std::thread(std::move(f));
  };
}

TEST(WorkerPool, RequestsWaitForARunningThreadWhereNoMoreCanStart) {
  std::atomic<int> refused{0}, served{0};
  {
    serve::WorkerPool pool(256, refusing_after(2, refused));
    for (int i = 0; i < 50; ++i)
      pool.enqueue([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a request that holds its thread a while
        ++served;
      });
    EXPECT_EQ(pool.threads(), 2u);
    pool.shutdown();
  }
  EXPECT_EQ(served, 50);
  EXPECT_GT(refused, 0);
}

TEST(WorkerPool, ARequestThatThrowsLosesOnlyItself) {
  std::atomic<int> served{0};
  serve::WorkerPool pool(1);
  pool.enqueue([] { throw std::bad_alloc(); });
  pool.enqueue([&] { ++served; });
  pool.shutdown();
  EXPECT_EQ(served, 1);
}

TEST(WorkerPool, APoolThatCannotStartAnyThreadIsAnError) {
  std::atomic<int> refused{0};
  EXPECT_THROW(serve::WorkerPool pool(4, refusing_after(0, refused)), Error);
}

}  // namespace
}  // namespace tfm
