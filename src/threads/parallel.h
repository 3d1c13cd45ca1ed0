#pragma once
// Loops and regions that use every OpenMP thread only when they are worth it. A
// one-thread region (`#pragma omp parallel if (false)`) still costs ~1.5 us on this
// machine (adding 8,192 floats: 2.1 us in one, 0.6 us without), and a decoding step
// runs a few dozen small ops; below the threshold these run on the calling thread
// without entering OpenMP at all.
#include <cstdint>

namespace tfm {

// body() on every thread of a new team when `parallel`, else once on the calling
// thread. Worksharing inside body (`#pragma omp for`) binds to that team, or runs
// the whole loop on the calling thread.
template <class Body>
void parallel_region(bool parallel, Body&& body) {
  if (!parallel) {
    body();
    return;
  }
#pragma omp parallel
  body();
}

// body(i) for i in [0, n), statically split over the threads when `parallel`.
template <class Body>
void parallel_for(int64_t n, bool parallel, Body&& body) {
  parallel_region(parallel, [&] {
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < n; ++i) body(i);
  });
}

// body(begin, end) over [0, n) in chunks of 65,536 elements, split over the threads
// when there are two chunks or more: whole-buffer copies and fills (gradient buffers
// zero-filled, leaf gradients copied) otherwise ran on one core while the other waited.
template <class Body>
void parallel_chunks(int64_t n, Body&& body) {
  constexpr int64_t kChunk = int64_t{1} << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(chunks, chunks > 1, [&](int64_t c) { body(c * kChunk, c + 1 == chunks ? n : (c + 1) * kChunk); });
}

}  // namespace tfm
