#!/usr/bin/env bash
# tfm and PyTorch (Debian python3-torch) side by side on this machine, same thread
# count: training throughput of the base and small presets on Multi30k batches,
# translation throughput and latency with the same trained weights, peak memory,
# the tinyshakespeare language-model recipe, and tfm's GFLOP/s against oneDNN's
# sgemm peak. Prints the table and rewrites the results in docs/PERFORMANCE.md.
# With --load instead: the tinyshakespeare recipe, `small` training and greedy
# translation in both engines, alone and beside as many busy single-thread processes
# as there are cores (bench/load.py, about 40 minutes on 2 cores). With --against REV:
# tfm's rows only, by the binaries of commit REV (built in build/against/) and of this
# tree in turn, five times each, as medians and ratios (bench/against.py, about 25
# minutes on 2 cores; it rewrites nothing). With --serve: `tfm serve` under load on
# loopback at 1, 8 and 64 clients against offline `tfm translate`, its memory over
# 100,000 requests, Python's tfm.Translator from 8 threads, and a slow client beside
# others (bench/serve.py; rewrites docs/SERVING.md's results). With --scaling:
# data-parallel training, 1 process x THREADS threads against THREADS processes x 1
# thread under mpirun, tfm's all-reduce bandwidth over loopback and between network
# namespace hosts (as root), and projections to clusters (bench/scaling.py, about 10
# minutes on 2 cores; rewrites docs/SCALING.md's results). With --marian: an
# opus-mt-base-shaped Hugging Face model (random weights) translating Multi30k val with
# beam 4 in tfm (f32, bf16, int8) and in PyTorch's cached decoder over the same
# weights (bench/marian.py, about 25 minutes on 2 cores; rewrites its section of
# docs/PERFORMANCE.md; it needs no trained model: RUN_DIR is ignored). With --latency:
# one sentence at a time, greedy and beam 4, on 1, 2 and 4 threads in both engines,
# and tfm's start-up (the full run measures these too; about 5 minutes on 2 cores;
# rewrites its section of docs/PERFORMANCE.md). With --llama: a Qwen2-0.5B-shaped Hugging
# Face model (transformers' random weights, made once under /tmp, ~2 GB) generating from
# 128-token prompts at batch 1 and 8 in tfm (f32, bf16, int8; its Python Generator) and
# PyTorch eager (model.generate) over the same weights: prompt and generated tokens per
# second, peak memory, greedy ids compared (bench/llama.py, about 20 minutes on 2 cores
# shared with compiles, 13 of them PyTorch f32's; rewrites its section of
# docs/PERFORMANCE.md; RUN_DIR is ignored; options after -- go to bench/llama.py, e.g.
# --small for a 4-layer model in about a minute, printed only).
#   bench/run.sh [--load | --against REV | --serve | --scaling | --marian | --latency | --llama] [RUN_DIR] [THREADS] [-- OPTIONS]
# RUN_DIR holds a trained translation model (best.safetensors) and its vocab.model:
# scripts/multi30k.sh makes runs/multi30k (the default).
set -euo pipefail
cd "$(dirname "$0")/.."
script=bench/compare.py
extra=()
if [[ ${1:-} == --load ]]; then script=bench/load.py; shift; fi
serve=0
if [[ ${1:-} == --serve ]]; then serve=1; shift; fi
scaling=0
if [[ ${1:-} == --scaling ]]; then scaling=1; shift; fi
marian=0
if [[ ${1:-} == --marian ]]; then marian=1; shift; fi
llama=0
if [[ ${1:-} == --llama ]]; then llama=1; shift; fi
if [[ ${1:-} == --latency ]]; then extra=(--only latency); shift; fi
if [[ ${1:-} == --against ]]; then
  [[ -n ${2:-} ]] || { echo "bench/run.sh: --against needs a commit" >&2; exit 1; }
  rev=$(git rev-parse --verify --quiet "$2^{commit}") || { echo "bench/run.sh: $2 is not a commit" >&2; exit 1; }
  script=bench/against.py
  extra=(--baseline build/against/build)
  shift 2
fi
if ((llama)); then  # no Multi30k, no trained model: transformers makes the weights
  positional=(); while (($#)) && [[ $1 != -- ]]; do positional+=("$1"); shift; done; (($#)) && shift
  threads=${positional[1]:-$(nproc)}
  scripts/install-deps.sh --with-torch >/dev/null
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$(nproc)" --target tfm tfm_python >/dev/null
  exec /usr/bin/python3 bench/llama.py --threads "$threads" "$@"
fi
run=${1:-runs/multi30k}
threads=${2:-$(nproc)}
data=../shared/data/multi30k
text=../shared/data/tinyshakespeare/input.txt
[[ -f "$data/train.de.gz" && -f "$data/val.de.gz" ]] || { echo "bench/run.sh: Multi30k is missing from $data" >&2; exit 1; }
if ((marian)); then
  scripts/install-deps.sh --with-torch >/dev/null
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$(nproc)" --target tfm tfm_bench >/dev/null
  exec /usr/bin/python3 bench/marian.py --data "$data" --threads "$threads"
fi
[[ -f "$run/best.safetensors" && -f "$run/vocab.model" ]] ||
  { echo "bench/run.sh: no trained model in $run (best.safetensors, vocab.model): run scripts/multi30k.sh first" >&2; exit 1; }
lm=(--text "$text")
[[ -f "$text" ]] || { echo "bench/run.sh: $text is missing; the language-model row is left out" >&2; lm=(); }

scripts/install-deps.sh --with-torch >/dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target tfm tfm_bench >/dev/null
if [[ -n ${rev:-} ]]; then  # the earlier commit's binaries, in a worktree of their own
  git worktree prune
  [[ -d build/against/src ]] || git worktree add --detach build/against/src "$rev" >/dev/null
  git -C build/against/src checkout --quiet --detach "$rev"
  cmake -S build/against/src -B build/against/build -DCMAKE_BUILD_TYPE=Release -DTFM_BUILD_TESTS=OFF >/dev/null
  cmake --build build/against/build -j"$(nproc)" --target tfm tfm_bench >/dev/null
fi
if ((scaling)); then
  cmake --build build -j"$(nproc)" --target tfm tfm_allreduce >/dev/null
  exec /usr/bin/python3 bench/scaling.py --vocab "$run/vocab.model" --data "$data" --processes "$threads"
fi
if ((serve)); then
  cmake --build build -j"$(nproc)" --target tfm tfm_python >/dev/null
  slow=()  # the slow-client run needs a language model: the README's, where it was trained
  [[ -f runs/shakespeare/best.safetensors ]] && slow=(--lm runs/shakespeare/best.safetensors)
  exec /usr/bin/python3 bench/serve.py --model "$run/best.safetensors" --data "$data" --threads "$threads" "${slow[@]}"
fi
/usr/bin/python3 "$script" "${extra[@]}" --model "$run/best.safetensors" --vocab "$run/vocab.model" --data "$data" \
  --threads "$threads" "${lm[@]}"
