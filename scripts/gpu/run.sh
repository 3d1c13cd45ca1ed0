#!/usr/bin/env bash
# The GPU check, run on the GPU machine in one device call (scripts/gpu/NOTES.md):
# unpacks .gpu-bundle/ (scripts/gpu/bundle.sh made it here), then runs each stage under
# its own time limit, going on after a failure: environment, memory plumbing, the op
# table against the oracle and the CPU (twice each, for determinism), the op table's
# gtest, realistic shapes with timings, compute-sanitizer memcheck on the small cases.
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
    awk '{status=$2; name=$3; printf "ROW\tgtest\t%s\t-\t-\t-\t-\t-\t-\t-\t%s\n", name, (status=="OK" ? "pass" : status)}'
  return $rc
}

sanitizer_rows() {  # memcheck over the small cases; H200 machines refuse the tool
  local tool
  tool=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  [ -n "$tool" ] || { printf 'ROW\tsanitizer\tmemcheck\t-\t-\t-\t-\t-\t-\t-\tskipped: no compute-sanitizer\n'; return 0; }
  "$tool" --tool memcheck --error-exitcode 3 "$check" --stage ops >"$logs/memcheck.out" 2>&1
  local rc=$?
  tail -5 "$logs/memcheck.out"
  local verdict="pass"
  [ $rc -eq 0 ] || verdict="FAIL: exit $rc ($(grep -m1 -E 'ERROR|error|not supported' "$logs/memcheck.out" | tr '\t' ' ' | cut -c1-80))"
  printf 'ROW\tsanitizer\tmemcheck (ops stage)\t-\t-\t-\t-\t-\t-\t-\t%s\n' "$verdict"
}

export bundle logs check
export -f gtest_rows sanitizer_rows  # run by `timeout` through bash
all=(env memory ops gtest large sanitizer)
wanted=("${@:-${all[@]}}")
for s in "${wanted[@]}"; do
  case $s in
    env) nvidia-smi >"$logs/nvidia-smi.log" 2>&1; stage env 60 "$check" --stage env ;;
    memory) stage memory 60 "$check" --stage memory ;;
    ops) stage ops 150 "$check" --stage ops ;;
    gtest) stage gtest 120 bash -c gtest_rows ;;
    large) stage large 150 "$check" --stage large ;;
    sanitizer) stage sanitizer 90 bash -c sanitizer_rows ;;
    *) echo "run.sh: unknown stage $s (stages: ${all[*]})" >&2; exit 2 ;;
  esac
done

tar -C "$logs" -czf "$OUT/logs.tar.gz" .
{
  printf 'stage\tcheck\tdtype\tshape\terror\ttol\tdet\tdevice_ms\tcpu_ms\tresult\n'
  cat "$rows"
} | column -t -s $'\t' >"$OUT/table.txt"
cat "$OUT/table.txt"
pass=$(awk -F'\t' '$10 == "pass"' "$rows" | wc -l)
total=$(wc -l <"$rows")
echo "== $pass of $total rows pass; bundle $(cat .gpu-bundle/commit 2>/dev/null); $(head -1 "$logs/env.log" 2>/dev/null | cut -f3)"
