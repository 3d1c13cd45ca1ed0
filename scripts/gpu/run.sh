#!/usr/bin/env bash
# The GPU check, run on the GPU machine in one device call (scripts/gpu/NOTES.md):
# unpacks .gpu-bundle/ (scripts/gpu/bundle.sh made it here), then runs each stage under
# its own time limit, going on after a failure: environment, memory plumbing, the op
# table against the oracle and the CPU (twice each, for determinism), the op table's
# gtest, realistic shapes with timings (again with TFM_FLASH_ATTENTION=0: attention by
# the kernels that write the probabilities), every family's training and inference against
# the CPU, compute-sanitizer memcheck and racecheck on the small cases; on request
# (named stages) the profile of a training step, the matrix rates and the benches against
# PyTorch: base training (bench), a GPT-2-small language model (bench-lm) and
# translation (bench-translate).
# Writes $OUT/table.txt, $OUT/rows.tsv and $OUT/logs.tar.gz, and prints the table last.
#   scripts/gpu/run.sh [STAGE...]     (default: every stage)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/tfm-gpu-check}
mkdir -p "$OUT"
logs=$(mktemp -d)
bundle=$(mktemp -d)
tar -xzf .gpu-bundle/bundle.tar.gz -C "$bundle" || { echo "run.sh: no bundle; run scripts/gpu/bundle.sh first" >&2; exit 1; }
# CUDA's libraries: the toolkit's, else the ones PyTorch's wheels carry.
cuda_libs=$(find /usr/local/cuda/lib64 /usr/local/cuda*/lib64 /usr/lib/x86_64-linux-gnu /opt /usr/local/lib -name 'libcublasLt.so.13*' \
  2>/dev/null | head -1 | xargs -r dirname)
cudart=$(find /usr/local/cuda/lib64 /usr/local/cuda*/lib64 /opt /usr/local/lib -name 'libcudart.so.13*' 2>/dev/null | head -1 | xargs -r dirname)
export LD_LIBRARY_PATH="$bundle/lib:${cuda_libs}:${cudart}:${LD_LIBRARY_PATH:-}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-16}
rows=$OUT/rows.tsv
: >"$rows"
check=$bundle/tfm_gpu_check

# stage NAME SECONDS COMMAND...: runs it, keeps its log, gathers its rows; a stage that
# fails or runs out of time adds a row saying so.
stage() {
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  timeout -k 5 "$limit" "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  grep -a $'^ROW\t' "$logs/$name.log" | cut -f2- >>"$rows"
  [ $rc -eq 0 ] || printf '%s\t(the stage)\t-\t-\t-\t-\t-\t-\t-\tFAIL: exit %s%s after %ss\n' "$name" "$rc" \
    "$([ $rc -eq 124 ] && echo ' (time limit)')" "$((SECONDS - t0))" >>"$rows"
  echo "stage $name: exit $rc, $((SECONDS - t0)) s" >&2
}

gtest_rows() {  # the op table's gtest, as rows
  "$bundle/tfm_tests" --gtest_filter='*BackendOp*:Tensor*' >"$logs/gtest.out" 2>&1
  local rc=$?
  cat "$logs/gtest.out"
  grep -E '^\[ +(OK|FAILED|SKIPPED) +\] [A-Za-z]' "$logs/gtest.out" | sort -u |
    awk '!seen[$4]++ {status=$2; name=$4; printf "ROW\tgtest\t%s\t-\t-\t-\t-\t-\t-\t-\t%s\n", name, (status=="OK" ? "pass" : status)}'
  return $rc
}

sanitizer_rows() {  # memcheck and racecheck over the small cases; some machines refuse the tool
  local tool
  tool=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  [ -n "$tool" ] || { printf 'ROW\tsanitizer\tcompute-sanitizer\t-\t-\t-\t-\t-\t-\t-\tskipped: no compute-sanitizer\n'; return 0; }
  for t in memcheck racecheck; do
    "$tool" --tool $t --error-exitcode 3 "$check" --stage ops >"$logs/$t.out" 2>&1
    local rc=$?
    tail -3 "$logs/$t.out" | grep -v '^ROW'  # the check's own rows are the ops stage's
    local verdict="pass"
    [ $rc -eq 0 ] || verdict="FAIL: exit $rc ($(grep -m1 -E 'ERROR|error|not supported' "$logs/$t.out" | tr '\t' ' ' | cut -c1-80))"
    printf 'ROW\tsanitizer\t%s (ops stage)\t-\t-\t-\t-\t-\t-\t-\t%s\n' "$t" "$verdict"
  done
}

profile_rows() {  # where a training step's time goes, tfm's kernels and PyTorch's, in bf16
  local data=.gpu-bundle/data out=$logs/profile
  mkdir -p "$out"
  TFM_CUDA_PROFILE=1 "$bundle/tfm_bench" --precision bf16 train --device cuda --preset base --vocab $data/vocab.model \
    --src $data/train.de.gz --tgt $data/train.en.gz --max-tokens 25000 --steps 3 --warmup 1 --batches-out "$out/batches.json" \
    >"$out/tfm.json" 2>"$out/tfm.txt"
  python3 bench/gpu/torch_train.py --config "$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["config"]))' "$out/tfm.json")" \
    --batches "$out/batches.json" --precision bf16 --warmup 1 --profile >"$out/torch.json" 2>"$out/torch.txt"
  head -60 "$out/tfm.txt"
}

