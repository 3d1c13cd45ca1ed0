// How long an idle OpenMP thread spins before it sleeps.
//
// libgomp spins at a barrier, and between regions, 300,000 pause iterations before it
// sleeps in the kernel: about 15 ms on this machine (49 ns per iteration; libgomp
// assumes 10). On a busy machine that is ruinous: a thread spinning for its partner
// burns the CPU share the scheduler would otherwise give it as a sleeper, so it waits
// longer, and a step of a few hundred regions crawls. Measured on 2 cores beside two
// busy processes, the tinyshakespeare recipe (150 steps) took 11.2 s alone and
// 37-179 s loaded (3-16x); spinning 1,000 iterations (~50 us) then sleeping made it
// 10.4 s alone and 19.7 s loaded (1.9x), where 3,000 gave 2.5x and 0 (passive) was 10%
// slower alone. bench/load.py measures it; docs/PERFORMANCE.md has the figures.
//
// libgomp reads GOMP_SPINCOUNT once, in its own initialiser, before main() runs, and
// has no call to change it later; nor can an executable set it before that (its
// .preinit_array runs before the C library has its environment). So main() sets the
// variable and executes the same program again (/proc/self/exe, a few milliseconds),
// unless the user chose a wait, which is left as it is. A process that embeds tfm's
// library sets GOMP_SPINCOUNT itself before libgomp loads.
#include "threads/openmp_wait.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace tfm {
namespace {

constexpr const char* kSpinCount = "1000";

bool wait_chosen() { return std::getenv("GOMP_SPINCOUNT") || std::getenv("OMP_WAIT_POLICY"); }

}  // namespace

void choose_openmp_wait(char** argv) {
  if (wait_chosen() || setenv("GOMP_SPINCOUNT", kSpinCount, 0) != 0) return;
  // The program's own path, so that ps and top show its name, not "exe"; /proc/self/exe
  // itself where the path is gone (a binary replaced while it runs).
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n > 0) path[n] = '\0', execv(path, argv);
  execv("/proc/self/exe", argv);  // returns only on failure (no /proc): go on as we are
  unsetenv("GOMP_SPINCOUNT");     // not in effect in this process, so not reported
}

std::string openmp_wait_setting() {
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  std::string setting = "idle threads";
  if (policy) setting += std::string(" wait ") + policy + " (OMP_WAIT_POLICY)";
  if (spin) setting += std::string(policy ? " and" : "") + " spin " + spin + " pause iterations (GOMP_SPINCOUNT), then sleep";
  if (!policy && !spin) setting += " spin for libgomp's default 300,000 pause iterations, then sleep";
  if (!policy && spin && std::string(spin) == kSpinCount) setting += " (tfm's default)";
  return setting;
}

std::string openmp_threads_problem() {
  const char* value = std::getenv("OMP_NUM_THREADS");
  if (!value || !*value) return "";
  const std::string text = value;
  size_t at = 0;
  while (at <= text.size()) {  // a list, one count per nesting level: "4,2"
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    const bool digits = !item.empty() && item.size() <= 4 && item.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoi(item) < 1 || std::stoi(item) > 1024)
      return "OMP_NUM_THREADS=" + text + ": thread counts are whole numbers from 1 to 1024, as --threads takes them";
    at = end + 1;
  }
  return "";
}

}  // namespace tfm
