#!/usr/bin/env python3
"""The GPU translation benchmark, side by side in one run (scripts/gpu/run.sh, stage
bench-translate): Multi30k's validation sentences (val.de.gz, 1,014) translated by a
trained translation model (the checkpoint scripts/gpu/bundle.sh carries, its weights
stored as bf16 and read as f32 by both sides), greedy and beam 4 at batch 128, in f32:
tfm_bench translate --device cuda (batch by batch, as tfm translate orders them) against
bench/torch_translate.py's cached incremental decoder on the same GPU, on the source ids
tfm wrote and with its search options. Each side first searches its first batch once,
untimed (a GPU's first calls load its kernels). Prints one row per run in the GPU
check's format (bench/gpu/rows.py): sentences/s, the ratio to PyTorch and how many of
the translations are the same words; keeps each run's output in --out. --device cpu
--limit 8 tries it on a CPU."""
import argparse
import os
import sys

from rows import Budget, failure, row

HERE = os.path.dirname(os.path.abspath(__file__))
SEARCHES = [("greedy", 1), ("beam 4", 4)]


def report(engine, search, shape, r, torch_result=None):
    """A row for result r (or its failure); tfm's rows compare it with PyTorch's result."""
    if not isinstance(r, dict):
        return row("bench-translate", f"{engine} translate {search}", "f32", shape, 0.0, failure(r))
    rate = r["sentences"] / r["seconds"]
    versus = ""
    if isinstance(torch_result, dict):
        same = sum(x == y for x, y in zip(r["outputs"], torch_result["outputs"]))
        versus = f", {rate / (torch_result['sentences'] / torch_result['seconds']):.2f}x PyTorch, {same} of {r['sentences']} the same words"
    row("bench-translate", f"{r['engine']} translate {search}", "f32", shape, r["seconds"] * 1e3, f"{rate:,.1f} sentences/s{versus}")


def search_flags(a, beam):
    """What both sides are told: the search, the batch, the sentences, the device and one untimed batch first."""
    return ["--beam", str(beam), "--batch", str(a.batch), "--limit", str(a.limit), "--device", a.device, "--warmup", "1"]


def tfm_run(a, budget, beam, job):
    """tfm_bench translate's result; it writes the source ids and search options to `job`."""
    if not os.path.isfile(a.model):
        return RuntimeError("no model: scripts/gpu/bundle.sh ran without TFM_GPU_TRANSLATION_MODEL")
    cmd = [a.tfm_bench, "translate", "--model", a.model, "--vocab", a.vocab, "--input", a.input, "--job-out", job]
    return budget.attempt(cmd + search_flags(a, beam), os.path.join(a.out, f"tfm_beam{beam}.log"))


def torch_run(a, budget, beam, job):
    cmd = [sys.executable, os.path.join(HERE, "..", "torch_translate.py"), "--model", a.model, "--ids", job]
    return budget.attempt(cmd + search_flags(a, beam), os.path.join(a.out, f"torch_beam{beam}.log"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tfm-bench", required=True)
    ap.add_argument("--model", required=True, help="the translation checkpoint (bf16-stored weights from bench/gpu/bf16_weights.py)")
    ap.add_argument("--vocab", required=True, help="its joint SentencePiece vocabulary")
    ap.add_argument("--input", required=True, help="the source sentences (Multi30k's val.de.gz)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--limit", type=int, default=0, help="only the first N sentences (0: all)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget", type=float, default=140, help="seconds for every run together: a run past it fails, the rows still print")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    budget = Budget(a.budget)
    for name, beam in SEARCHES:
        job = os.path.join(a.out, f"job_beam{beam}.json")
        shape = f"{os.path.basename(a.input)}{f', first {a.limit}' if a.limit else ''}, batch {a.batch}"
        mine = tfm_run(a, budget, beam, job)
        theirs = torch_run(a, budget, beam, job) if isinstance(mine, dict) else RuntimeError("no ids: tfm_bench translate did not run")
        report("pytorch", name, shape, theirs)
        report("tfm", name, shape, mine, theirs)


if __name__ == "__main__":
    main()
