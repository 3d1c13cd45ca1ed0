#!/usr/bin/python3
"""The Llama architecture against GPT-2's, trained from scratch on tinyshakespeare
(characters) by the same trainer (`tfm lm train`) at the same parameter count, for the
same steps and learning-rate schedule (scripts/families.sh).

GPT-2's: LayerNorm, learned positions, GELU feed-forward of 4 d, biases everywhere.
Llama's: RMSNorm, rotary positions (rope_theta 10000, Hugging Face's half layout),
SwiGLU, no biases; both pre-norm with tied output heads and as many K/V heads as query
heads. The gated block has three matrices where GPT-2's has two, so its width is about
2/3 of 4 d; here it is chosen so that the whole models' counts match (the Llama has no
position table and no biases, so 2/3 of 4 d alone would leave it 3% smaller).

The two runs train at the same time, one thread each: this machine is shared with
compiles whose load comes and goes over minutes, and two runs side by side see the same
load where two in turn would not, so their steps per second and their losses at equal
time compare. Each records validation loss every --validate-every steps; the table gives
it at equal steps and at equal elapsed time (the trainer's clock, validation included,
the same held-out text for both). Writes its section of docs/FAMILIES.md and a PNG of both
runs' validation loss on the same axes (each run's own `tfm plot` curves stay in --out)."""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from compare import ROOT, cpu_model, publish  # noqa: E402

MARKERS = ("<!-- families: scripts/families.sh writes this section -->", "<!-- end of families -->")
SPECIALS = 5  # tfm's special ids before the characters


def parameters(kind, d, layers, d_ff, vocab, context):
    """The weights `tfm lm train` builds for this configuration (it prints the same count)."""
    if kind == "gpt":  # LayerNorms (weight, bias), attention with biases, two feed-forward products with biases, positions
        layer = 4 * d * d + 4 * d + 2 * d * d_ff + d_ff + d + 4 * d
        return layers * layer + 2 * d + vocab * d + context * d
    layer = 4 * d * d + 3 * d * d_ff + 2 * d  # RMSNorms (weight only), no biases, gate, up and down
    return layers * layer + d + vocab * d


def gated_width(a, vocab):
    """The gated feed-forward width whose model has the GPT's parameter count (closest)."""
    target = parameters("gpt", a.d_model, a.layers, 4 * a.d_model, vocab, a.context)
    return min(range(1, 4 * a.d_model), key=lambda f: abs(parameters("llama", a.d_model, a.layers, f, vocab, a.context) - target))


def split_text(a):
    """The first 90% to train on and the first --valid-chars of the last 10% to validate on
    (the whole 10%, 111,540 characters, took about 9 s a validation in a trial here: twelve
    of them would have been a large share of a run of a few minutes)."""
    text = open(a.text, encoding="utf-8").read()
    cut = int(len(text) * 0.9)
    paths = os.path.join(a.out, "train.txt"), os.path.join(a.out, "valid.txt")
    for path, part in zip(paths, (text[:cut], text[cut:cut + a.valid_chars])):
        open(path, "w", encoding="utf-8").write(part)
    return paths, len(set(text[:cut])) + SPECIALS


def train_both(a, train, valid, d_ff):
    configs = {"gpt": {}, "llama": {"rms_norm": True, "rotary": True, "learned_positions": False, "rope_theta": 10000.0, "gated": True,
                                    "activation": "silu", "qkv_bias": False, "out_bias": False, "ff_bias": False, "tied_head": True}}
    procs = {}
    for kind, config in configs.items():
        out = os.path.join(a.out, kind)
        json.dump(config, open(out + ".json", "w"))
        cmd = [a.tfm, "--threads", "1", "lm", "train", "--text", train, "--valid", valid, "--config", out + ".json", "--out", out, "--force",
               "--layers", str(a.layers), "--d-model", str(a.d_model), "--heads", str(a.heads), "--d-ff", str(d_ff[kind]),
               "--context", str(a.context), "--batch", str(a.batch), "--steps", str(a.steps), "--max-minutes", str(a.minutes),
               "--validate-every", str(a.validate_every), "--log-every", "25", "--sample-tokens", "200"]
        procs[kind] = subprocess.Popen(cmd, stdout=open(out + ".log", "w"), stderr=subprocess.STDOUT)
        print(f"  {kind}: {' '.join(cmd)}", flush=True)
    loads = []  # the 1-minute load average while they run: how busy the machine was
    while any(p.poll() is None for p in procs.values()):
        loads.append(float(open("/proc/loadavg").read().split()[0]))
        time.sleep(5)
    for kind, p in procs.items():
        if p.returncode != 0:
            raise SystemExit(f"{kind} failed: see {os.path.join(a.out, kind + '.log')}")
    json.dump({"load": [min(loads, default=0), max(loads, default=0)]}, open(os.path.join(a.out, "load.json"), "w"))


