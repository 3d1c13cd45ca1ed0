#!/usr/bin/env bash
# The README stays true: every `build/tfm` command line of README.md's shell blocks
# runs, verbatim except for the size substitutions listed below, in a fresh directory
# laid out like a checkout (build/, tests/ and ../shared/ are links to the real ones). Commands
# that make a model run first (vocabularies, then the trainers), in README order, then
# every other one in README order, so that each finds the model it reads.
#
#   tests/readme_commands.sh [BUILD_DIR]      (default: build)
#
# Lines of scripts/ and bench/ (building, testing, fuzzing, benchmarks) are not run
# here: scripts/test.sh is the test command itself. The exceptions make data, run
# first: scripts/idx_to_folder.py (an image folder, with few images) and `mkdir` lines
# (a directory laid out from fixtures).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
shared="$(cd "$root/../shared" 2>/dev/null && pwd)" || { echo "readme: ../shared (the data) is missing"; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/checkout"
ln -s "$build" "$work/checkout/build"
ln -s "$root/scripts" "$work/checkout/scripts"
ln -s "$root/tests" "$work/checkout/tests"  # tests/fixtures/hf: the repository's own Hugging Face models
ln -s "$shared" "$work/shared"
cd "$work/checkout"

# Sizes only (a fine-tune from a Hugging Face directory keeps its model's sizes): steps, model sizes, vocabulary size, sentences and images read, tokens
# generated, checkpoints kept and averaged; and a server's port, 0 (any free one), so that a busy 8080 cannot fail it.
tiny_model="--layers 1 --d-model 32 --heads 2 --d-ff 64"
substitute() {
  sed -E \
    -e 's/--size 8000/--size 400/' \
    -e 's/(scripts\/idx_to_folder\.py .*)$/\1 --limit 30/' \
    -e 's/--max-minutes [0-9]+/--max-minutes 5 --steps 2 --valid-sentences 5/' \
    -e 's/--validate-every [0-9]+/--validate-every 2/' \
    -e 's/--save-every [0-9]+/--save-every 1/' \
    -e 's/--last [0-9]+/--last 2/' \
    -e 's/--max-new-tokens [0-9]+/--max-new-tokens 20/' \
    -e 's/(zcat [^ ]*test_2016_flickr\.[a-z]+\.gz) /\1 | head -5 /' \
    -e 's/^build\/tfm train$/build\/tfm train --steps 20/' \
    -e "/--init-from/! s/^(build\/tfm (lm|bert) train .*)$/\\1 --steps 2 --validate-every 2 $tiny_model/" \
    -e "/--init-from/ s/^(build\/tfm (lm|bert) train .*)$/\\1 --steps 2 --validate-every 2/" \
    -e "/--init-from/! s/^(build\/tfm vit train .*)$/\\1 --steps 2 --validate-every 2 --valid-images 100 $tiny_model/" \
    -e "/--init-from/ s/^(build\/tfm vit train .*)$/\\1 --steps 2 --validate-every 2/" \
    -e 's/(build\/tfm serve .*)--port [0-9]+/\1--port 0/' \
    -e "s/^mpirun (-np [0-9]+ build\/tfm .*(lm|bert) train .*)$/mpirun $mpirun_root\\1 --steps 2 --validate-every 2 $tiny_model/"
}
# mpirun refuses to run as root unless told (CI's containers run as root).
mpirun_root=""
[[ $(id -u) -eq 0 ]] && mpirun_root="--allow-run-as-root "

# A server runs until it is stopped: it must load its models and listen within a
# minute, then SIGTERM must stop it with status 0 (its requests: tests/serve/).
serve_once() {
  local log
  log="$(mktemp)"
  bash -c "exec $1" 2>"$log" </dev/null &
  local pid=$! waited=0
  until grep -q "listening on" "$log" || ((waited++ >= 600)) || ! kill -0 $pid 2>/dev/null; do sleep 0.1; done
  kill -TERM $pid 2>/dev/null
  local status=0
  wait $pid || status=$?
  cat "$log"
  rm -f "$log"
  return $status
}

# The README's shell blocks, continuation lines joined, comments dropped.
commands() {
  awk '/^```sh/ { on = 1; next } /^```/ { on = 0 } on' "$root/README.md" |
    sed -E ':a; /\\$/ { N; s/\\\n *//; ba }' |
    sed -E 's/ +# .*$//'
}

# `mkdir` lines lay out a directory that a later command reads (a model with tokenizer.json alone).
mapfile -t all < <(commands | grep -E '(^D=|^mkdir |build/tfm|scripts/idx_to_folder\.py)' | sed -E 's/^scripts\/build\.sh && //' | substitute)
sets_up() { [[ "$1" == D=* || "$1" == mkdir\ * || "$1" == *scripts/idx_to_folder.py* ]]; }
makes_model() { [[ "$1" =~ build/tfm\ (vocab|train|lm\ train|vit\ train|bert\ train|bert\ classifier|bert\ tagger)( |$) ]]; }
ordered=()
makes_vocab() { [[ "$1" =~ build/tfm\ vocab( |$) ]]; }
for c in "${all[@]}"; do sets_up "$c" && ordered+=("$c"); done
for c in "${all[@]}"; do ! sets_up "$c" && makes_vocab "$c" && ordered+=("$c"); done  # before the trainers that read them
for c in "${all[@]}"; do ! sets_up "$c" && makes_model "$c" && ! makes_vocab "$c" && ordered+=("$c"); done
for c in "${all[@]}"; do ! sets_up "$c" && ! makes_model "$c" && ordered+=("$c"); done

# The GPU's commands (--device cuda) run where `tfm --version` names a GPU, and are
# listed as skipped elsewhere.
gpu=0
"$build/tfm" --version | grep -q '^CUDA: none' || gpu=1

# The copy task's exit status 3 says that not every sample was copied: the README's
# run copies them all, one of 20 steps does not.
succeeded() { [[ $1 == 0 || ($1 == 3 && "$2" == "build/tfm train --steps 20") ]]; }

ran=0 failed=0 skipped=0
for c in "${ordered[@]}"; do
  if [[ "$c" == D=* ]]; then eval "export $c"; continue; fi
  if [[ $gpu == 0 && "$c" == *"--device cuda"* ]]; then
    skipped=$((skipped + 1))
    echo "skip  (no GPU) $c"
    continue
  fi
  start=$SECONDS
  status=0
  if [[ "$c" == "build/tfm serve "* ]]; then
    out="$(serve_once "$c" 2>&1)" || status=$?
  else
    out="$(bash -c "$c" 2>&1 </dev/null)" || status=$?  # as a user's shell runs it: no pipefail
  fi
  if succeeded "$status" "$c"; then
    ran=$((ran + 1))
    echo "ok    $((SECONDS - start)) s  $c"
  else
    failed=$((failed + 1))
    echo "FAIL  (exit $status) $c"
    echo "$out" | tail -5 | sed 's/^/      /'
  fi
done
echo "readme: $ran passed, $failed failed, $skipped skipped (no GPU)"
[[ $failed == 0 && $ran -gt 0 ]]
