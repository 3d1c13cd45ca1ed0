#!/usr/bin/python3
"""Data-parallel training on this machine (`bench/run.sh --scaling`): `tfm train` on
Multi30k with the `small` and `base` presets, 1 process x N threads against N processes x 1
thread (mpirun over loopback TCP), the gradient sums overlapping the backward pass or not
(--bucket-mb 0), and with the optimiser's state sharded; tfm's all-reduce bandwidth over
loopback TCP and across hosts made of network namespaces (tests/dist/hosts.py, root only);
and from these, the step time and weak-scaling efficiency of `base` projected to 8, 64
and 512 processes on 10, 25 and 100 Gb/s networks. Rewrites the results in docs/SCALING.md."""
import argparse
import datetime
import gzip
import json
import os
import subprocess
import sys
import tempfile

from compare import ROOT, TFM, cpu_model, publish

sys.path.insert(0, os.path.join(ROOT, "tests", "dist"))
from hosts import Refused, namespace_hosts  # noqa: E402

ALLREDUCE = os.path.join(ROOT, "build", "bench", "tfm_allreduce")
LOOPBACK = ["mpirun", "--allow-run-as-root", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo",
            "--mca", "oob_tcp_if_include", "lo"]
DOC = os.path.join(ROOT, "docs", "SCALING.md")


def step_seconds(run_dir, skip):
    """The mean time of a run's steps after the first `skip` (set-up, first allocations)."""
    elapsed = [json.loads(line)["elapsed_s"] for line in open(os.path.join(run_dir, "metrics.jsonl")) if "train_loss" in line]
    return (elapsed[-1] - elapsed[skip - 1]) / (len(elapsed) - skip)


def train(a, work, preset, processes, threads, extra, name):
    out = os.path.join(work, name)
    command = ([*LOOPBACK, "-np", str(processes), "--bind-to", "core"] if processes > 1 else []) + [
        TFM, "--threads", str(threads), "train", "--preset", preset, "--train-src", a.src, "--train-tgt", a.tgt,
        "--valid-src", a.valid_src, "--valid-tgt", a.valid_tgt, "--src-vocab", a.vocab, "--tgt-vocab", a.vocab,
        "--steps", str(a.steps[preset]), "--max-tokens", "2500", "--validate-every", "0", "--log-every", "1", "--out", out, *extra]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{run.stdout}{run.stderr}")
    parameters = int(run.stdout.split(" parameters")[0].rsplit(", ", 1)[1])
    return step_seconds(out, a.skip), parameters


def bench_training(a, work):
    rows = []
    n = a.processes
    for preset in ("small", "base"):
        one, parameters = train(a, work, preset, 1, n, [], f"{preset}-1x{n}")
        overlap, _ = train(a, work, preset, n, 1, [], f"{preset}-{n}x1")
        serial, _ = train(a, work, preset, n, 1, ["--bucket-mb", "0"], f"{preset}-{n}x1-serial")
        sharded, _ = train(a, work, preset, n, 1, ["--shard-optimizer"], f"{preset}-{n}x1-sharded")
        rows.append({"preset": preset, "parameters": parameters, "one": one, "overlap": overlap, "serial": serial, "sharded": sharded})
        print(f"  {preset}: 1x{n} {one:.3f} s/step, {n}x1 {overlap:.3f} (overlapped), {serial:.3f} (after the pass), "
              f"{sharded:.3f} (sharded optimiser)", flush=True)
    return rows


def bandwidth(mpirun, sizes):
    run = subprocess.run([*mpirun, ALLREDUCE, *map(str, sizes)], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"tfm_allreduce failed:\n{run.stdout}{run.stderr}")
    return [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]


def bench_bandwidth(a, work):
    sizes = [1 / 256, 16, 64, 256]  # 4 KiB: the time of a message, not of its bytes
    loopback = bandwidth([*LOOPBACK, "-np", str(a.processes)], sizes)
    try:
        with namespace_hosts(a.processes, work) as hosts:
            veth = bandwidth(hosts.mpirun, sizes)
    except Refused as e:
        print(f"  {e}: no veth figures", flush=True)
        veth = None
    for i, size in enumerate(sizes):
        print(f"  all-reduce of {size:g} MiB: loopback {loopback[i]['seconds'] * 1e6:.0f} us, {loopback[i]['bus_gbit_s']:.1f} Gbit/s"
              + (f"; veth {veth[i]['seconds'] * 1e6:.0f} us, {veth[i]['bus_gbit_s']:.1f} Gbit/s" if veth else ""), flush=True)
    return sizes, loopback, veth


# The time a message takes between hosts, whatever its size (TCP over Ethernet; loopback's
# is printed beside it for scale).
HOP_SECONDS = 25e-6


def ring_seconds(processes, nbytes, gbit_s, buckets=1):
    """A ring all-reduce of `buckets` buffers of nbytes in all: 2 (N - 1) messages each,
    and each process sends and receives 2 (N - 1) / N of the bytes."""
    return buckets * 2 * (processes - 1) * HOP_SECONDS + 2 * (processes - 1) / processes * nbytes * 8 / (gbit_s * 1e9)


