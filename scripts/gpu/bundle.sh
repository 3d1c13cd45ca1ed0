#!/usr/bin/env bash
# Builds, on this machine (no GPU needed), everything the GPU check runs, and packs it
# into .gpu-bundle/ (ignored by git; the device tool carries it): the check program,
# the test binary, tfm and the benchmarks, built for sm_80 and sm_90 in build/ (the Release build,
# TFM_CUDA on), with every shared library they need that a bare GPU machine lacks. The
# GPU machine has the CUDA toolkit and PyTorch but none of our Debian packages; cuBLAS
# is found there (scripts/gpu/run.sh). The benches' data come along: Multi30k (bench),
# tinyshakespeare (bench-lm), and for bench-translate a trained translation model:
#   TFM_GPU_TRANSLATION_MODEL=ckpt.safetensors TFM_GPU_TRANSLATION_VOCAB=vocab.model scripts/gpu/bundle.sh
# (its joint vocabulary; without them the bench-translate stage has no model and fails).
# scripts/gpu/NOTES.md says how a window runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -f build/CMakeCache.txt ] || cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
grep -q '^TFM_CUDA:STRING=OFF' build/CMakeCache.txt && { echo "bundle.sh: build/ was configured with TFM_CUDA=OFF" >&2; exit 1; }
model=${TFM_GPU_TRANSLATION_MODEL:-} model_vocab=${TFM_GPU_TRANSLATION_VOCAB:-}
if [ -z "$model" ]; then
  echo "bundle.sh: TFM_GPU_TRANSLATION_MODEL is not set: the bench-translate stage will have no model (set it and TFM_GPU_TRANSLATION_VOCAB)" >&2
elif [ ! -f "$model" ] || [ ! -f "$model_vocab" ]; then
  echo "bundle.sh: TFM_GPU_TRANSLATION_MODEL ('$model') and TFM_GPU_TRANSLATION_VOCAB ('$model_vocab') must both be files" >&2
  exit 1
fi
cmake --build build -j"$(nproc)" --target tfm tfm_tests tfm_gpu_check tfm_bench tfm_gemm_rates
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib"
bins=(build/tfm build/tests/tfm_tests build/tests/tfm_gpu_check build/bench/tfm_bench build/bench/tfm_gemm_rates)
cp "${bins[@]}" "$stage/"
# Every library the binaries load (the CUDA runtime too), except the C and C++
# runtimes (the machine's are as new or newer), the GPU driver's and cuBLAS (over
# 500 MiB; the machine's toolkit and PyTorch's wheels have it).
ldd "${bins[@]}" | awk '/=> \// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcublas|libcublasLt|libnvidia)[.-]' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
rm -rf .gpu-bundle && mkdir -p .gpu-bundle
tar -C "$stage" -czf .gpu-bundle/bundle.tar.gz .
# The Hugging Face fixtures the check's infer stage reads (../shared does not travel).
hf=$(sed -n 's/^TFM_HF_FIXTURES:PATH=//p' build/CMakeCache.txt)
if [ -d "$hf" ]; then cp -r "$hf" .gpu-bundle/hf; else echo "bundle.sh: no Hugging Face fixtures at '$hf': the infer stage will fail its HF rows" >&2; fi
# Multi30k's training text and a joint vocabulary for the bench stage (as scripts/multi30k.sh makes it).
data=../shared/data/multi30k
if [ -f "$data/train.de.gz" ]; then
  mkdir -p .gpu-bundle/data && cp "$data/train.de.gz" "$data/train.en.gz" .gpu-bundle/data/
  build/tfm vocab --src "$data/train.de.gz" --tgt "$data/train.en.gz" --joint --size 8000 --out .gpu-bundle/data/vocab >/dev/null
else
  echo "bundle.sh: no Multi30k at $data: the bench stage will fail" >&2
fi
# tinyshakespeare and a 16,000-piece vocabulary of it for bench-lm (bench/gpu/compare_lm.py says why subwords).
text=../shared/data/tinyshakespeare/input.txt
if [ -f "$text" ]; then
  mkdir -p .gpu-bundle/lm && gzip -c "$text" >.gpu-bundle/lm/input.txt.gz
  build/tfm vocab --text "$text" --size 16000 --out .gpu-bundle/lm/vocab >/dev/null
else
  echo "bundle.sh: no tinyshakespeare at $text: the bench-lm stage will fail" >&2
fi
# bench-translate's model, its weights stored as bf16 (half the bytes; both sides read them
# as f32; Debian's python3 has numpy), its vocabulary and Multi30k's validation
# sentences; translating one checks that the vocabulary is the model's.
if [ -n "$model" ]; then
  mkdir -p .gpu-bundle/translate
  /usr/bin/python3 bench/gpu/bf16_weights.py "$model" .gpu-bundle/translate/model.safetensors
  cp "$model_vocab" .gpu-bundle/translate/vocab.model && cp "$data/val.de.gz" .gpu-bundle/translate/
  build/bench/tfm_bench translate --model .gpu-bundle/translate/model.safetensors --vocab .gpu-bundle/translate/vocab.model \
    --input .gpu-bundle/translate/val.de.gz --limit 1 >/dev/null
fi
git rev-parse --short HEAD > .gpu-bundle/commit 2>/dev/null || echo unknown > .gpu-bundle/commit
echo "bundle: .gpu-bundle/bundle.tar.gz, $(du -m .gpu-bundle/bundle.tar.gz | cut -f1) MiB, $(ls "$stage/lib" | wc -l) libraries"
# The device tool carries 64 MiB in all: the working tree it sends (tracked files and
# untracked ones git does not ignore; a deleted file is not sent) and .gpu-bundle/.
carried=$( { git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 || true; du -cb .gpu-bundle | tail -1; } |
  awk '{ n += $1 } END { print int((n + 1048575) / 1048576) }')
echo "a device call carries ${carried} MiB: the working tree and .gpu-bundle/"
[ "$carried" -le 63 ] || { echo "bundle.sh: ${carried} MiB is over the 64 MiB the device tool carries; leave something out of .gpu-bundle/" >&2; exit 1; }
