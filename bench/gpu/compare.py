#!/usr/bin/env python3
"""The GPU training benchmark, side by side in one run (scripts/gpu/run.sh, stage
bench): tfm_bench trains the `base` preset on Multi30k batches of --max-tokens tokens
on the GPU in f32 and bf16, then bench/gpu/torch_train.py trains PyTorch's twin of the
model on the very same batches, eager in f32 and bf16 (flash attention; and with
PyTorch's own choice, cuDNN's, which builds a graph per shape) and torch.compile'd in bf16.
Prints one row per run in the GPU check's format (ROW, tab-separated: stage, check,
dtype, shape, error, tol, det, device_ms, cpu_ms, result) and keeps each run's JSON
line in --out."""
import argparse
import json
import os
import sys

from rows import failure, row, run

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tfm-bench", required=True)
    ap.add_argument("--data", required=True, help="train.de.gz, train.en.gz and vocab.model")
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-tokens", type=int, default=25000)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    shape = f"base, {a.max_tokens} tokens/batch"
    batches = os.path.join(a.out, "batches.json")
    eager = {}
    runs = [("tfm", p) for p in ("f32", "bf16")] + [("eager", p) for p in ("f32", "bf16")] + [("cudnn", "bf16")]
    runs += [] if a.no_compile else [("compile", "bf16")]
    config = None
    for engine, precision in runs:
        name = f"{engine}_{precision}"
        try:
            if engine == "tfm":
                r = run([a.tfm_bench, "--precision", precision, "train", "--device", "cuda", "--preset", "base",
                         "--vocab", os.path.join(a.data, "vocab.model"), "--src", os.path.join(a.data, "train.de.gz"),
                         "--tgt", os.path.join(a.data, "train.en.gz"), "--max-tokens", str(a.max_tokens), "--steps", str(a.steps),
                         "--warmup", "3", "--batches-out", batches], os.path.join(a.out, name + ".log"), 600)
                config = json.dumps(r["config"])
            else:
                if config is None:
                    raise RuntimeError("no batches: tfm_bench did not run")
                cmd = [sys.executable, os.path.join(HERE, "torch_train.py"), "--config", config, "--batches", batches, "--precision", precision]
                flags = {"compile": ["--compile"], "cudnn": ["--cudnn-sdpa"]}.get(engine, [])
                r = run(cmd + flags, os.path.join(a.out, name + ".log"), 600)
        except Exception as e:  # noqa: BLE001 - each run's failure is a row, the others go on
            row("bench", f"{engine} train step", precision, shape, 0.0, failure(e))
            continue
        tokens_s = r["target_tokens"] / r["seconds"]
        if engine == "eager":
            eager[precision] = tokens_s
        versus = f", {tokens_s / eager[precision]:.2f}x eager" if engine != "eager" and precision in eager else ""
        memory = r.get("peak_memory_mib", r.get("peak_tensor_mib", 0.0))
        row("bench", f"{r['engine']} train step", precision, shape, r["median_step_ms"], f"{tokens_s:,.0f} tok/s, peak {memory:,.0f} MiB{versus}")


if __name__ == "__main__":
    main()
