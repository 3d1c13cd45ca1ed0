#!/usr/bin/env bash
# Builds, on this machine (no GPU needed), everything the GPU check runs, and packs it
# into .gpu-bundle/ (ignored by git; the device tool carries it): the check program,
# the test binary, tfm and the benchmarks, built for sm_80 and sm_90 in build/ (the Release build,
# TFM_CUDA on), with every shared library they need that a bare GPU machine lacks. The
# GPU machine has the CUDA toolkit and PyTorch but none of our Debian packages; cuBLAS
# is found there (scripts/gpu/run.sh). scripts/gpu/NOTES.md says
# how a window runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -f build/CMakeCache.txt ] || cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
grep -q '^TFM_CUDA:STRING=OFF' build/CMakeCache.txt && { echo "bundle.sh: build/ was configured with TFM_CUDA=OFF" >&2; exit 1; }
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
git rev-parse --short HEAD > .gpu-bundle/commit 2>/dev/null || echo unknown > .gpu-bundle/commit
size=$(du -m .gpu-bundle/bundle.tar.gz | cut -f1)
echo "bundle: .gpu-bundle/bundle.tar.gz, ${size} MiB, $(ls "$stage/lib" | wc -l) libraries"
[ "$size" -le 60 ] || { echo "bundle.sh: the bundle is over 60 MiB (the device tool carries 64 MiB in all)" >&2; exit 1; }
