#!/usr/bin/env bash
# Builds tfm and runs every test, twice:
#  1. the Release build: unit, finite-difference, PyTorch reference, CLI, crash-safety,
#     and the thread matrix (tests/test_threads.cpp: every path at 1-16 threads); then
#     every build/tfm command line of the README, at small sizes (tests/readme_commands.sh);
#     and packs the GPU check's bundle (scripts/gpu/bundle.sh; the CUDA code is compiled in
#     that build where nvcc is, its tests skip without a GPU, and the simulated device runs them);
#  2. the checked build (clang, AddressSanitizer + UndefinedBehaviorSanitizer, every
#     report fatal): the same suite, plus each libFuzzer target replaying its seeds and
#     fuzz/regressions/ and fuzzing for 10 s (scripts/fuzz.sh fuzzes longer). Four
#     tests are left out there: the default copy-task run takes minutes under ASan and
#     is the same code the Release build just ran; the bounded-memory translation
#     cannot hold under ASan, whose quarantine keeps freed memory resident; the
#     thread matrix checks numbers, which the Release build's kernels produce; and
#     bench/llama.py's small run (Bench.LlamaSmall), a benchmark of the Release code.
# The release tests include data-parallel training on MPI over loopback TCP; its run
# across hosts made of network namespaces needs root, and runs only where this machine
# lets it make namespaces (otherwise a line says it was left out, and why).
# Each stage prints its time, so that the CI budget (30 minutes on 2 cores) is visible.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
stage() {  # stage NAME COMMAND...: runs the command, then prints how long it took
  local name=$1 t0=$SECONDS
  shift
  "$@"
  echo "== stage '$name': $((SECONDS - t0)) s (total $((SECONDS - start)) s)"
}
stage "release build" scripts/build.sh
left_out=()
if ! probe=$(ip netns add tfm-probe-$$ 2>&1); then
  echo "== DataParallel.Hosts left out: this machine refuses network namespaces (ip netns add: ${probe:-ip is missing})"
  left_out=(-E DataParallel.Hosts)
else
  ip netns del tfm-probe-$$
fi
# One test at a time: each already uses every core through OpenMP.
stage "release tests" ctest --test-dir build --output-on-failure "${left_out[@]}"
stage "README commands" tests/readme_commands.sh build
stage "GPU bundle" scripts/gpu/bundle.sh  # what a GPU window carries (scripts/gpu/NOTES.md): it must build here
configure_checked() { CC=clang CXX=clang++ cmake -S . -B build-checked -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTFM_FUZZ=ON >/dev/null; }
stage "checked build" eval 'configure_checked && cmake --build build-checked -j"$(nproc)"'
stage "checked tests" env LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp" ctest --test-dir build-checked --output-on-failure \
  -E 'CopyTask.DefaultRunCopiesEverySample|TranslateCli.MemoryStaysBoundedAsTheInputGrows|ThreadMatrix|Bench.LlamaSmall'