export bundle logs check
export -f gtest_rows sanitizer_rows profile_rows  # run by `timeout` through bash
all=(env memory ops gtest large large-cores large-unfused train infer sanitizer)
wanted=("${@:-${all[@]}}")
for s in "${wanted[@]}"; do
  case $s in
    env) nvidia-smi >"$logs/nvidia-smi.log" 2>&1; stage env 30 "$check" --stage env ;;
    memory) stage memory 30 "$check" --stage memory ;;
    ops) stage ops 60 "$check" --stage ops ;;
    gtest) stage gtest 60 bash -c gtest_rows ;;
    large) stage large 60 "$check" --stage large ;;
    large-cores) stage large-cores 60 bash -c 'set -o pipefail; TFM_TENSOR_CORE_ATTENTION=0 "$check" --stage large | sed "s/^ROW\tlarge\t/ROW\tlarge-cores\t/"' ;;
    large-unfused) stage large-unfused 60 bash -c 'set -o pipefail; TFM_FLASH_ATTENTION=0 "$check" --stage large | sed "s/^ROW\tlarge\t/ROW\tlarge-unfused\t/"' ;;
    train) stage train 150 "$check" --stage train ;;
    profile) stage profile 200 bash -c profile_rows ;;
    gemm) stage gemm 60 "$bundle/tfm_gemm_rates" ;;
    bench) stage bench 420 python3 bench/gpu/compare.py --tfm-bench "$bundle/tfm_bench" --data .gpu-bundle/data --out "$logs/bench" ;;
    bench-lm) stage bench-lm 150 python3 bench/gpu/compare_lm.py --tfm-bench "$bundle/tfm_bench" --text .gpu-bundle/lm/input.txt.gz \
      --vocab .gpu-bundle/lm/vocab.model --budget 140 --out "$logs/bench-lm" ;;
    bench-translate) stage bench-translate 150 python3 bench/gpu/compare_translate.py --tfm-bench "$bundle/tfm_bench" \
      --model .gpu-bundle/translate/model.safetensors --vocab .gpu-bundle/translate/vocab.model \
      --input .gpu-bundle/translate/val.de.gz --budget 140 --out "$logs/bench-translate" ;;
    infer) stage infer 90 "$check" --stage infer --fixtures tests/fixtures --hf-fixtures .gpu-bundle/hf ;;
    sanitizer) stage sanitizer 60 bash -c sanitizer_rows ;;
    *) echo "run.sh: unknown stage $s (stages: ${all[*]}; on request: profile gemm bench bench-lm bench-translate)" >&2; exit 2 ;;
  esac
done

tar -C "$logs" -czf "$OUT/logs.tar.gz" .
# table FILE: the rows under a header, columns aligned.
table() {
  { printf 'stage\tcheck\tdtype\tshape\terror\ttol\tdet\tdevice_ms\tcpu_ms\tresult\n'; cat "$1"; } |
    awk -F'\t' '{ for (i = 1; i <= NF; ++i) { cell[NR, i] = substr($i, 1, 90); if (length(cell[NR, i]) > w[i]) w[i] = length(cell[NR, i]) }
                  n = NR; if (NF > nf) nf = NF }
           END { for (r = 1; r <= n; ++r) { line = ""; for (i = 1; i <= nf; ++i) line = line sprintf("%-" w[i] + 2 "s", cell[r, i]); print line } }'
}
table "$rows" >"$OUT/table.txt"
# Printed last (the device tool returns the output's end): each stage's count, the
# rows that did not pass (at most 40; a benchmark's only where it failed), the
# benchmarks' figures, then the large shapes' timings.
echo "== per stage: rows, passed"
awk -F'\t' '{ n[$1]++; if ($10 == "pass") p[$1]++ } END { for (s in n) printf "%-16s %4d %4d\n", s, n[s], p[s] }' "$rows"
awk -F'\t' '$10 != "pass" && $1 !~ /^large/ && $1 != "gemm" && ($1 !~ /^bench/ || $10 ~ /^FAIL/)' "$rows" | head -40 >"$logs/failed.tsv"
if [ -s "$logs/failed.tsv" ]; then echo "== not passed (the first 40; all rows in table.txt)"; table "$logs/failed.tsv"; fi
awk -F'\t' '$1 ~ /^bench/ && $10 !~ /^FAIL/' "$rows" >"$logs/bench.tsv"
if [ -s "$logs/bench.tsv" ]; then echo "== against PyTorch (device_ms: a median step; bench-translate: the whole set)"; table "$logs/bench.tsv"; fi
awk -F'\t' '$1 == "gemm"' "$rows" >"$logs/gemm.tsv"
if [ -s "$logs/gemm.tsv" ]; then echo "== products (device_ms: one call)"; table "$logs/gemm.tsv"; fi
awk -F'\t' '$1 ~ /^large/' "$rows" >"$logs/large.tsv"
if [ -s "$logs/large.tsv" ]; then echo "== large shapes"; table "$logs/large.tsv"; fi
pass=$(awk -F'\t' '$10 == "pass"' "$rows" | wc -l)
total=$(wc -l <"$rows")
echo "== $pass of $total rows pass; bundle $(cat .gpu-bundle/commit 2>/dev/null); $(grep -a -m1 $'^ROW\tenv' "$logs/env.log" 2>/dev/null | cut -f3)"
