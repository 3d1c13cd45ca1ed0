"""Minimal safetensors writer (F32, or BF16) and reader (F32, F16, BF16 as float32; I64, U8):
Debian ships no safetensors module."""
import json
import struct

import numpy as np


def bf16_bytes(a):
    """float32 values as bfloat16 bytes, each rounded to the nearest (ties to even), as torch's .bfloat16()."""
    u = a.astype("<f4").view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()


def save(path, tensors, metadata=None, dtype="F32"):
    """dtype: "F32", or "BF16" for half the bytes (finite values only)."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        # np.array, not ascontiguousarray, which would turn a 0-d scalar into shape [1]
        a = np.array(t.detach().cpu().float().numpy() if hasattr(t, "detach") else t, dtype=np.float32, order="C")
        b = bf16_bytes(a) if dtype == "BF16" else a.astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8", "U8": "u1"}


def array(raw, dtype, shape):
    if dtype == "BF16":  # the upper half of a float32
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
    a = np.frombuffer(raw, dtype=DTYPES[dtype]).reshape(shape)
    return a.astype(np.float32) if dtype == "F16" else a.copy()


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, h in header.items():
        b, e = h["data_offsets"]
        out[name] = array(data[b:e], h["dtype"], h["shape"])
    return out, meta
