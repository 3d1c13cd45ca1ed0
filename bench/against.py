#!/usr/bin/python3
"""tfm against an earlier build of itself, row by row (see bench/run.sh --against):
the tfm rows of bench/compare.py (training small and base in f32 and bf16, the four
translation jobs in f32, bf16 and int8, the language-model recipe) run by the old and
the new binaries in turn, `--repeats` times each, and a table of medians and their
ratio. This machine's speed drifts by 10-30% over minutes; back-to-back pairs keep the
drift out of the ratios. Prints only (docs/PERFORMANCE.md is left alone)."""
import os
import statistics
import tempfile

import compare


def rows(a):
    """-> [(label, [argv after the binary], 'bench' or 'tfm', how to read a rate from the job)]."""
    tok_s = lambda out, wall: out["target_tokens"] / out["seconds"]
    out = []
    for precision in ["f32", "bf16"]:
        for preset in ["small", "base"]:
            out.append((f"training {preset} {precision} (tok/s)", ["train", "--precision", precision, "--preset", preset, "--vocab", a.vocab,
                        "--src", a.train_src, "--tgt", a.train_tgt, "--max-tokens", str(a.max_tokens), "--steps", str(a.steps)], "bench", tok_s))
    for precision in ["f32", "bf16", "int8"]:
        for label, beam, batch, limit in [("greedy, batch 32", 1, 32, 0), ("beam 4, batch 32", 4, 32, 0),
                                          ("greedy, batch 1", 1, 1, a.latency_sentences), ("beam 4, batch 1", 4, 1, a.latency_sentences)]:
            workers = ["1", "0"] if batch > 1 and precision == "f32" else ["1"]
            for w in workers:
                out.append((f"translation {label} {precision}" + (", a batch per thread" if w == "0" else "") + " (tok/s)",
                            ["translate", "--precision", precision, "--model", a.model, "--input", a.valid_src, "--beam", str(beam), "--batch",
                             str(batch), "--limit", str(limit), "--workers", w], "bench", tok_s))
    if a.text:
        out.append((f"language model, {a.lm_steps} steps of the recipe (steps/s)",
                    ["lm", "train", "--text", a.text, "--out", "{work}", "--force", "--steps", str(a.lm_steps), "--sample-tokens", "0",
                     "--validate-every", "0"], "tfm", lambda out, wall: a.lm_steps / wall))
    return out


def main():
    ap = compare.arguments()
    ap.add_argument("--baseline", required=True, help="the earlier build directory (its tfm and bench/tfm_bench)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=4000)
    ap.add_argument("--latency-sentences", type=int, default=200)
    ap.add_argument("--lm-steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    a.train_src, a.train_tgt = os.path.join(a.data, "train.de.gz"), os.path.join(a.data, "train.en.gz")
    a.valid_src = os.path.join(a.data, "val.de.gz")
    builds = {"old": os.path.abspath(a.baseline), "new": os.path.join(compare.ROOT, "build")}
    programs = {name: {"bench": os.path.join(d, "bench", "tfm_bench"), "tfm": os.path.join(d, "tfm")} for name, d in builds.items()}
    table = []
    with tempfile.TemporaryDirectory() as work:
        for label, args, program, rate in rows(a):
            got = {"old": [], "new": []}
            for _ in range(a.repeats):
                for name in ["old", "new"]:
                    argv = [programs[name][program]] + [x.replace("{work}", os.path.join(work, name)) for x in args]
                    out, _, wall = compare.run(argv, a.threads)
                    got[name].append(rate(out, wall))
            old, new = statistics.median(got["old"]), statistics.median(got["new"])
            table.append((label, old, new))
            print(f"  {label}: old {old:.1f}, new {new:.1f} ({new / old - 1:+.1%}; runs {', '.join(f'{x:.0f}' for x in got['old'])} "
                  f"vs {', '.join(f'{x:.0f}' for x in got['new'])})", flush=True)
    print(f"\n{builds['old']} against {builds['new']}, {a.threads} threads, medians of {a.repeats} alternating runs\n")
    print("| job | old | new | new / old |\n|---|---|---|---|")
    for label, old, new in table:
        print(f"| {label} | {old:.1f} | {new:.1f} | {new / old:.3f} |")


if __name__ == "__main__":
    main()
