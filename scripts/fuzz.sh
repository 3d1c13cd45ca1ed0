#!/usr/bin/env bash
# Fuzzes every reader of outside data (safetensors checkpoints, PyTorch checkpoints, model configurations,
# corpus lines and the tokenizer, IDX image files, SentencePiece text and models, PNG and
# JPEG images, the server's HTTP requests) with
# libFuzzer, each for the given number of seconds (default 60), under AddressSanitizer
# and UndefinedBehaviorSanitizer.
#   scripts/fuzz.sh [seconds]
# The corpus grows in build-checked/fuzz/corpus_<target>/; a crashing input is written to
# build-checked/fuzz/crash_<target>_*: fix the bug, then keep the input in
# fuzz/regressions/<target>/ so that the test suite replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
scripts/install-deps.sh
CC=clang CXX=clang++ cmake -S . -B build-checked -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTFM_FUZZ=ON >/dev/null
targets=(safetensors torch config text idx spm image http tokenizer_json)
cmake --build build-checked -j"$(nproc)" --target "${targets[@]/#/fuzz_}"
status=0
for target in "${targets[@]}"; do
  mkdir -p "build-checked/fuzz/corpus_$target"
  echo "fuzz_$target: ${seconds}s"
  build-checked/fuzz/fuzz_$target -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="build-checked/fuzz/crash_${target}_" "build-checked/fuzz/corpus_$target" "fuzz/corpus/$target" \
    "fuzz/regressions/$target" 2>&1 | grep -E "^(stat::number_of_executed_units|stat::new_units_added)|ERROR|SUMMARY" || status=1
done
exit $status
