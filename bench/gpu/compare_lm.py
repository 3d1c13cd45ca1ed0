#!/usr/bin/env python3
"""The GPU language-model benchmark, side by side in one run (scripts/gpu/run.sh, stage
bench-lm): a GPT-2-small-shaped model (12 layers, 768 wide, 12 heads, context 1024,
GELU, pre-norm, learned positions, tied output: `tfm lm train`'s GPT) trained on
tinyshakespeare with a 16,000-piece SentencePiece BPE vocabulary (`tfm vocab --text`;
tfm lm train takes characters or such a vocabulary, and a subword one keeps the output
layer's share of the work nearer GPT-2's than 65 characters would), 8 windows of 1024
tokens a step. tfm_bench lm trains it in f32 and bf16 and writes its windows;
bench/gpu/torch_lm_train.py trains tfm's PyTorch twin on the same windows, eager (flash
attention in bf16, fused AdamW) and torch.compile'd. Each precision's eager run is the
baseline of its rows. Prints one row per run in the GPU check's format (bench/gpu/rows.py)
with the median step, tokens/s, the model FLOP utilisation (nanoGPT's count: 6 x
parameters less the position table, plus 12 x layers x width x context for attention,
per token; against the H200's 790 TFLOP/s of bf16 products), peak memory and the ratio
to eager; keeps each run's output in --out. --device cpu --tiny tries it all on a CPU
in a minute (PyTorch 1.13 lacks torch.compile: add --no-compile)."""
import argparse
import json
import os
import sys

from rows import Budget, failure, row

HERE = os.path.dirname(os.path.abspath(__file__))
PEAK_FLOPS = 790e12  # what bf16 products reach on the lent H200s (the device tool's notes), f32 runs' MFU too
TINY = ["--layers", "2", "--d-model", "64", "--heads", "2", "--context", "64", "--batch", "2"]


def flops_per_token(r):
    """nanoGPT's estimate of a training step's flops per token (forward and backward)."""
    c = r["config"]
    weights = r["parameters"] - c["max_len"] * c["d_model"]  # the position table is looked up, not multiplied
    return 6 * weights + 12 * c["layers"] * c["d_model"] * c["max_len"]


class Bench:
    def __init__(self, a):
        self.a = a
        self.budget = Budget(a.budget)
        self.batches = os.path.join(a.out, "batches.json")
        self.tfm = None  # the first tfm run's result: its configuration and size

    def attempt(self, name, cmd):
        return self.budget.attempt(cmd, os.path.join(self.a.out, name + ".log"))

    def tfm_run(self, precision):
        a = self.a
        cmd = [a.tfm_bench, "--precision", precision, "lm", "--device", a.device, "--text", a.text, "--vocab", a.vocab,
               "--steps", str(a.steps), "--warmup", str(a.warmup), "--batches-out", self.batches] + (TINY if a.tiny else [])
        r = self.attempt("tfm_" + precision, cmd)
        if self.tfm is None and isinstance(r, dict):
            self.tfm = r
        return r

    def torch_run(self, engine, precision):
        if self.tfm is None:
            return RuntimeError("no windows: tfm_bench lm did not run")
        cmd = [sys.executable, os.path.join(HERE, "torch_lm_train.py"), "--config", json.dumps(self.tfm["config"]),
               "--batches", self.batches, "--precision", precision, "--warmup", str(self.a.warmup), "--device", self.a.device]
        return self.attempt(f"{engine}_{precision}", cmd + (["--compile"] if engine == "compile" else []))

    def report(self, engine, precision, r, eager=None):
        """A row for result r (or its failure), with the ratio to the eager result where given."""
        shape = self.shape()
        if not isinstance(r, dict):
            return row("bench-lm", f"{engine} lm train step", precision, shape, 0.0, failure(r))
        tokens_s = r["target_tokens"] / r["seconds"]
        mfu = tokens_s * flops_per_token(self.tfm) / PEAK_FLOPS
        memory = r.get("peak_memory_mib", r.get("peak_tensor_mib", 0.0))
        versus = f", {tokens_s / (eager['target_tokens'] / eager['seconds']):.2f}x eager" if isinstance(eager, dict) else ""
        attention = f", {r['attention']}" if r.get("attention") else ""  # PyTorch's bf16 runs: flash attention or not
        row("bench-lm", f"{r['engine']} lm train step", precision, shape, r["median_step_ms"],
            f"{tokens_s:,.0f} tok/s, MFU {100 * mfu:.1f}%, peak {memory:,.0f} MiB, loss {r['last_loss']:.3f}{versus}{attention}")

    def shape(self):
        if self.tfm is None:
            return "gpt"
        c = self.tfm["config"]
        return f"gpt {c['layers']}x{c['d_model']}, vocab {c['vocab']}, {self.tfm['target_tokens'] // self.tfm['steps']} tokens/step"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tfm-bench", required=True)
    ap.add_argument("--text", required=True, help="the training text (tinyshakespeare)")
    ap.add_argument("--vocab", required=True, help="its SentencePiece vocabulary (tfm vocab --text)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget", type=float, default=140, help="seconds for every run together: a run past it fails, the rows still print")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="a 2-layer, 64-wide model on 2 windows of 64 tokens (to try the script on a CPU)")
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    b = Bench(a)
    # f32 first, torch.compile last: a compilation that outlasts the budget costs its own row only.
    eager = {}
    for precision in ("f32", "bf16"):
        mine = b.tfm_run(precision)
        eager[precision] = b.torch_run("eager", precision)
        b.report("eager", precision, eager[precision])
        b.report("tfm", precision, mine, eager[precision])
    if not a.no_compile:
        b.report("compile", "bf16", b.torch_run("compile", "bf16"), eager["bf16"])


if __name__ == "__main__":
    main()
