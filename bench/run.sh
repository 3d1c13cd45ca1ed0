#!/usr/bin/env bash
# tfm and PyTorch (Debian python3-torch) side by side on this machine, same thread
# count: training throughput of the base and small presets on Multi30k batches,
# translation throughput and latency with the same trained weights, peak memory,
# the tinyshakespeare language-model recipe, and tfm's GFLOP/s against oneDNN's
# sgemm peak. Prints the table and rewrites the results in docs/PERFORMANCE.md.
# With --load instead: the tinyshakespeare recipe, `small` training and greedy
# translation in both engines, alone and beside as many busy single-thread processes
# as there are cores (bench/load.py, about 40 minutes on 2 cores).
#   bench/run.sh [--load] [RUN_DIR] [THREADS]
# RUN_DIR holds a trained translation model (best.safetensors) and its vocab.model:
# scripts/multi30k.sh makes runs/multi30k (the default).
set -euo pipefail
cd "$(dirname "$0")/.."
script=bench/compare.py
if [[ ${1:-} == --load ]]; then script=bench/load.py; shift; fi
run=${1:-runs/multi30k}
threads=${2:-$(nproc)}
data=../shared/data/multi30k
text=../shared/data/tinyshakespeare/input.txt
[[ -f "$run/best.safetensors" && -f "$run/vocab.model" ]] ||
  { echo "bench/run.sh: no trained model in $run (best.safetensors, vocab.model): run scripts/multi30k.sh first" >&2; exit 1; }
[[ -f "$data/train.de.gz" && -f "$data/val.de.gz" ]] || { echo "bench/run.sh: Multi30k is missing from $data" >&2; exit 1; }
lm=(--text "$text")
[[ -f "$text" ]] || { echo "bench/run.sh: $text is missing; the language-model row is left out" >&2; lm=(); }

scripts/install-deps.sh --with-torch >/dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target tfm tfm_bench >/dev/null
/usr/bin/python3 "$script" --model "$run/best.safetensors" --vocab "$run/vocab.model" --data "$data" \
  --threads "$threads" "${lm[@]}"