def report(a, training, bandwidths):
    sizes, loopback, veth = bandwidths
    n = a.processes
    lines = [f"Measured {datetime.date.today()} on {cpu_model()} ({os.cpu_count()} cores), `bench/run.sh --scaling`: "
             f"`tfm train` on the first {a.pairs:,} Multi30k pairs, batches of 2,500 tokens, seconds per step after the "
             f"first {a.skip} (the mean of steps {a.skip + 1}-{a.steps['small']} of `small`, {a.skip + 1}-{a.steps['base']} of `base`); "
             f"{n} processes talk TCP over loopback (no shared memory), bound to a core each.", "",
             f"| preset | parameters | 1 process × {n} threads | {n} processes × 1 thread | ratio | sums after the pass (`--bucket-mb 0`) | "
             f"ratio | sharded optimiser | ratio |", "|---|---|---|---|---|---|---|---|---|"]
    for r in training:
        lines.append(f"| {r['preset']} | {r['parameters'] / 1e6:.1f} M | {r['one']:.3f} s | {r['overlap']:.3f} s | "
                     f"**{r['one'] / r['overlap']:.0%}** | {r['serial']:.3f} s | {r['one'] / r['serial']:.0%} | "
                     f"{r['sharded']:.3f} s | {r['one'] / r['sharded']:.0%} |")
    lines += ["", f"All-reduce of tfm's communicator ({n} processes, in 16 MiB buckets as in training): the time of one, and "
              "the bus bandwidth, 2 (N − 1) / N × bytes / seconds.", "",
              "| buffer | loopback TCP | veth link between namespace hosts |", "|---|---|---|"]
    for i, size in enumerate(sizes):
        cell = lambda r: f"{r['seconds'] * 1e6:.0f} µs" if size < 1 else f"{r['bus_gbit_s']:.1f} Gbit/s"  # noqa: E731
        lines.append(f"| {'4 KiB' if size < 1 else f'{size:g} MiB'} | {cell(loopback[i])} | "
                     + (f"{cell(veth[i])} |" if veth else "not measured (no namespaces here) |"))
    base = next(r for r in training if r["preset"] == "base")
    nbytes = base["parameters"] * 4
    measured = loopback[-1]["bus_gbit_s"]
    comm = 2 * (n - 1) / n * nbytes * 8 / (measured * 1e9)
    lines += ["", f"The gradient sums of `base` ({nbytes / 2**20:.0f} MiB a step) take about {comm:.2f} s at the {measured:.1f} Gbit/s "
              f"measured over loopback, {comm / base['one']:.0%} of a step; summed after the pass rather than during it, they "
              f"changed the step by {base['serial'] - base['overlap']:+.3f} s (`small`: {training[0]['serial'] - training[0]['overlap']:+.3f} s). "
              "Here overlap cannot show: over loopback a sum is CPU work (copies through the kernel), done on the same two cores "
              "that compute, so it takes their time whether it runs during the pass or after it.", ""]
    # Projection: each process computes a batch of the same size as here on n threads'
    # worth of cores (the step time of 1 process x n threads); the sums overlap the
    # backward pass, about 2/3 of a step, except the last bucket's.
    compute = base["one"]
    backward = compute * 2 / 3
    bucket = 16 * 2**20
    buckets = -(-nbytes // bucket)
    lines += [f"Projected weak scaling of `base` (a batch of 2,500 tokens per process, computed in {compute:.2f} s as by 1 "
              f"process × {n} threads here, so with {n} cores per process): a ring all-reduce of each of the {buckets} buckets "
              f"sends 2 (N − 1) messages, assumed {HOP_SECONDS * 1e6:.0f} µs each (TCP over Ethernet; "
              f"{loopback[0]['seconds'] / (2 * (n - 1)) * 1e6:.0f} µs over loopback here), and 2 (N − 1) / N × "
              f"{nbytes / 2**20:.0f} MiB per process per step; overlap hides it behind the backward pass (about two thirds "
              "of a step), except the last bucket's sum, which starts when the pass ends. Efficiency: the step's compute "
              "over the whole step.", "",
              "| processes | network | all-reduce | exposed | step | efficiency |", "|---|---|---|---|---|---|"]
    for procs in (8, 64, 512):
        for gbit in (10, 25, 100):
            total = ring_seconds(procs, nbytes, gbit, buckets)
            exposed = max(total - backward, 0) + ring_seconds(procs, min(bucket, nbytes), gbit)
            lines.append(f"| {procs} | {gbit} Gb/s | {total:.3f} s | {exposed:.3f} s | {compute + exposed:.2f} s | "
                         f"{compute / (compute + exposed):.0%} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", required=True, help="a joint SentencePiece vocabulary of Multi30k")
    ap.add_argument("--data", required=True, help="Multi30k directory")
    ap.add_argument("--processes", type=int, default=os.cpu_count())
    ap.add_argument("--pairs", type=int, default=10000)
    ap.add_argument("--no-doc", action="store_true", help="print only; leave docs/SCALING.md alone")
    a = ap.parse_args()
    a.steps, a.skip = {"small": 30, "base": 14}, 4
    with tempfile.TemporaryDirectory() as work:
        def head(name, lines):
            path = os.path.join(work, name)
            with gzip.open(os.path.join(a.data, name + ".gz"), "rt") as f, open(path, "w") as out:
                for _, line in zip(range(lines), f):
                    out.write(line)
            return path
        a.src, a.tgt = head("train.de", a.pairs), head("train.en", a.pairs)
        a.valid_src, a.valid_tgt = head("val.de", 8), head("val.en", 8)
        bandwidths = bench_bandwidth(a, work)
        training = bench_training(a, work)
    publish(report(a, training, bandwidths), a.no_doc, path=DOC)


if __name__ == "__main__":
    main()
