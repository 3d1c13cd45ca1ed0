#!/usr/bin/env bash
# Side-by-side benchmark: tfm and PyTorch (Debian python3-torch) on the same
# model and batch, same thread count. Usage: bench/run.sh [base|small] [threads]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-base}
threads=${2:-$(nproc)}
case "$preset" in
  base)  args=(--d-model 512 --heads 8 --d-ff 2048 --layers 6) ;;
  small) args=(--d-model 256 --heads 4 --d-ff 1024 --layers 3) ;;
  *) echo "usage: bench/run.sh [base|small] [threads]" >&2; exit 2 ;;
esac
args+=(--vocab 8000 --batch 64 --src-len 14 --tgt-len 14 --repeats 9)

scripts/install-deps.sh --with-torch >/dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target tfm_bench >/dev/null

echo "preset $preset: ${args[*]}, $threads threads"
tfm=$(OMP_NUM_THREADS=$threads build/bench/tfm_bench "${args[@]}")
# OpenBLAS misdetects this CPU and would fall back to generic kernels without the override.
torch=$(OPENBLAS_CORETYPE=SkylakeX OMP_NUM_THREADS=$threads /usr/bin/python3 bench/bench_torch.py "${args[@]}" --threads "$threads")
/usr/bin/python3 - "$tfm" "$torch" <<'PY'
import json, sys
t, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"{'':28}{'tfm':>12}{p['engine']:>20}{'tfm / torch':>14}")
print(f"{'parameters':28}{t['parameters']:>12}{p['parameters']:>20}")
for key, label, better in [("train_step_ms", "training step (ms)", "lower"), ("train_tokens_per_s", "training tokens/s", "higher"),
                           ("forward_ms", "forward pass (ms)", "lower")]:
    print(f"{label:28}{t[key]:>12.1f}{p[key]:>20.1f}{t[key] / p[key]:>14.2f}")
print(f"speed-up on the training step: {p['train_step_ms'] / t['train_step_ms']:.2f}x")
PY
