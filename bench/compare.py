#!/usr/bin/python3
"""Runs tfm and PyTorch side by side on the same work (see bench/run.sh), prints a
table of ratios and rewrites the results section of docs/PERFORMANCE.md.

Every measurement runs in a process of its own, so that its peak resident memory
is that job's alone: VmHWM, sampled while it runs (wait4's ru_maxrss would count
this script's own memory, which Linux carries across fork and exec)."""
import argparse
import datetime
import gzip
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "build", "bench", "tfm_bench")
TFM = os.path.join(ROOT, "build", "tfm")
PY = "/usr/bin/python3"


def has_avx512():
    with open("/proc/cpuinfo") as f:
        return any(line.startswith("flags") and " avx512f" in line for line in f)


# Debian's OpenBLAS does not recognise AMD's AVX-512 CPUs and falls back to AVX2 kernels
# there; naming the core type makes it use AVX-512 (on a CPU without it, an illegal
# instruction).
OPENBLAS = {"OPENBLAS_CORETYPE": "SkylakeX"} if has_avx512() else {}


def run(cmd, threads, env=None):
    """-> (the JSON line the command printed, its peak resident memory in MiB, wall seconds)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), **OPENBLAS, **(env or {}))
    t0 = time.perf_counter()
    peak_kib = 0
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        cmdline = "\0".join(cmd) + "\0"
        while proc.poll() is None:
            try:
                if open(f"/proc/{proc.pid}/cmdline").read() != cmdline:  # not yet exec'd: still a copy of this script
                    continue
                with open(f"/proc/{proc.pid}/status") as status:
                    peak_kib = max([peak_kib] + [int(l.split()[1]) for l in status if l.startswith("VmHWM:")])
            except OSError:
                pass
            finally:
                time.sleep(0.02)
        wall = time.perf_counter() - t0
        out.seek(0), err.seek(0)
        text, errors = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{errors[-2000:]}{text[-2000:]}")
    lines = [l for l in text.splitlines() if l.startswith("{")]
    return (json.loads(lines[-1]) if lines else {}), peak_kib / 1024, wall


def step_flops(batch, cfg, packed_source):
    """Multiply-add FLOPs of one training step (forward x 3) on the shapes an engine computes: the padded
    batch (PyTorch), or with the source's padding left out of the encoder and the encoder-decoder keys
    (tfm's training forward packs the source's real tokens)."""
    B, S, T = len(batch["src"]), len(batch["src"][0]), len(batch["tgt_in"][0])
    d, f, V = cfg["d_model"], cfg["d_ff"], cfg["tgt_vocab"]
    lengths = [sum(t != cfg["pad_id"] for t in row) for row in batch["src"]] if packed_source else [S] * B
    ns, nt = sum(lengths), B * T
    enc = cfg["encoder_layers"] * (8 * d * d * ns + 4 * d * f * ns + 4 * sum(n * n for n in lengths) * d)
    dec = cfg["decoder_layers"] * (8 * d * d * nt + 4 * B * T * T * d  # self-attention
                                   + 4 * d * d * nt + 4 * d * d * ns + 4 * T * ns * d  # cross-attention
                                   + 4 * d * f * nt)
    return 3 * (enc + dec + 2 * d * V * nt)


def bench_training(a, work, peak_gflops):
    rows = []
    for preset in ["small", "base"]:
        batches = os.path.join(work, f"batches_{preset}.json")
        t, t_mem, _ = run([BENCH, "train", "--preset", preset, "--vocab", a.vocab, "--src", a.train_src, "--tgt", a.train_tgt,
                           "--max-tokens", str(a.max_tokens), "--steps", str(a.steps), "--batches-out", batches], a.threads)
        p, p_mem, _ = run([PY, os.path.join(ROOT, "bench", "torch_train.py"), "--config", json.dumps(t["config"]), "--batches", batches,
                           "--threads", str(a.threads)], a.threads)
        timed = json.load(open(batches))[3:]
        tfm_flops, torch_flops = (sum(step_flops(b, t["config"], packed) for b in timed) for packed in (True, False))
        rows.append({"preset": preset, "parameters": t["parameters"], "tfm": t, "torch": p, "tfm_mem": t_mem, "torch_mem": p_mem,
                     "tfm_tok_s": t["target_tokens"] / t["seconds"], "torch_tok_s": p["target_tokens"] / p["seconds"],
                     "tfm_gflops": tfm_flops / t["seconds"] / 1e9, "torch_gflops": torch_flops / p["seconds"] / 1e9})
        r = rows[-1]
        print(f"  training {preset}: tfm {r['tfm_tok_s']:.0f} tok/s ({r['tfm_gflops'] / peak_gflops:.0%} of peak), "
              f"pytorch {r['torch_tok_s']:.0f} tok/s ({r['torch_gflops'] / peak_gflops:.0%})", flush=True)
    return rows


def median_run(runs):
    """-> (the run of median tokens/s, the highest peak memory of all): runs are (json, MiB, wall) triples."""
    ranked = sorted(runs, key=lambda r: r[0]["target_tokens"] / r[0]["seconds"])
    return ranked[len(ranked) // 2][0], max(r[1] for r in runs)


def bench_translation(a, work):
    """tfm one batch at a time on all threads (as PyTorch decodes), and at batch 32 also as
    `tfm translate` does by default: a batch per thread, one thread each. The engines take
    turns `a.repeats` times and each figure is the median run: this machine's speed drifts
    by 10-30% over minutes, and back-to-back pairs keep the drift out of the ratios."""
    rows = []
    for label, beam, batch, limit in [("greedy, batch 32", 1, 32, 0), ("beam 4, batch 32", 4, 32, 0),
                                      ("greedy, batch 1", 1, 1, a.latency_sentences), ("beam 4, batch 1", 4, 1, a.latency_sentences)]:
        job = os.path.join(work, "job.json")
        tfm_cmd = [BENCH, "translate", "--model", a.model, "--input", a.valid_src, "--beam", str(beam), "--batch", str(batch),
                   "--limit", str(limit)]
        torch_cmd = [PY, os.path.join(ROOT, "bench", "torch_translate.py"), "--model", a.model, "--ids", job, "--beam", str(beam),
                     "--batch", str(batch), "--threads", str(a.threads)]
        tfm_runs, torch_runs, worker_runs = [], [], []
        for i in range(a.repeats):
            tfm_runs.append(run(tfm_cmd + ["--workers", "1"] + (["--job-out", job] if i == 0 else []), a.threads))
            torch_runs.append(run(torch_cmd, a.threads))
            if batch > 1:
                worker_runs.append(run(tfm_cmd + ["--workers", "0"], a.threads))
        (t, t_mem), (p, p_mem) = median_run(tfm_runs), median_run(torch_runs)
        same = sum(x == y for x, y in zip(t["outputs"], p["outputs"])) / len(t["outputs"])
        rows.append({"label": label, "beam": beam, "batch": batch, "tfm": t, "torch": p, "tfm_mem": t_mem, "torch_mem": p_mem, "same": same,
                     "tfm_tok_s": t["target_tokens"] / t["seconds"], "torch_tok_s": p["target_tokens"] / p["seconds"]})
        r = rows[-1]
        if worker_runs:
            w, w_mem = median_run(worker_runs)
            r.update(workers_tok_s=w["target_tokens"] / w["seconds"], workers_mem=w_mem,
                     workers_same=sum(x == y for x, y in zip(w["outputs"], p["outputs"])) / len(w["outputs"]))
        print(f"  {label}: tfm {r['tfm_tok_s']:.0f} tok/s" + (f" ({r['workers_tok_s']:.0f} a batch per thread)" if "workers_tok_s" in r else "") +
              f", pytorch {r['torch_tok_s']:.0f} tok/s, median {t['median_batch_ms']:.1f} vs {p['median_batch_ms']:.1f} ms per batch, "
              f"same output {same:.1%} (medians of {a.repeats} alternating runs)", flush=True)
    return rows


LATENCY_THREADS = (1, 2, 4)  # (4 is more threads than this machine's cores: it must not hurt)
LATENCY_MARKERS = ("<!-- latency: bench/run.sh --latency writes this section -->", "<!-- end of latency -->")


def startup_seconds(a, runs=5):
    """The median wall time of `tfm translate` of one sentence (val's first) as a fresh process."""
    with gzip.open(a.valid_src, "rt") as f:
        sentence = f.readline()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([TFM, "translate", "--model", a.model], input=sentence, capture_output=True, text=True, check=True)
        times.append(time.perf_counter() - t0)
    return sorted(times)[runs // 2]


def bench_latency(a, work):
    """One sentence at a time (batch 1, val's first `a.latency_sentences`), greedy and beam 4,
    on 1, 2 and 4 threads, the engines taking turns `a.repeats` times (medians of the runs'
    median milliseconds a sentence): the latency a `tfm serve` request sees, and whether
    more threads lower it. Then tfm's start-up."""
    rows = []
    job = os.path.join(work, "latency_job.json")
    for beam in (1, 4):
        for threads in LATENCY_THREADS:
            tfm_cmd = [BENCH, "translate", "--model", a.model, "--input", a.valid_src, "--beam", str(beam), "--batch", "1",
                       "--limit", str(a.latency_sentences), "--workers", "1"]
            torch_cmd = [PY, os.path.join(ROOT, "bench", "torch_translate.py"), "--model", a.model, "--ids", job, "--beam", str(beam),
                         "--batch", "1", "--threads", str(threads)]
            ms = {"tfm": [], "torch": [], "bf16": [], "int8": []}
            for i in range(a.repeats):
                ms["tfm"].append(run(tfm_cmd + (["--job-out", job] if i == 0 else []), threads)[0]["median_batch_ms"])
                ms["torch"].append(run(torch_cmd, threads)[0]["median_batch_ms"])
                for precision in ("bf16", "int8"):  # the opt-in modes, for the same sentences
                    ms[precision].append(run(tfm_cmd + ["--precision", precision], threads)[0]["median_batch_ms"])
            rows.append({"search": "greedy" if beam == 1 else f"beam {beam}", "threads": threads,
                         **{f"{k}_ms": sorted(v)[a.repeats // 2] for k, v in ms.items()}})
            r = rows[-1]
            print(f"  batch 1, {r['search']}, {threads} threads: tfm {r['tfm_ms']:.1f} ms (bf16 {r['bf16_ms']:.1f}, int8 "
                  f"{r['int8_ms']:.1f}), pytorch {r['torch_ms']:.1f} ms a sentence", flush=True)
    startup = startup_seconds(a)
    print(f"  start-up: tfm translate of one sentence {startup:.3f} s", flush=True)
    return {"rows": rows, "startup_s": startup}


def latency_report(a, latency):
    lines = [f"Measured {datetime.date.today()} on {cpu_model()}, {os.cpu_count()} cores; `{os.path.relpath(a.model, ROOT)}`, "
             f"the first {a.latency_sentences} sentences of Multi30k val one at a time; medians of {a.repeats} alternating runs.", "",
             "| search | threads | tfm median ms a sentence | PyTorch median ms | PyTorch / tfm | tfm `--precision bf16` | tfm `--precision int8` |",
             "|---|---|---|---|---|---|---|"]
    for r in latency["rows"]:
        lines.append(f"| {r['search']} | {r['threads']} | {r['tfm_ms']:.1f} | {r['torch_ms']:.1f} | **{ratio(r['torch_ms'], r['tfm_ms'])}** | "
                     f"{r['bf16_ms']:.1f} | {r['int8_ms']:.1f} |")
    lines += ["", f"Start-up: `tfm translate` of one sentence as a fresh process, **{latency['startup_s']:.3f} s** (median of 5)."]
    return "\n".join(lines)


def bench_reduced_precision(a, training, translation):
    """tfm's opt-in bf16 and int8 modes against the same PyTorch (f32) runs, and their
    BLEU on test_2016_flickr against tfm's own f32."""
    rows = []
    for precision in ["bf16", "int8"]:
        if precision == "bf16":  # int8 is for inference only
            for r in training:
                t, t_mem, _ = run([BENCH, "train", "--precision", precision, "--preset", r["preset"], "--vocab", a.vocab, "--src",
                                   a.train_src, "--tgt", a.train_tgt, "--max-tokens", str(a.max_tokens), "--steps", str(a.steps)],
                                  a.threads)
                rows.append({"precision": precision, "job": f"training {r['preset']}", "tok_s": t["target_tokens"] / t["seconds"],
                             "f32_tok_s": r["tfm_tok_s"], "torch_tok_s": r["torch_tok_s"], "mem": t_mem})
        for r in translation:
            limit = a.latency_sentences if r["batch"] == 1 else 0
            t, t_mem, _ = run([BENCH, "translate", "--precision", precision, "--model", a.model, "--input", a.valid_src, "--beam",
                               str(r["beam"]), "--batch", str(r["batch"]), "--limit", str(limit), "--workers", "1"], a.threads)
            rows.append({"precision": precision, "job": f"translation {r['label']}", "tok_s": t["target_tokens"] / t["seconds"],
                         "f32_tok_s": r["tfm_tok_s"], "torch_tok_s": r["torch_tok_s"], "mem": t_mem,
                         "median_ms": t["median_batch_ms"], "torch_median_ms": r["torch"]["median_batch_ms"]})
        print(f"  {precision}: " + ", ".join(f"{x['job']} {x['tok_s']:.0f} tok/s" for x in rows if x["precision"] == precision),
              flush=True)
    bleu = {}
    test_src, test_ref = os.path.join(a.data, "test_2016_flickr.de.gz"), os.path.join(a.data, "test_2016_flickr.en.gz")
    if os.path.exists(test_src) and os.path.exists(test_ref):
        with tempfile.TemporaryDirectory() as work:
            src, ref = os.path.join(work, "src.de"), os.path.join(work, "ref.en")
            subprocess.run(f"zcat {test_src} > {src} && zcat {test_ref} > {ref}", shell=True, check=True)
            for precision in ["f32", "bf16", "int8"]:
                hyp = os.path.join(work, f"hyp.{precision}")
                subprocess.run([TFM, "translate", "--precision", precision, "--model", a.model, "--beam", "4", "-i", src, "-o", hyp],
                               check=True, env=dict(os.environ, OMP_NUM_THREADS=str(a.threads)))
                score = subprocess.run([TFM, "score", "--hyp", hyp, "--ref", ref], check=True, capture_output=True, text=True).stdout
                bleu[precision] = float(re.search(r"BLEU = ([0-9.]+)", score).group(1))
        print("  BLEU on test_2016_flickr (beam 4): " + ", ".join(f"{p} {b:.2f}" for p, b in bleu.items()), flush=True)
    return {"rows": rows, "bleu": bleu}


def bench_lm(a, work):
    out = os.path.join(work, "lm")
    _, t_mem, t_wall = run([TFM, "lm", "train", "--text", a.text, "--out", out, "--sample-tokens", "0"], a.threads)
    metrics = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl")) if '"valid' in l]
    t_loss = [m for m in metrics if "valid_loss" in m][-1]["valid_loss"]
    p, p_mem, p_wall = run([PY, os.path.join(ROOT, "bench", "torch_lm.py"), "--text", a.text, "--threads", str(a.threads)], a.threads)
    print(f"  tinyshakespeare recipe: tfm {t_wall:.0f} s (val loss {t_loss:.3f}), pytorch {p_wall:.0f} s (val loss {p['val_loss']:.3f})",
          flush=True)
    return {"tfm_s": t_wall, "torch_s": p_wall, "tfm_loss": t_loss, "torch_loss": p["val_loss"], "tfm_mem": t_mem, "torch_mem": p_mem}


def ratio(x, y):
    return f"{x / y:.2f}×"


def cpu_model():
    """The CPU's model name (the machines these runs land on differ), or the architecture."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def report(a, sgemm, training, translation, lm, reduced):
    shapes = ", ".join("{m}×{n}×{k}".format(**s) for s in sgemm["shapes"])
    lines = [f"Measured {datetime.date.today()} on {cpu_model()}, {os.cpu_count()} cores, "
             f"{a.threads} threads for both engines; PyTorch {training[0]['torch']['engine'].split()[-1]} with OpenBLAS "
             f"({'`OPENBLAS_CORETYPE=SkylakeX`' if OPENBLAS else 'its own choice of kernels'}). oneDNN sgemm peak here: **{sgemm['peak_gflops']:.0f} GFLOP/s** "
             f"(best of {shapes}, three runs).", "",
             f"### Training (forward + backward + Adam, {a.steps} Multi30k batches of ≤ {a.max_tokens} tokens)", "",
             "| preset | parameters | tfm tok/s | PyTorch tok/s | tfm / PyTorch | tfm % of sgemm peak | PyTorch % of peak "
             "| tfm peak RSS | PyTorch peak RSS |", "|---|---|---|---|---|---|---|---|---|"]
    for r in training:
        lines.append(f"| {r['preset']} | {r['parameters'] / 1e6:.1f} M | {r['tfm_tok_s']:.0f} | {r['torch_tok_s']:.0f} | "
                     f"**{ratio(r['tfm_tok_s'], r['torch_tok_s'])}** | {r['tfm_gflops'] / sgemm['peak_gflops']:.0%} "
                     f"({r['tfm_gflops']:.0f} GFLOP/s) | {r['torch_gflops'] / sgemm['peak_gflops']:.0%} | {r['tfm_mem']:.0f} MiB | "
                     f"{r['torch_mem']:.0f} MiB |")
    n = translation[0]["tfm"]["sentences"]
    lines += ["", f"### Translation (`{os.path.relpath(a.model, ROOT)}`, Multi30k val: {n} sentences at batch 32, "
                  f"the first {a.latency_sentences} at batch 1; medians of {a.repeats} alternating runs per engine)", "",
              "| search | tfm tok/s | PyTorch tok/s | tfm / PyTorch | tfm, a batch per thread: tok/s | ratio | tfm median ms per batch "
              "| PyTorch median ms | latency PyTorch / tfm | same output | tfm peak RSS | PyTorch peak RSS |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in translation:
        workers = (f"{r['workers_tok_s']:.0f} | **{ratio(r['workers_tok_s'], r['torch_tok_s'])}**" if "workers_tok_s" in r else "– | –")
        same = f"{r['same']:.1%}" + (f" / {r['workers_same']:.1%}" if "workers_same" in r else "")
        mem = f"{r['tfm_mem']:.0f}" + (f" / {r['workers_mem']:.0f}" if "workers_mem" in r else "")
        lines.append(f"| {r['label']} | {r['tfm_tok_s']:.0f} | {r['torch_tok_s']:.0f} | **{ratio(r['tfm_tok_s'], r['torch_tok_s'])}** | "
                     f"{workers} | {r['tfm']['median_batch_ms']:.1f} | {r['torch']['median_batch_ms']:.1f} | "
                     f"{ratio(r['torch']['median_batch_ms'], r['tfm']['median_batch_ms'])} | {same} | "
                     f"{mem} MiB | {r['torch_mem']:.0f} MiB |")
    if reduced:
        lines += ["", "### Opt-in reduced precision (`--precision bf16|int8`, tfm only; PyTorch stays in f32 as above)", "",
                  "| precision | job | tfm tok/s | tfm f32 tok/s | × tfm f32 | × PyTorch f32 | batch-1 latency PyTorch / tfm "
                  "| tfm peak RSS |", "|---|---|---|---|---|---|---|---|"]
        for r in reduced["rows"]:
            latency = ratio(r["torch_median_ms"], r["median_ms"]) if "translation" in r["job"] and "batch 1" in r["job"] else ""
            lines.append(f"| {r['precision']} | {r['job']} | {r['tok_s']:.0f} | {r['f32_tok_s']:.0f} | {ratio(r['tok_s'], r['f32_tok_s'])} "
                         f"| **{ratio(r['tok_s'], r['torch_tok_s'])}** | {latency} | {r['mem']:.0f} MiB |")
        if reduced["bleu"]:
            b = reduced["bleu"]
            lines += ["", "BLEU on Multi30k test_2016_flickr (beam 4, the same weights): " +
                      ", ".join(f"{p} **{v:.2f}**" + (f" ({v - b['f32']:+.2f})" if p != "f32" else "") for p, v in b.items()) + "."]
    if lm:
        lines += ["", "### Language model (tinyshakespeare, `tfm lm train` defaults = nanoGPT's CPU recipe, 2,000 steps)", "",
                  "| | tfm | PyTorch | PyTorch / tfm |", "|---|---|---|---|",
                  f"| wall time | {lm['tfm_s']:.0f} s | {lm['torch_s']:.0f} s | **{ratio(lm['torch_s'], lm['tfm_s'])}** |",
                  f"| validation loss | {lm['tfm_loss']:.3f} | {lm['torch_loss']:.3f} | |",
                  f"| peak RSS | {lm['tfm_mem']:.0f} MiB | {lm['torch_mem']:.0f} MiB | |"]
    return "\n".join(lines)


def publish(table, no_doc, begin="<!-- results: bench/run.sh writes this section -->", end="<!-- end of results -->", path=None):
    """Prints the table and, unless `no_doc`, puts it between the markers `begin` and `end` of
    `path` (docs/PERFORMANCE.md)."""
    print("\n" + table)
    if no_doc:
        return
    path = path or os.path.join(ROOT, "docs", "PERFORMANCE.md")
    doc = open(path).read()
    if begin not in doc or end not in doc:
        raise SystemExit(f"{path} has lost its markers {begin} ... {end}; the table is printed above")
    doc = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: f"{begin}\n{table}\n{end}", doc, flags=re.S)
    open(path, "w").write(doc)
    print(f"\nwrote {os.path.relpath(path, ROOT)}")


def arguments():
    """The arguments of bench/compare.py and bench/load.py alike; each adds its own."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="trained translation checkpoint (both engines decode with it)")
    ap.add_argument("--vocab", required=True, help="its joint SentencePiece vocabulary")
    ap.add_argument("--data", required=True, help="Multi30k directory")
    ap.add_argument("--text", help="tinyshakespeare input.txt (leave out to skip the language model)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--no-doc", action="store_true", help="print only; leave docs/PERFORMANCE.md alone")
    return ap


def main():
    ap = arguments()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=4000)
    ap.add_argument("--latency-sentences", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3, help="alternating runs of each engine per translation job (medians reported)")
    ap.add_argument("--only", choices=["latency"], help="run only this part (and write only its section)")
    a = ap.parse_args()
    a.train_src, a.train_tgt = os.path.join(a.data, "train.de.gz"), os.path.join(a.data, "train.en.gz")
    a.valid_src = os.path.join(a.data, "val.de.gz")
    if a.only == "latency":
        with tempfile.TemporaryDirectory() as work:
            latency = bench_latency(a, work)
        return publish(latency_report(a, latency), a.no_doc, *LATENCY_MARKERS)
    with tempfile.TemporaryDirectory() as work:
        # The best of three: one measurement in a slow spell of this shared machine
        # (once 214 GFLOP/s against 413 minutes earlier) would overstate every "% of peak".
        sgemm = max((run([BENCH, "sgemm"], a.threads)[0] for _ in range(3)), key=lambda r: r["peak_gflops"])
        print(f"  oneDNN sgemm peak: {sgemm['peak_gflops']:.0f} GFLOP/s (best of 3 runs)", flush=True)
        training = bench_training(a, work, sgemm["peak_gflops"])
        translation = bench_translation(a, work)
        reduced = bench_reduced_precision(a, training, translation)
        lm = bench_lm(a, work) if a.text else None
        latency = bench_latency(a, work)
    publish(report(a, sgemm, training, translation, lm, reduced), a.no_doc)
    publish(latency_report(a, latency), a.no_doc, *LATENCY_MARKERS)


if __name__ == "__main__":
    main()
