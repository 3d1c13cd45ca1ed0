#pragma once
// How long idle OpenMP threads spin before they sleep (see openmp_wait.cpp).
#include <string>

namespace tfm {

// The first call of an executable's main(): unless the environment already says how
// OpenMP threads wait (GOMP_SPINCOUNT or OMP_WAIT_POLICY), sets tfm's spin count and
// runs the program again from the start so that libgomp reads it. Returns (and the
// program goes on with libgomp's own default) only if that cannot be done.
void choose_openmp_wait(char** argv);

// One line for `tfm --version`: the wait in effect.
std::string openmp_wait_setting();

// What is wrong with OMP_NUM_THREADS, which the thread count defaults to, or "" where it
// is unset or whole numbers from 1 to 1024 (--threads' range): OpenMP takes any number,
// and 100,000 threads ended in an abort or a segmentation fault.
std::string openmp_threads_problem();

}  // namespace tfm
