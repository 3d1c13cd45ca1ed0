#!/usr/bin/python3
"""A Qwen2-0.5B-shaped Llama-family model generating on the CPU, in tfm and in PyTorch
eager over the same weights and threads (bench/run.sh --llama).

The model: Qwen2ForCausalLM as transformers 4.39 builds it (24 layers, hidden 896, 14
query heads sharing 2 K/V heads, SwiGLU of 4864, biases on the query, key and value
projections, 151,936 ids, tied embeddings, rope_theta 1e6), its weights drawn by
transformers' own initialisation (seeded) and saved by save_pretrained as a Hugging
Face directory (about 2 GB in f32), with the tokenizer of tests/fixtures/hf/qwen2_json
(Qwen2's layout, its special tokens moved to Qwen2's ids) so that tfm's text interface
reads it. Made once, under /tmp (never in the repository).

Each engine and precision runs in a process of its own (its peak resident memory is its
alone): PyTorch's model.generate (greedy, use_cache) on prompt ids, tfm's Python
Generator (greedy) on the same prompts as text. Prompts are digits: Qwen2's pattern cuts
every digit into a word of its own, so a text of 128 digits is 128 tokens whose ids are
known without a tokenizer in PyTorch's process (transformers' Qwen2 tokenizer needs the
`tokenizers` library, which this machine lacks). Batch 1 is one prompt; batch 8 is a
batch of 8 prompts of equal length in PyTorch and 8 concurrent requests to one
Generator in tfm, which batches them continuously. For each: the time of 1 new token
(the prompt's prefill, its first token's head and choice) and of N new tokens, so that
prompt tokens/s = batch x prompt / t(1) and generated tokens/s = batch x (N - 1) /
(t(N) - t(1)); a short untimed generation at each batch size first. Then `tfm generate
--prompt-ids` on the first prompt (ids out) against PyTorch's f32 ids: how many of the
new tokens agree. Prints a table and rewrites its section of docs/PERFORMANCE.md."""
import argparse
import datetime
import json
import os
import random
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import PY, ROOT, TFM, cpu_model, publish, ratio, run  # noqa: E402

