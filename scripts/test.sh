#!/usr/bin/env bash
# Builds tfm and runs every test, twice:
#  1. the Release build: unit, finite-difference, PyTorch reference, CLI, crash-safety;
#  2. the checked build (clang, AddressSanitizer + UndefinedBehaviorSanitizer, every
#     report fatal): the same suite, plus each libFuzzer target replaying its seeds and
#     fuzz/regressions/ and fuzzing for 10 s (scripts/fuzz.sh fuzzes longer). Two
#     tests are left out there: the default copy-task run takes minutes under ASan and
#     is the same code the Release build just ran, and the bounded-memory translation
#     cannot hold under ASan, whose quarantine keeps freed memory resident.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
# One test at a time: each already uses every core through OpenMP.
ctest --test-dir build --output-on-failure
CC=clang CXX=clang++ cmake -S . -B build-checked -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTFM_FUZZ=ON >/dev/null
cmake --build build-checked -j"$(nproc)"
ctest --test-dir build-checked --output-on-failure -E 'CopyTask.DefaultRunCopiesEverySample|TranslateCli.MemoryStaysBoundedAsTheInputGrows'
