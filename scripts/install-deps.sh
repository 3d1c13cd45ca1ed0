#!/usr/bin/env bash
# Installs the Debian packages tfm needs, only those missing (safe to run again).
#   scripts/install-deps.sh               build + tests
#   scripts/install-deps.sh --with-torch  also PyTorch and OpenBLAS, for bench/ and
#                                         tests/reference/make_fixtures.py
set -euo pipefail
# ocl-icd-opencl-dev: oneDNN's CMake config requires OpenCL (its GPU runtime), which
# libdnnl-dev only recommends. libboost-dev (Beast and Asio) and libjpeg-dev: `tfm serve`; chromium,
# chromium-driver and python3-selenium: the test of its web page in a real browser.
# libopenmpi-dev and openmpi-bin: training on many processes (mpirun); iproute2: the test
# that puts them on hosts made of network namespaces.
packages=(g++ cmake make pkg-config libdnnl-dev ocl-icd-opencl-dev libsentencepiece-dev libpng-dev console-setup-linux nlohmann-json3-dev libcli11-dev zlib1g-dev libdeflate-dev libgtest-dev
          libjemalloc-dev dataset-fashion-mnist clang libomp-14-dev pybind11-dev python3-dev python3-numpy python3-pytest
          libboost-dev libjpeg-dev chromium chromium-driver python3-selenium libopenmpi-dev openmpi-bin iproute2)
if [[ "${1:-}" == "--with-torch" ]]; then
  # Without an optimised BLAS, Debian's torch runs on the reference BLAS (~20x slower GEMM).
  packages+=(python3-torch python3-numpy libopenblas0-openmp)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