def collect(a):
    """The runs' records from a.out: parameter counts, validations, last step, sample; plots."""
    runs = {"load": json.load(open(os.path.join(a.out, "load.json")))["load"]}
    for kind in ("gpt", "llama"):
        log = open(os.path.join(a.out, kind + ".log")).read()
        model = next(l for l in log.splitlines() if l.startswith("model: "))
        metrics = [json.loads(l) for l in open(os.path.join(a.out, kind, "metrics.jsonl"))]
        runs[kind] = {"parameters": int(model.rsplit(", ", 1)[1].split()[0]), "sample": log.split("sample (temperature 0.8):\n", 1)[-1].strip(),
                      "valid": [(m["step"], m["elapsed_s"], m["valid_loss"]) for m in metrics if "valid_loss" in m],
                      "last": max((m for m in metrics if "elapsed_s" in m), key=lambda m: m["step"])}
        subprocess.run([a.tfm, "plot", os.path.join(a.out, kind, "metrics.jsonl"), "-o", os.path.join(a.out, kind + ".png")], check=True,
                       stdout=subprocess.DEVNULL)
    return runs


def side_by_side(runs, png):
    """Both runs' validation loss on the same axes, against step and against time (`tfm plot`
    draws one run's curves, each on its own scale; the runs' own curves.png are in --out)."""
    from PIL import Image, ImageDraw
    width, height, margin = 420, 300, 50
    image = Image.new("RGB", (2 * width, height), "white")
    draw = ImageDraw.Draw(image)
    colours = {"gpt": (31, 119, 180), "llama": (214, 39, 40)}
    losses = [loss for k in colours for _, _, loss in runs[k]["valid"]]
    low, high = min(losses), max(losses)
    for panel, (axis, label) in enumerate([(0, "step"), (1, "seconds")]):
        left, right, top, bottom = panel * width + margin, (panel + 1) * width - 15, 30, height - 35
        end = max(v[axis] for k in colours for v in runs[k]["valid"])
        draw.rectangle([left, top, right, bottom], outline=(0, 0, 0))
        draw.text((left, 8), f"validation loss against {label}", fill=(0, 0, 0))
        draw.text((right - 40, bottom + 8), f"{end:.0f} {label if label == 'step' else 's'}", fill=(0, 0, 0))
        draw.text((left, bottom + 8), "0", fill=(0, 0, 0))
        for value in (low, high):
            y = bottom - (value - low) / (high - low) * (bottom - top)
            draw.text((left - 40, y - 6), f"{value:.2f}", fill=(0, 0, 0))
        for i, (kind, colour) in enumerate(colours.items()):
            points = [(left + v[axis] / end * (right - left), bottom - (v[2] - low) / (high - low) * (bottom - top)) for v in runs[kind]["valid"]]
            draw.line(points, fill=colour, width=2)
            for x, y in points:
                draw.ellipse([x - 2, y - 2, x + 2, y + 2], fill=colour)
            draw.text((right - 150, top + 10 + 14 * i), {"gpt": "GPT-2 architecture", "llama": "Llama architecture"}[kind], fill=colour)
    image.save(png)


def at_time(valid, t):
    """The validation loss of the last validation at or before t seconds (None: none yet)."""
    done = [loss for _, elapsed, loss in valid if elapsed <= t]
    return done[-1] if done else None


