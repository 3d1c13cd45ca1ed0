#!/usr/bin/python3
"""An opus-mt-base-shaped Hugging Face model translating Multi30k val with beam 4, in
tfm and in PyTorch (bench/run.sh --marian).

Writes a MarianMT directory as Helsinki-NLP's opus-mt-de-en is laid out (config.json,
generation_config.json, model.safetensors, source.spm, target.spm, vocab.json): 512
wide, 6 + 6 layers, 8 heads, feed-forward 2048, SiLU, 58,101 shared ids with the pad
last, random weights (seeded). Its SentencePiece models are trained on Multi30k by
`tfm vocab` (8,000 unigram pieces each; the rest of the 58,101 ids are filler that the
weights can still choose). Then tfm (`tfm_bench translate --model DIR`, the directory
read as `tfm translate` reads it) and PyTorch (bench/torch_translate.py over
bench/torch_marian.py: the same weights in a cached decoder, Hugging Face's beam rules)
translate the same sentences, output capped at 2 x source + 10, taking turns; each
figure is the median of the runs, peak memory the highest. Prints a table and
rewrites its section of docs/PERFORMANCE.md."""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import safetensors_io  # noqa: E402
from compare import BENCH, PY, ROOT, TFM, cpu_model, median_run, publish, ratio, run  # noqa: E402

VOCAB, PAD = 58101, 58100  # opus-mt-de-en's
SHAPE = {"d_model": 512, "layers": 6, "heads": 8, "ffn": 2048, "positions": 512}


def spm_pieces(path):
    """The pieces of a SentencePiece model, in id order (ModelProto field 1, each piece's field 1)."""
    raw = open(path, "rb").read()

    def varint(i):
        value, shift = 0, 0
        while True:
            b = raw[i]
            value |= (b & 0x7F) << shift
            i, shift = i + 1, shift + 7
            if b < 0x80:
                return value, i

    pieces, i = [], 0
    while i < len(raw):
        key, i = varint(i)
        if key & 7 == 2:  # length-delimited
            n, i = varint(i)
            if key >> 3 == 1:
                j, end = i, i + n
                while j < end:
                    k, j = varint(j)
                    if k & 7 == 2:
                        m, j = varint(j)
                        if k >> 3 == 1:
                            pieces.append(raw[j:j + m].decode())
                        j += m
                    elif k & 7 == 5:
                        j += 4
                    else:
                        _, j = varint(j)
            i += n
        elif key & 7 == 5:
            i += 4
        elif key & 7 == 1:
            i += 8
        else:
            _, i = varint(i)
    return pieces


def vocab_json(source, target):
    """opus-mt's shared vocab.json: </s>, <unk>, the source pieces, the target pieces not yet
    in it, filler up to the pad, then <pad> last."""
    ids = {"</s>": 0, "<unk>": 1}
    for piece in source + target:
        if piece not in ids and piece not in ("<pad>", "<s>", "</s>", "<unk>"):  # the specials are placed by hand
            ids[piece] = len(ids)
    if len(ids) > PAD:
        raise SystemExit(f"bench/marian.py: {len(ids)} pieces do not fit in {VOCAB} ids")
    while len(ids) < PAD:
        ids[f"<unused{len(ids)}>"] = len(ids)
    ids["<pad>"] = PAD
    return ids


def random_weights(seed=0):
    """MarianMTModel's tensors (only model.shared.weight of the tied embeddings is stored,
    as in the hub's files; no position tables), drawn as transformers' _init_weights does
    with std 0.02, biases and LayerNorms perturbed so that none is trivially 0 or 1."""
    rng = np.random.default_rng(seed)
    d, f = SHAPE["d_model"], SHAPE["ffn"]
    w = {"model.shared.weight": rng.normal(0, 0.02, (VOCAB, d)), "final_logits_bias": np.zeros((1, VOCAB))}

    def linear(name, out, inp):
        w[name + ".weight"], w[name + ".bias"] = rng.normal(0, 0.02, (out, inp)), rng.normal(0, 0.02, out)

    def norm(name):
        w[name + ".weight"], w[name + ".bias"] = 1 + rng.normal(0, 0.02, d), rng.normal(0, 0.02, d)

    def attention(prefix):
        for p in ("q_proj", "k_proj", "v_proj", "out_proj"):
            linear(f"{prefix}.{p}", d, d)
        norm(prefix + "_layer_norm")

    for side in ("encoder", "decoder"):
        for i in range(SHAPE["layers"]):
            at = f"model.{side}.layers.{i}"
            attention(at + ".self_attn")
            if side == "decoder":
                attention(at + ".encoder_attn")
            linear(at + ".fc1", f, d), linear(at + ".fc2", d, f), norm(at + ".final_layer_norm")
    return w


