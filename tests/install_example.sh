#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds examples/translate and
# examples/train against the installed package (find_package(tfm)), and checks that
# the first translates as `tfm translate` does and the second trains a model it can
# generate with.
#   tests/install_example.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "$1")
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix/usr" >/dev/null
cmake -S examples/translate -B "$prefix/example" -DCMAKE_PREFIX_PATH="$prefix/usr" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$prefix/example" >/dev/null
model=tests/fixtures/threads/mt.safetensors
sentences=("Ein Mann schläft in einem grünen Raum auf einem Sofa." "Zwei Hunde spielen im Schnee.")
got=$("$prefix/example/translate" "$model" "${sentences[@]}")
want=$(printf '%s\n' "${sentences[@]}" | "$prefix/usr/bin/tfm" translate --model "$model")
[[ -n "$got" && "$got" == "$want" ]] || { echo "the example gave:"$'\n'"$got"$'\n'"tfm translate gave:"$'\n'"$want"; exit 1; }
cmake -S examples/train -B "$prefix/train" -DCMAKE_PREFIX_PATH="$prefix/usr" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$prefix/train" >/dev/null
for i in $(seq 40); do echo "the quick brown fox jumps over the lazy dog"; done > "$prefix/text.txt"
trained=$("$prefix/train/train_lm" "$prefix/text.txt" "$prefix/run" 60 "the quick" 2>&1) ||
  { echo "examples/train failed:"$'\n'"$trained"; exit 1; }
[[ -f $prefix/run/best.safetensors && $trained == *"best valid_loss "*" after 60 steps"$'\n'"the quick"?* ]] ||
  { echo "examples/train did not train and generate:"$'\n'"$trained"; exit 1; }
if err=$("$prefix/example/translate" /nonexistent.safetensors "x" 2>&1) || [[ $err != "translate: /nonexistent.safetensors: "* ]]; then
  echo "a missing checkpoint should be one clear error, got: $err"
  exit 1
fi
# The library loads what its code calls and nothing more (not SentencePiece's trainer).
library=$(find "$prefix/usr" -name 'libtfm.so.*' -type f | head -n 1)
needed=$(readelf -d "$library" | grep NEEDED)
if [[ $needed != *libdnnl* || $needed == *sentencepiece_train* || $needed == *jemalloc* ]]; then
  echo "libtfm.so loads a library its API does not need:"$'\n'"$needed"
  exit 1
fi
# It exports the public API's functions and no other function of tfm's.
internal=$(nm -DC --defined-only "$library" | grep -E ' [TW] tfm::' |
           grep -vE ' T tfm::(Translator|Encoder|Generator|Classifier|TextStream)::| T tfm::((read|write)_checkpoint|checkpoint_family|read_image|decode_image)\(' |
           grep -vE ' T tfm::(train\(|(Translation|Copy|LanguageModel|Vit|MaskedLm|SentenceClassifier|TokenClassifier)Task::training_defaults\(\))' || true)
if [[ -n $internal ]]; then
  echo "libtfm.so exports internal functions:"$'\n'"$internal"
  exit 1
fi
# The Python module, installed beside the library, imports from there and translates alike.
if [[ -n $(find "$build/python" -name 'tfm.*.so' 2>/dev/null) ]]; then
  site=$(dirname "$(find "$prefix/usr" -path '*dist-packages/tfm.*.so' | head -n 1)")
  py=$(PYTHONPATH=$site /usr/bin/python3 -c "import sys, tfm; print(tfm.__file__); print('\n'.join(t.hypotheses[0] for t in tfm.Translator('$model').translate(sys.argv[1:])))" "${sentences[@]}")
  [[ $py == "$prefix/usr/"*$'\n'"$want" ]] || { echo "the installed Python module gave:"$'\n'"$py"; exit 1; }
fi
echo "the installed library built the examples: one translates as tfm translate does, the other trained a model and generated with it"
