#!/usr/bin/env python3
"""Writes a tfm checkpoint's weights stored as bf16, each rounded to the nearest
bfloat16: half the bytes, for the GPU bundle (scripts/gpu/bundle.sh), which the device
tool carries within 64 MiB. tfm and tests/reference/safetensors_io.py read bf16 weights
as f32, so both sides of bench-translate load the same values. The metadata stays, but
for the checksums of the f32 bytes (tfm would check the bf16 bytes against them);
optimizer moments are left out (translation needs none). Needs numpy (Debian's
/usr/bin/python3 has it).
  bench/gpu/bf16_weights.py CHECKPOINT OUT"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "reference"))
import safetensors_io  # noqa: E402

F32_CHECKSUMS = ("tfm.crc32", "tfm.crc32.tensors")


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__.strip().splitlines()[-1].strip())
    tensors, meta = safetensors_io.load(sys.argv[1])
    weights = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    safetensors_io.save(sys.argv[2], weights, {k: v for k, v in meta.items() if k not in F32_CHECKSUMS}, dtype="BF16")


if __name__ == "__main__":
    main()
