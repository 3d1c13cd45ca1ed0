#!/usr/bin/env bash
# tfm and PyTorch (Debian python3-torch) on a busy machine: the tinyshakespeare recipe,
# `small` training and greedy translation, each alone and beside as many busy
# single-thread processes as there are cores, at the same thread count. Prints the
# table and rewrites the load section of docs/PERFORMANCE.md (see bench/load.py).
#   bench/load.sh [RUN_DIR] [THREADS]
# RUN_DIR holds a trained translation model (best.safetensors) and its vocab.model:
# scripts/multi30k.sh makes runs/multi30k (the default). About 40 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
run=${1:-runs/multi30k}
threads=${2:-$(nproc)}
data=../shared/data/multi30k
text=../shared/data/tinyshakespeare/input.txt
[[ -f "$run/best.safetensors" && -f "$run/vocab.model" ]] ||
  { echo "bench/load.sh: no trained model in $run (best.safetensors, vocab.model): run scripts/multi30k.sh first" >&2; exit 1; }
[[ -f "$data/train.de.gz" && -f "$data/val.de.gz" ]] || { echo "bench/load.sh: Multi30k is missing from $data" >&2; exit 1; }
lm=(--text "$text")
[[ -f "$text" ]] || { echo "bench/load.sh: $text is missing; the language-model row is left out" >&2; lm=(); }

scripts/install-deps.sh --with-torch >/dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target tfm tfm_bench >/dev/null
/usr/bin/python3 bench/load.py --model "$run/best.safetensors" --vocab "$run/vocab.model" --data "$data" \
  --threads "$threads" "${lm[@]}"