MARKERS = ("<!-- llama results: bench/run.sh --llama writes this section -->", "<!-- end of llama results -->")
# Qwen2-0.5B's config.json, but f32 and random weights; --small: the same kinds of
# pieces, a fraction of the size, for a quick run and the check that this script works.
SHAPES = {
    "qwen2-0.5b": {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
                   "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768},
    "small": {"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 4,
              "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768},
}
SPECIALS = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}  # Qwen2's ids
TOKENIZER = os.path.join(ROOT, "tests", "fixtures", "hf", "qwen2_json")


def import_transformers(threads):
    """transformers 4.39 from the offline environment that ../shared/tools/hf-reference/setup.sh
    makes (HFENV, default /work/hfenv; it sets one torch thread: undone here)."""
    sys.path.insert(0, os.environ.get("HFENV", "/work/hfenv"))
    import hfenv  # noqa: F401
    import torch
    torch.set_num_threads(threads)
    import transformers
    return torch, transformers


def make_model(directory, shape, seed=0):
    """The Hugging Face directory, written by transformers itself (in a process of its own: the
    parent stays small). Kept between runs: at full size it takes a minute or two."""
    if os.path.exists(os.path.join(directory, "config.json")):
        return
    torch, transformers = import_transformers(os.cpu_count())
    config = transformers.Qwen2Config(**SHAPES[shape], rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=True,
                                      use_sliding_window=False, sliding_window=32768, max_window_layers=21,
                                      bos_token_id=SPECIALS["<|endoftext|>"], eos_token_id=SPECIALS["<|endoftext|>"], torch_dtype="float32")
    torch.manual_seed(seed)
    model = transformers.Qwen2ForCausalLM(config).eval()  # _init_weights: normal(0, 0.02), zero biases, unit norms
    tmp = directory + ".partial"
    model.save_pretrained(tmp, safe_serialization=True)
    # The fixture's Qwen2-layout tokenizer (619 pieces), filler pieces up to Qwen2's special
    # tokens (which tfm, as the tokenizers library, wants right after the vocabulary) and those
    # at Qwen2's ids. The filler decodes as its own text and no text encodes to it (no merge
    # makes it), as the ids of Qwen2's vocabulary that a digit never reaches.
    tokenizer = json.load(open(os.path.join(TOKENIZER, "tokenizer.json")))
    vocab = tokenizer["model"]["vocab"]
    while len(vocab) < min(SPECIALS.values()):
        vocab[f"<unused{len(vocab)}>"] = len(vocab)  # (the fixture's ids run 0 to 618 without gaps)
    for added in tokenizer["added_tokens"]:
        added["id"] = SPECIALS[added["content"]]
    json.dump(tokenizer, open(os.path.join(tmp, "tokenizer.json"), "w"), ensure_ascii=False)
    tc = json.load(open(os.path.join(TOKENIZER, "tokenizer_config.json")))
    tc["added_tokens_decoder"] = {str(SPECIALS[v["content"]]): v for v in tc["added_tokens_decoder"].values()}
    json.dump(tc, open(os.path.join(tmp, "tokenizer_config.json"), "w"), ensure_ascii=False, indent=2)
    os.rename(tmp, directory)


def prompts(job):
    """Digits, each one token (Qwen2's pattern splits digits apart): the texts and their ids."""
    vocab = json.load(open(os.path.join(job["model"], "tokenizer.json")))["model"]["vocab"]
    rng = random.Random(1)
    texts = ["".join(rng.choice("0123456789") for _ in range(job["prompt"])) for _ in range(max(job["batches"]))]
    return texts, [[vocab[c] for c in t] for t in texts]


def timed(generate, batch, new_tokens):
    """-> (seconds, tokens generated in all) of generate(batch, new_tokens)."""
    t0 = time.perf_counter()
    count = generate(batch, new_tokens)
    return time.perf_counter() - t0, count


def measure(job, generate):
    """Prompt and generated tokens/s at each batch size, by the difference of 1 and N new tokens."""
    out = {}
    for batch in job["batches"]:
        generate(batch, 2)  # untimed: the first products of these shapes, allocations
        t1, n1 = timed(generate, batch, 1)
        tn, nn = timed(generate, batch, job["new"])
        out[batch] = {"prefill_s": t1, "generate_s": tn - t1, "prompt_tok_s": batch * job["prompt"] / t1,
                      "gen_tok_s": (nn - n1) / (tn - t1), "new_tokens": nn}
    return out


def resident(reset=False):
    """This process's resident memory now and at its peak so far, MiB (VmRSS, VmHWM); `reset`:
    the peak starts again from now (clear_refs 5), so that generation's peak is told apart
    from the loading's (PyTorch's loading here reads the whole file into memory first: this
    environment's safetensors is a pure-Python stand-in)."""
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    now = {k: int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}
    if reset:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    return now


def torch_worker(job):
    torch, transformers = import_transformers(job["threads"])
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[job["precision"]]
    model = transformers.Qwen2ForCausalLM.from_pretrained(job["model"], torch_dtype=dtype).eval()
    loaded = resident(reset=True)  # (the peak so far is the loading's)
    _, ids = prompts(job)
    outputs = {}

    def generate(batch, new):
        x = torch.tensor(ids[:batch])
        with torch.inference_mode():  # min_new_tokens: the same count as tfm, which an end token would cut short too
            y = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=new, min_new_tokens=new, do_sample=False,
                               use_cache=True, pad_token_id=SPECIALS["<|endoftext|>"])
        outputs[batch] = y[:, x.shape[1]:].tolist()
        return sum(len(r) for r in outputs[batch])

    result = measure(job, generate)
    return {"version": f"PyTorch {torch.__version__}", "results": result, "ids": outputs[1][0], "loaded": loaded,
            "generating": resident()["VmHWM"]}