def make_model(directory, data):
    """The opus-mt-base-shaped directory (kept between runs: its vocabularies take a minute)."""
    if os.path.exists(os.path.join(directory, "model.safetensors")):
        return
    os.makedirs(directory, exist_ok=True)
    spm = os.path.join(directory, "spm")
    subprocess.run([TFM, "vocab", "--src", os.path.join(data, "train.de.gz"), "--tgt", os.path.join(data, "train.en.gz"),
                    "--out", spm, "--size", "8000", "--type", "unigram"], check=True, stdout=subprocess.DEVNULL)
    shutil.move(spm + ".src.model", os.path.join(directory, "source.spm"))
    shutil.move(spm + ".tgt.model", os.path.join(directory, "target.spm"))
    ids = vocab_json(spm_pieces(os.path.join(directory, "source.spm")), spm_pieces(os.path.join(directory, "target.spm")))
    json.dump(ids, open(os.path.join(directory, "vocab.json"), "w"), ensure_ascii=False)
    d, layers, heads, ffn = SHAPE["d_model"], SHAPE["layers"], SHAPE["heads"], SHAPE["ffn"]
    config = {"architectures": ["MarianMTModel"], "model_type": "marian", "activation_function": "swish", "d_model": d,
              "encoder_layers": layers, "decoder_layers": layers, "encoder_attention_heads": heads, "decoder_attention_heads": heads,
              "encoder_ffn_dim": ffn, "decoder_ffn_dim": ffn, "vocab_size": VOCAB, "decoder_vocab_size": VOCAB,
              "max_position_embeddings": SHAPE["positions"], "scale_embedding": True, "static_position_embeddings": True,
              "normalize_before": False, "normalize_embedding": False, "add_final_layer_norm": False, "add_bias_logits": False,
              "share_encoder_decoder_embeddings": True, "bos_token_id": 0, "eos_token_id": 0, "forced_eos_token_id": 0,
              "pad_token_id": PAD, "decoder_start_token_id": PAD, "num_beams": 4, "max_length": 512, "bad_words_ids": [[PAD]],
              "init_std": 0.02, "is_encoder_decoder": True, "torch_dtype": "float32"}
    generation = {"bad_words_ids": [[PAD]], "bos_token_id": 0, "decoder_start_token_id": PAD, "eos_token_id": 0,
                  "forced_eos_token_id": 0, "max_length": 512, "num_beams": 4, "pad_token_id": PAD, "renormalize_logits": True}
    tokenizer = {"eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>", "model_max_length": 512, "separate_vocabs": False,
                 "source_lang": "de", "target_lang": "en", "tokenizer_class": "MarianTokenizer"}
    for name, content in [("config.json", config), ("generation_config.json", generation), ("tokenizer_config.json", tokenizer),
                          ("special_tokens_map.json", {k: tokenizer[k] for k in ("eos_token", "pad_token", "unk_token")})]:
        json.dump(content, open(os.path.join(directory, name), "w"), indent=2)
    safetensors_io.save(os.path.join(directory, "model.safetensors"), random_weights())


def check_pytorch_side(work, threads):
    """bench/torch_marian.py against the Hugging Face fixture's greedy and beam-4 ids (made by
    transformers itself), so that the PyTorch row is MarianMT's computation."""
    fixture = os.path.join(ROOT, "..", "shared", "fixtures", "hf", "marian_opus_mt_tiny_de_en")
    if not os.path.isdir(fixture):
        return print(f"  {fixture} is missing: bench/torch_marian.py is not checked against Hugging Face's outputs")
    ref, _ = safetensors_io.load(os.path.join(fixture, "reference.safetensors"))
    reference = json.load(open(os.path.join(fixture, "reference.json")))
    sentences = sorted({int(k[1:k.index(".")]) for k in ref if k.startswith("s") and k.endswith(".input_ids")})
    job = os.path.join(work, "fixture_job.json")
    eos = reference["eos_token_id"]
    json.dump({"sources": [ref[f"s{i}.input_ids"][0].tolist()[:-1] for i in sentences], "bos": reference["decoder_start_token_id"], "eos": eos,
               "length_penalty": 1.0, "max_len_a": 0, "max_len_b": 1000}, open(job, "w"))
    for beam, key in [(1, "greedy_ids"), (4, "beam4_ids")]:
        out = run([PY, os.path.join(ROOT, "bench", "torch_translate.py"), "--model", fixture, "--ids", job, "--beam", str(beam),
                   "--threads", str(threads)], threads)[0]["outputs"]
        want = [[t for t in ref[f"s{i}.{key}"][0].tolist()[1:] if t != eos] for i in sentences]
        if out != want:
            raise SystemExit(f"bench/torch_marian.py does not reproduce {fixture}'s {key}: {out} against {want}")
    print(f"  bench/torch_marian.py gives the Hugging Face fixture's greedy and beam-4 ids ({len(sentences)} sentences)", flush=True)


