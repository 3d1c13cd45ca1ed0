#!/usr/bin/env bash
# Builds tfm and runs every test (unit, finite-difference, PyTorch reference, CLI).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
# One test at a time: each already uses every core through OpenMP.
ctest --test-dir build --output-on-failure