def tfm_worker(job):
    sys.path.insert(0, job["python_module"])
    import tfm
    generator = tfm.Generator(job["model"], precision=job["precision"])
    loaded = resident(reset=True)
    texts, _ = prompts(job)

    def one(i, new, counts):
        stream = generator.stream(texts[i], max_tokens=new, temperature=0.0)
        for _ in stream:
            pass
        counts[i] = stream.tokens

    def generate(batch, new):  # batch > 1: that many requests at once, which the generator batches
        counts = [0] * batch
        threads = [threading.Thread(target=one, args=(i, new, counts)) for i in range(batch)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sum(counts)

    result = measure(job, generate)
    return {"version": "tfm", "results": result, "loaded": loaded, "generating": resident()["VmHWM"]}


def tfm_ids(a, precision, ids):
    """The greedy ids of `tfm generate --prompt-ids` (the same prompt as PyTorch's first)."""
    out = subprocess.run([a.tfm, "--threads", str(a.threads), "--precision", precision, "generate", "--model", a.model_dir, "--prompt-ids",
                          *map(str, ids), "--temperature", "0", "--max-new-tokens", str(a.new)], check=True, capture_output=True, text=True)
    return [int(t) for t in out.stdout.split()]


def agreement(x, y):
    """(the new tokens before the first difference, the positions that agree)."""
    first = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
    return first, sum(p == q for p, q in zip(x, y))


def bench(a):
    job = a.job
    engines = [("pytorch", "f32"), ("tfm", "f32"), ("tfm", "bf16"), ("tfm", "int8")] + ([("pytorch", "bf16")] if a.torch_bf16 else [])
    rows, a.loads = [], []
    for engine, precision in engines:
        print(f"  {engine} {precision}:", flush=True)
        a.loads.append(float(open("/proc/loadavg").read().split()[0]))  # how busy the machine was (1-minute load average)
        out, mem, wall = run([PY, os.path.abspath(__file__), "--worker", json.dumps(dict(job, engine=engine, precision=precision))],
                             a.threads)
        rows.append({"engine": engine, "precision": precision, "mem": mem, "wall": wall, **out})
        for batch, m in out["results"].items():
            print(f"    batch {batch}: prompt {m['prompt_tok_s']:.0f} tok/s ({m['prefill_s']:.1f} s), generated {m['gen_tok_s']:.1f} tok/s "
                  f"({m['new_tokens']} new tokens)", flush=True)
        print(f"    peak RSS {mem:.0f} MiB (loaded: {out['loaded']['VmRSS']:.0f} MiB, the loading's peak {out['loaded']['VmHWM']:.0f}, "
              f"generating {out['generating']:.0f}), {wall:.0f} s in all", flush=True)
        a.loads.append(float(open("/proc/loadavg").read().split()[0]))
        json.dump({"rows": rows, "loads": a.loads}, open(a.results, "w"))  # --report-only reads them
    return compare_ids(a, job, rows)


def compare_ids(a, job, rows):
    """Each row's greedy ids of the first prompt against PyTorch f32's (tfm's from `tfm generate`)."""
    reference = rows[0]["ids"]
    for r in rows:
        if r["engine"] == "tfm" and "ids" not in r:
            r["ids"] = tfm_ids(a, r["precision"], prompts(job)[1][0])
        r["agree"] = agreement(r["ids"], reference)
        print(f"  {r['engine']} {r['precision']}: {r['agree'][1]} of {len(reference)} new tokens as PyTorch f32's "
              f"(the first {r['agree'][0]} in a row)", flush=True)
    json.dump({"rows": rows, "loads": a.loads}, open(a.results, "w"))
    return rows


def parameters(shape):
    """Qwen2ForCausalLM's weights in this shape (the tied head counted once)."""
    h, f, layers = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"]
    kv = h // shape["num_attention_heads"] * shape["num_key_value_heads"]
    layer = (h * h + h) + 2 * (h * kv + kv) + h * h + 3 * h * f + 2 * h  # q, k, v with biases, o, gate/up/down, two norms
    return shape["vocab_size"] * h + layers * layer + h


def report(a, rows):
    shape = SHAPES[a.shape]
    torch_row = rows[0]

    def memory(r):  # the process's peak; where known, the loading's and generation's apart
        if "loaded" not in r:
            return f"{r['mem']:.0f} MiB"
        return f"{r['mem']:.0f} MiB (loading {r['loaded']['VmHWM']:.0f}, loaded {r['loaded']['VmRSS']:.0f}, generating {r['generating']:.0f})"

    lines = [f"Measured {datetime.date.today()} on {cpu_model()}, {a.threads} threads for both engines ({torch_row['version']}), by "
             f"`bench/run.sh --llama{' -- --small' if a.shape == 'small' else ''}`"
             f"{f' under `nice -n {os.nice(0)}`' if os.nice(0) else ''}; load average {min(a.loads):.1f} to {max(a.loads):.1f} "
             f"between the processes{a.conditions}. The model: {a.shape}-shaped "
             f"Qwen2ForCausalLM ({shape['num_hidden_layers']} layers, hidden {shape['hidden_size']}, {shape['num_attention_heads']} heads "
             f"sharing {shape['num_key_value_heads']} K/V heads, SwiGLU {shape['intermediate_size']}, {shape['vocab_size']:,} ids, tied; "
             f"{parameters(shape) / 1e6:.0f} M parameters; transformers' random initialisation), read from its Hugging Face directory by both. "
             f"Prompts of {a.prompt} tokens, {a.new} new tokens, greedy; one run each.", "",
             "| engine | batch | prompt tok/s | / PyTorch f32 | generated tok/s | / PyTorch f32 | peak RSS | greedy ids as PyTorch f32's |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for batch, m in sorted(r["results"].items(), key=lambda kv: int(kv[0])):
            t = torch_row["results"][batch]
            same = f"{r['agree'][1]} of {a.new} (the first {r['agree'][0]} in a row)" if int(batch) == 1 and "agree" in r else ""
            if r is torch_row and same:
                same = "(the reference)"
            lines.append(f"| {'PyTorch' if r['engine'] == 'pytorch' else 'tfm'} {r['precision']} | {batch} | {m['prompt_tok_s']:.0f} | "
                         f"**{ratio(m['prompt_tok_s'], t['prompt_tok_s'])}** | {m['gen_tok_s']:.1f} | **{ratio(m['gen_tok_s'], t['gen_tok_s'])}** | "
                         f"{memory(r)} | {same} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--small", action="store_true", help="a 4-layer, 256-wide model of the same kinds (quick)")
    ap.add_argument("--prompt", type=int, default=128, help="prompt tokens")
    ap.add_argument("--new", type=int, default=64, help="new tokens a request")
    ap.add_argument("--torch-bf16", action="store_true", help="PyTorch in bf16 too (left out by default: at batch 1 slower than its f32 on this machine)")
    ap.add_argument("--work", default="/tmp/tfm-bench-llama", help="where the model directory is kept (~2 GB)")
    ap.add_argument("--tfm", default=TFM, help="the tfm binary")
    ap.add_argument("--python-module", default=os.path.join(ROOT, "build", "python"), help="the folder of tfm's Python module")
    ap.add_argument("--conditions", default="", help="words on the machine's state for the table's first line (' (other sessions' compiles)')")
    ap.add_argument("--report-only", action="store_true", help="the table from the last run's results (in --work), measuring only the ids it lacks")
    ap.add_argument("--no-doc", action="store_true", help="print only; leave docs/PERFORMANCE.md alone")
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # one engine's measurements, as JSON (run by the benchmark itself)
    ap.add_argument("--make", help=argparse.SUPPRESS)  # DIR:SHAPE: the model directory
    a = ap.parse_args()
    if a.worker:
        job = json.loads(a.worker)
        return print(json.dumps(torch_worker(job) if job["engine"] == "pytorch" else tfm_worker(job)))
    if a.make:
        return make_model(*a.make.rsplit(":", 1))
    a.shape = "small" if a.small else "qwen2-0.5b"
    a.model_dir = os.path.join(a.work, a.shape)
    a.results = os.path.join(a.work, a.shape + "-results.json")
    a.job = {"model": a.model_dir, "prompt": a.prompt, "new": a.new, "batches": [1, 8], "threads": a.threads,
             "python_module": a.python_module}
    if a.report_only:  # (the ids compared where the run ended before)
        saved = json.load(open(a.results))
        rows, a.loads = saved["rows"], saved["loads"]
        if any("agree" not in r for r in rows):
            compare_ids(a, a.job, rows)
        return publish(report(a, rows), a.no_doc or a.small, *MARKERS)
    os.makedirs(a.work, exist_ok=True)
    subprocess.run([PY, os.path.abspath(__file__), "--make", f"{a.model_dir}:{a.shape}"], check=True)
    rows = bench(a)
    publish(report(a, rows), a.no_doc or a.small, *MARKERS)


if __name__ == "__main__":
    main()
