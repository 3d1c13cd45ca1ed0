#!/usr/bin/python3
"""tfm and PyTorch on a busy machine (`bench/run.sh --load`): each job alone, then beside
as many busy single-thread processes (`while :; do :; done`) as there are cores, at
the same thread count. Half the CPU is left to the job, so about 2x slower is fair;
the report gives each engine's slowdown, and tfm's speed alone against libgomp's own
wait (GOMP_SPINCOUNT=300000, what tfm ran with before it chose its own: see
src/ops/openmp_wait.cpp). Rewrites the load section of docs/PERFORMANCE.md.

Jobs: the tinyshakespeare recipe for 300 steps (wall time of `tfm lm train` and
bench/torch_lm.py), training of the `small` preset on Multi30k batches (tfm_bench
train and bench/torch_train.py on the same batches: the timed steps), and greedy
translation of Multi30k val at batch 32 (tfm_bench translate as `tfm translate`
runs by default, and bench/torch_translate.py: the search time). Engines take turns
within each round, in the opposite order every other round; figures are medians. PyTorch runs fewer times under load, where
one run of it takes minutes."""
import contextlib
import datetime
import json
import os
import statistics
import subprocess
import tempfile

from compare import BENCH, PY, ROOT, TFM, arguments, cpu_model, publish, run

LIBGOMP_DEFAULT = {"GOMP_SPINCOUNT": "300000"}


class Load:
    """`count` busy single-thread processes while the `with` block runs."""

    def __init__(self, count):
        self.count = count

    def __enter__(self):
        self.procs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(self.count)]

    def __exit__(self, *_):
        for p in self.procs:
            p.kill()
            p.wait()


def jobs(a, work):
    """-> [(name, {engine: (command, seconds from (json, wall))})]; the first tfm_bench
    runs write the files PyTorch's twins read."""
    batches, job = os.path.join(work, "batches.json"), os.path.join(work, "job.json")
    train = [BENCH, "train", "--preset", "small", "--vocab", a.vocab, "--src", os.path.join(a.data, "train.de.gz"),
             "--tgt", os.path.join(a.data, "train.en.gz"), "--max-tokens", "4000", "--steps", str(a.train_steps)]
    config = run(train + ["--batches-out", batches], a.threads)[0]["config"]
    translate = [BENCH, "translate", "--model", a.model, "--input", os.path.join(a.data, "val.de.gz"), "--beam", "1", "--batch", "32"]
    run(translate + ["--workers", "1", "--job-out", job], a.threads)
    translate += ["--workers", "0"]
    from_json, from_wall = (lambda r: r[0]["seconds"]), (lambda r: r[2])
    threads = ["--threads", str(a.threads)]
    result = []
    if a.text:
        lm_out = os.path.join(work, "lm")
        result.append((f"tinyshakespeare recipe, {a.lm_steps} steps (wall time)", {
            "tfm": ([TFM, "lm", "train", "--text", a.text, "--out", lm_out, "--force", "--steps", str(a.lm_steps), "--sample-tokens", "0"],
                    from_wall),
            "pytorch": ([PY, os.path.join(ROOT, "bench", "torch_lm.py"), "--text", a.text, "--steps", str(a.lm_steps)] + threads, from_wall)}))
    result.append((f"training `small`, {a.train_steps} Multi30k batches of ≤ 4000 tokens (timed steps)", {
        "tfm": (train, from_json),
        "pytorch": ([PY, os.path.join(ROOT, "bench", "torch_train.py"), "--config", json.dumps(config), "--batches", batches] + threads,
                    from_json)}))
    result.append(("greedy translation of Multi30k val, batch 32 (search time)", {
        "tfm": (translate, from_json),
        "pytorch": ([PY, os.path.join(ROOT, "bench", "torch_translate.py"), "--model", a.model, "--ids", job, "--beam", "1", "--batch",
                     "32"] + threads, from_json)}))
    return result


def measure(a, name, engines):
    """-> {(variant, loaded): [seconds]}; variants: tfm, tfm with libgomp's wait, pytorch."""
    variants = [("tfm", engines["tfm"], {}, a.runs, a.runs),  # (name, (command, seconds), environment, runs alone, runs loaded)
                ("libgomp wait", engines["tfm"], LIBGOMP_DEFAULT, a.runs, a.peer_runs),
                ("pytorch", engines["pytorch"], {}, min(a.runs, 3), a.peer_runs)]
    times = {}
    for i in range(a.runs):
        this_round = []
        for loaded in (False, True):
            # Who goes first alternates: a round's first run follows the end of the last load
            # (measured: tfm always first made its translation look 4% slower than it is).
            for variant, (cmd, seconds), env, alone_runs, loaded_runs in (variants if i % 2 == 0 else variants[::-1]):
                if i < (loaded_runs if loaded else alone_runs):
                    with Load(os.cpu_count()) if loaded else contextlib.nullcontext():
                        times.setdefault((variant, loaded), []).append(seconds(run(cmd, a.threads, env)))
                    this_round.append(f"{variant}{' loaded' if loaded else ''} {times[(variant, loaded)][-1]:.1f} s")
        print(f"  {name}, round {i + 1}: " + ", ".join(this_round), flush=True)
    return times


def report(a, results):
    lines = [f"Measured {datetime.date.today()} on {cpu_model()}, {os.cpu_count()} cores, {a.threads} threads for both engines, "
             f"the load {os.cpu_count()} busy single-thread processes. Medians of {a.runs} alternating runs (PyTorch: "
             f"{min(a.runs, 3)} alone, {a.peer_runs} loaded; tfm with libgomp's wait: {a.runs} alone, {a.peer_runs} loaded); "
             "\"libgomp's wait\" is tfm with "
             "`GOMP_SPINCOUNT=300000`, libgomp's default, which tfm used before it chose its own.", "",
             "| job | engine | alone | loaded | slowdown | alone vs tfm |", "|---|---|---|---|---|---|"]
    for name, times in results:
        tfm_alone = statistics.median(times[("tfm", False)])
        for variant in ("tfm", "libgomp wait", "pytorch"):
            alone, loaded = statistics.median(times[(variant, False)]), statistics.median(times[(variant, True)])
            label = {"tfm": "tfm", "libgomp wait": "tfm, libgomp's wait", "pytorch": "PyTorch"}[variant]
            lines.append(f"| {name if variant == 'tfm' else ''} | {label} | {alone:.1f} s | {loaded:.1f} s | **{loaded / alone:.2f}×** | "
                         f"{'' if variant == 'tfm' else f'{alone / tfm_alone:.2f}×'} |")
    return "\n".join(lines)


def main():
    ap = arguments()
    ap.add_argument("--lm-steps", type=int, default=300)
    ap.add_argument("--train-steps", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5, help="alternating runs of tfm alone and loaded (medians reported)")
    ap.add_argument("--peer-runs", type=int, default=1, help="runs under load of PyTorch and of tfm with libgomp's wait (one can take minutes)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        results = [(name, measure(a, name, engines)) for name, engines in jobs(a, work)]
    publish(report(a, results), a.no_doc, "<!-- load: bench/run.sh --load writes this section -->", "<!-- end of load results -->")


if __name__ == "__main__":
    main()