def bench(a):
    """The engines take turns a.repeats times; -> rows of the table."""
    job = os.path.join(a.work, "job.json")
    common = ["--beam", "4", "--batch", str(a.batch)]
    tfm = [BENCH, "translate", "--model", a.model_dir, "--input", a.valid_src, "--limit", str(a.sentences), "--max-len-a", "2",
           "--max-len-b", "10"] + common
    runs = {"tfm f32": [], "tfm f32, a batch per thread": [], "tfm bf16": [], "tfm int8": [], "pytorch f32": []}
    for i in range(a.repeats):
        runs["tfm f32"].append(run(tfm + ["--workers", "1"] + (["--job-out", job] if i == 0 else []), a.threads))
        runs["pytorch f32"].append(run([PY, os.path.join(ROOT, "bench", "torch_translate.py"), "--model", a.model_dir, "--ids", job,
                                        "--threads", str(a.threads)] + common, a.threads))
        runs["tfm f32, a batch per thread"].append(run(tfm + ["--workers", "0"], a.threads))
        for precision in ("bf16", "int8"):
            runs["tfm " + precision].append(run([BENCH, "--precision", precision] + tfm[1:] + ["--workers", "1"], a.threads))
        print(f"  round {i + 1} of {a.repeats}: " + ", ".join(f"{k} {r[-1][0]['target_tokens'] / r[-1][0]['seconds']:.0f} tok/s"
                                                            for k, r in runs.items()), flush=True)
    torch_out = median_run(runs["pytorch f32"])[0]["outputs"]
    rows = []
    for label, r in runs.items():
        out, mem = median_run(r)
        same = sum(x == y for x, y in zip(out["outputs"], torch_out)) / len(torch_out)
        rows.append({"label": label, "tok_s": out["target_tokens"] / out["seconds"], "mem": mem, "same": same,
                     "seconds": out["seconds"]})
    return rows


def report(a, rows):
    torch_row = next(r for r in rows if r["label"].startswith("pytorch"))
    lines = [f"Measured {datetime.date.today()} on {cpu_model()}, {a.threads} threads, by `bench/run.sh --marian`: "
             f"the first {a.sentences} sentences of Multi30k val (de), beam 4, batch {a.batch}, output at most 2 × source + 10 tokens; "
             f"medians of {a.repeats} alternating runs. The model: opus-mt-base-shaped (512 wide, 6 + 6 layers, 8 heads, "
             f"feed-forward 2048, {VOCAB:,} ids, random weights), read from its Hugging Face directory by both engines.", "",
             "| engine | target tok/s | / PyTorch | seconds | peak RSS | same output as PyTorch |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['label']} | {r['tok_s']:.0f} | **{ratio(r['tok_s'], torch_row['tok_s'])}** | {r['seconds']:.1f} | "
                     f"{r['mem']:.0f} MiB | {r['same']:.1%} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="Multi30k directory")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--sentences", type=int, default=200, help="the first N sentences of val (1014: all)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench-marian"), help="where the model directory is kept")
    ap.add_argument("--no-doc", action="store_true", help="print only; leave docs/PERFORMANCE.md alone")
    a = ap.parse_args()
    a.valid_src, a.model_dir = os.path.join(a.data, "val.de.gz"), os.path.join(a.work, "opus-mt-base-shaped")
    os.makedirs(a.work, exist_ok=True)
    check_pytorch_side(a.work, a.threads)
    make_model(a.model_dir, a.data)
    publish(report(a, bench(a)), a.no_doc, "<!-- marian results: bench/run.sh --marian writes this section -->", "<!-- end of marian results -->")


if __name__ == "__main__":
    main()