def report(a, runs, d_ff, vocab):
    g, l = runs["gpt"], runs["llama"]
    rate = {k: runs[k]["last"]["step"] / runs[k]["last"]["elapsed_s"] for k in ("gpt", "llama")}
    lines = [f"Measured {datetime.date.today()} on {cpu_model()} by `scripts/families.sh`, both runs at once, one thread each"
             f"{f', under `nice -n {os.nice(0)}`' if os.nice(0) else ''}, beside other work on the {os.cpu_count()} cores (load average {runs['load'][0]:.1f} to "
             f"{runs['load'][1]:.1f}, these two runs included): absolute speeds are a fraction of a quiet machine's, the two runs' ratio is the comparison.", "",
             f"Both: {a.layers} layers, {a.d_model} wide, {a.heads} heads, context {a.context}, batch {a.batch}, {a.steps} steps "
             f"(at most {a.minutes:g} minutes), AdamW lr 1e-3 (β₂ 0.99, weight decay 0.1), 100 warm-up steps and cosine decay to 1e-4 "
             f"over the {a.steps} steps, clipping 1.0, no dropout (`tfm lm train`'s recipe otherwise); vocabulary {vocab} (characters and "
             f"tfm's 5 specials); trained on the first 90% of the text, validated on the first {a.valid_chars:,} characters of the rest "
             f"(every whole window of {a.context + 1}).", "",
             "| | GPT-2 architecture | Llama architecture |", "|---|---|---|",
             "| blocks | LayerNorm, learned positions, GELU feed-forward, biases | RMSNorm, rotary (θ 10,000), SwiGLU, no biases |",
             f"| feed-forward width | {d_ff['gpt']} | {d_ff['llama']} (2/3 · 4 · d = {2 * 4 * a.d_model / 3:.0f}) |",
             f"| parameters | {g['parameters']:,} | {l['parameters']:,} |",
             f"| steps done, time | {g['last']['step']}, {g['last']['elapsed_s']:.0f} s | {l['last']['step']}, {l['last']['elapsed_s']:.0f} s |",
             f"| steps per second (validation included) | {rate['gpt']:.2f} | {rate['llama']:.2f} ({rate['llama'] / rate['gpt']:.2f}×) |",
             "| final validation loss | " + " | ".join(f"**{x:.3f}**" if x == min(g['valid'][-1][2], l['valid'][-1][2]) else f"{x:.3f}"
                                                      for x in (g['valid'][-1][2], l['valid'][-1][2])) + " |", "",
             "Validation loss at equal steps:", "", "| step | GPT-2 | Llama | Llama − GPT-2 |", "|---|---|---|---|"]
    llama_at = {s: loss for s, _, loss in l["valid"]}
    for step, _, loss in g["valid"]:
        if step in llama_at:
            lines.append(f"| {step} | {loss:.3f} | {llama_at[step]:.3f} | {llama_at[step] - loss:+.3f} |")
    end = min(g["last"]["elapsed_s"], l["last"]["elapsed_s"])
    lines += ["", "Validation loss at equal time (the last validation each run had finished by then):", "",
              "| seconds | GPT-2 | Llama |", "|---|---|---|"]
    for i in range(1, 7):
        t = end * i / 6
        gl, ll = at_time(g["valid"], t), at_time(l["valid"], t)
        lines.append(f"| {t:.0f} | {'–' if gl is None else f'{gl:.3f}'} | {'–' if ll is None else f'{ll:.3f}'} |")
    lines += ["", "![validation loss of both architectures against step and time](families_curves.png)", "",
              "Samples at the end (temperature 0.8), GPT-2's then Llama's:", "", "```", g["sample"], "```", "", "```", l["sample"], "```"]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--text", default=os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare", "input.txt"))
    ap.add_argument("--tfm", default=os.environ.get("TFM", os.path.join(ROOT, "build", "tfm")))
    ap.add_argument("--out", default=os.path.join(ROOT, "runs", "families"))
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--batch", type=int, default=12)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--minutes", type=float, default=10, help="each run stops here if its steps are not done")
    ap.add_argument("--validate-every", type=int, default=50)
    ap.add_argument("--valid-chars", type=int, default=30000)
    ap.add_argument("--report-only", action="store_true", help="the table from the runs already in --out (no training)")
    ap.add_argument("--no-doc", action="store_true", help="print only; leave docs/FAMILIES.md alone")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    (train, valid), vocab = split_text(a)
    d_ff = {"gpt": 4 * a.d_model, "llama": gated_width(a, vocab)}
    if not a.report_only:
        train_both(a, train, valid, d_ff)
    runs = collect(a)
    for kind, r in ((k, runs[k]) for k in d_ff):  # the trainer's own count against this script's formula
        want = parameters(kind, a.d_model, a.layers, d_ff[kind], vocab, a.context)
        if r["parameters"] != want:
            print(f"  note: {kind} has {r['parameters']} parameters, the formula here says {want}")
    side_by_side(runs, os.path.join(a.out, "families_curves.png"))
    if not a.no_doc:
        side_by_side(runs, os.path.join(ROOT, "docs", "families_curves.png"))
    publish(report(a, runs, d_ff, vocab), a.no_doc, *MARKERS, path=os.path.join(ROOT, "docs", "FAMILIES.md"))


if __name__ == "__main__":
    main()
