#!/usr/bin/python3
"""PyTorch side of the translation benchmarks (bench/run.sh).

Decodes the sentences tfm_bench wrote (token ids) with the weights of a tfm
checkpoint, or of a Hugging Face MarianMT directory (bench/torch_marian.py), the way
fairseq and Hugging Face decode: the encoder runs once, the encoder memory is
projected to keys and values once per layer, each step feeds only the newest token
and appends its keys and values to a cache, and sentences that are finished leave the
batch. The beam search is tfm's (src/decode/beam_search.cpp): 2K candidates per
sentence, an end symbol closes a hypothesis, scores are log-probability /
length^penalty, at most a*n+b tokens; for a Marian model with Hugging Face's rules
as tfm applies them (an end symbol counts only among the K best, the K best finished
are kept, a sentence is done when no open beam can beat them, the end symbol forced at
the limit, log-probabilities renormalised without the pad).

On the CPU, or on a GPU with --device cuda (bench/gpu/compare_translate.py). Prints
one JSON line: seconds, target tokens and outputs (to compare with tfm's).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import safetensors_io  # noqa: E402
import torch_marian  # noqa: E402
from model import EncoderDecoder  # noqa: E402

NEG_INF = float("-inf")


def load_checkpoint(path):
    tensors, meta = safetensors_io.load(path)
    cfg = json.loads(meta["tfm.config"])
    model = EncoderDecoder(cfg)
    names = set(model.state_dict())
    state = {k: torch.from_numpy(v) for k, v in tensors.items() if k in names}
    missing = [k for k in names if k not in state and not k.endswith("pe")]
    tied = {"tgt_embed.weight", "generator.weight"} if cfg["share_embeddings"] else set()
    if [k for k in missing if k not in tied]:
        raise SystemExit(f"{path}: missing tensors {missing}")
    model.load_state_dict(state, strict=False)
    return model.eval(), cfg


class CachedDecoder:
    """Incremental decoding over nn.Transformer's decoder layers."""

    def __init__(self, model, cfg):
        self.m, self.d, self.h = model, cfg["d_model"], cfg["heads"]
        self.norm_first = cfg["norm_first"]
        self.layers = model.transformer.decoder.layers

    def split(self, x):  # [rows, len, d] -> [rows, heads, len, d_k]
        return x.view(x.size(0), x.size(1), self.h, self.d // self.h).transpose(1, 2)

    def attend(self, q, k, v, out_proj, key_pad=None):  # q [rows, heads, 1, d_k], k/v [rows, heads, len, d_k]
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.size(-1))
        if key_pad is not None:
            scores = scores.masked_fill(key_pad, float("-inf"))
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)  # [rows, heads, 1, d_k]
        return out_proj(ctx.transpose(1, 2).reshape(q.size(0), 1, self.d))

    def start(self, src):
        """src [rows, src_len] -> caches the encoder memory's keys and values per layer."""
        m, d = self.m, self.d
        pad = src == m.cfg["pad_id"]
        memory = m.transformer.encoder(m.src_pos(m.src_embed(src) * math.sqrt(d)), src_key_padding_mask=pad)
        self.mem_pad = pad[:, None, None, :]
        self.mem_kv, self.self_kv = [], [None] * len(self.layers)
        for layer in self.layers:
            w, b = layer.multihead_attn.in_proj_weight, layer.multihead_attn.in_proj_bias
            self.mem_kv.append((self.split(F.linear(memory, w[d:2 * d], b[d:2 * d])), self.split(F.linear(memory, w[2 * d:], b[2 * d:]))))
        self.pos = 0

    def self_attention(self, i, layer, x):
        q, k, v = F.linear(x, layer.self_attn.in_proj_weight, layer.self_attn.in_proj_bias).chunk(3, dim=-1)
        q, k, v = self.split(q), self.split(k), self.split(v)
        if self.self_kv[i] is not None:
            k, v = torch.cat([self.self_kv[i][0], k], 2), torch.cat([self.self_kv[i][1], v], 2)
        self.self_kv[i] = (k, v)
        return self.attend(q, k, v, layer.self_attn.out_proj)

    def cross_attention(self, i, layer, x):
        d, attn = self.d, layer.multihead_attn
        q = self.split(F.linear(x, attn.in_proj_weight[:d], attn.in_proj_bias[:d]))
        return self.attend(q, *self.mem_kv[i], attn.out_proj, self.mem_pad)

    def feed_forward(self, layer, x):
        return layer.linear2(layer.activation(layer.linear1(x)))

    def step(self, tokens):
        """tokens [rows] (the newest of each row) -> log-probabilities [rows, vocab]."""
        m = self.m
        x = m.tgt_embed(tokens[:, None]) * math.sqrt(self.d) + m.tgt_pos.pe[self.pos]
        self.pos += 1
        for i, layer in enumerate(self.layers):
            if self.norm_first:
                x = x + self.self_attention(i, layer, layer.norm1(x))
                x = x + self.cross_attention(i, layer, layer.norm2(x))
                x = x + self.feed_forward(layer, layer.norm3(x))
            else:
                x = layer.norm1(x + self.self_attention(i, layer, x))
                x = layer.norm2(x + self.cross_attention(i, layer, x))
                x = layer.norm3(x + self.feed_forward(layer, x))
        x = m.transformer.decoder.norm(x)
        return torch.log_softmax(m.generator(x[:, 0]), dim=-1)

    def keep_rows(self, rows):
        """Reorders (beam search) and drops (finished sentences) cached rows."""
        self.self_kv = [(k[rows], v[rows]) for k, v in self.self_kv]
        self.mem_kv = [(k[rows], v[rows]) for k, v in self.mem_kv]
        self.mem_pad = self.mem_pad[rows]


def max_lengths(src, cfg, a, b):
    n = (src != cfg["pad_id"]).sum(1).tolist()
    cap = min(cfg["max_len"], cfg.get("max_length") or cfg["max_len"]) - 1  # max_length counts the start symbol
    return [min(int(a * k) + b, cap) for k in n]


def keep_best(finished, h, K):
    """Hugging Face's BeamHypotheses.add: the K best finished (score, tokens) are kept."""
    if len(finished) < K:
        return finished.append(h)
    worst = min(range(len(finished)), key=lambda i: finished[i][0])
    if h[0] > finished[worst][0]:
        finished[worst] = h


def search_log_probs(logp, cfg, o, at_limit):
    """logp [rows, vocab] -> what the search ranks: pad and the start symbol never proposed (the
    rest renormalised where the model asks), and only the end symbol at a row's limit where
    the model forces it. at_limit: [rows] bool."""
    logp[:, cfg["pad_id"]] = NEG_INF
    logp[:, o.bos] = NEG_INF
    if cfg.get("renormalize"):
        logp = torch.log_softmax(logp, dim=-1)
    if cfg.get("forced_eos") and bool(at_limit.any()):
        logp[at_limit] = NEG_INF
        logp[at_limit, o.eos] = 0.0
    return logp


def greedy(dec, src, cfg, o):
    """Batched greedy search; finished sentences leave the batch."""
    limits = max_lengths(src, cfg, o.max_len_a, o.max_len_b)
    dec.start(src)
    active = list(range(src.size(0)))
    out = [[] for _ in active]
    tokens = torch.full((len(active),), o.bos, dtype=torch.long, device=src.device)
    for step in range(1, max(limits) + 1):
        at_limit = torch.tensor([step >= limits[s] for s in active], device=src.device)
        best = search_log_probs(dec.step(tokens), cfg, o, at_limit).argmax(-1).tolist()
        keep = []
        for row, (s, t) in enumerate(zip(active, best)):
            if t != o.eos:
                out[s].append(t)
            if t != o.eos and step < limits[s]:
                keep.append(row)
        if not keep:
            break
        if len(keep) < len(active):
            dec.keep_rows(torch.tensor(keep, device=src.device))
        active = [active[r] for r in keep]
        tokens = torch.tensor([best[r] for r in keep], dtype=torch.long, device=src.device)
    return out


def beam_search(dec, src, cfg, o):
    """Batched beam search (tfm's algorithm); finished sentences leave the batch."""
    K, hf = o.beam, cfg.get("hf_search", False)
    B = src.size(0)
    limits = max_lengths(src, cfg, o.max_len_a, o.max_len_b)
    dec.start(src.repeat_interleave(K, 0))
    active = list(range(B))
    beams = [[[o.bos], 0.0 if k == 0 else NEG_INF] for _ in range(B) for k in range(K)]
    finished = [[] for _ in range(B)]
    def norm(lp, n):  # an empty translation ranks last (CTranslate2: log p / 0)
        return lp if o.length_penalty == 0 else NEG_INF if n == 0 else lp / n ** o.length_penalty
    for step in range(1, max(limits) + 1):
        at_limit = torch.tensor([step >= limits[s] for s in active], device=src.device).repeat_interleave(K)
        logp = search_log_probs(dec.step(torch.tensor([b[0][-1] for b in beams], dtype=torch.long, device=src.device)), cfg, o, at_limit)
        V = logp.size(1)
        total = logp + torch.tensor([b[1] for b in beams], device=src.device)[:, None]
        top = total.view(len(active), K * V).topk(2 * K, dim=1).indices
        # The candidates' own log-probabilities, read in one copy (one read per candidate
        # would wait for a GPU every time).
        top_ix, token_lp = top.tolist(), logp.view(len(active), K * V).gather(1, top).tolist()
        next_beams, parents, still = [], [], []
        for j, s in enumerate(active):
            filled, best = [], None
            for rank, (ix, ix_lp) in enumerate(zip(top_ix[j], token_lp[j])):
                if len(filled) == K:
                    break
                k, t = divmod(ix, V)
                parent = beams[j * K + k]
                if parent[1] == NEG_INF:
                    continue
                lp = parent[1] + ix_lp  # summed in double, as tfm does
                best = lp if best is None else best
                if t == o.eos:  # an end counts only among the K best (both rules)
                    if rank >= K or lp == NEG_INF:
                        continue
                    # Normalised by the words (tfm's rule, CTranslate2's), the words and the end (Hugging Face's).
                    h = (norm(lp, len(parent[0]) - (0 if hf else 1)), parent[0][1:])
                    keep_best(finished[s], h, K) if hf else finished[s].append(h)
                    continue
                filled.append(([*parent[0], t], lp, j * K + k))
            while len(filled) < K:
                filled.append(([o.bos], NEG_INF, j * K))
            if step >= limits[s]:  # out of length: the open beams end here
                for toks, lp, _ in filled:
                    if lp != NEG_INF:
                        h = (norm(lp, len(toks) - 1), toks[1:])
                        keep_best(finished[s], h, K) if hf else finished[s].append(h)
                continue
            # Done: tfm's rule (CTranslate2's), K finished; Hugging Face's, K finished and none of the open
            # beams' best can beat the worst of them at this length.
            if len(finished[s]) >= K and (not hf or (best is not None and min(f[0] for f in finished[s]) >= norm(best, step))):
                continue
            still.append(j)
            for toks, lp, parent in filled:
                next_beams.append([toks, lp])
                parents.append(parent)
        if not still:
            break
        dec.keep_rows(torch.tensor(parents, device=src.device))
        beams, active = next_beams, [active[j] for j in still]
    out = []
    for f in finished:
        best = max(f, key=lambda x: x[0]) if f else (0.0, [])  # max keeps the first of equal scores, as tfm's stable sort
        out.append(best[1])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", required=True, help="JSON from tfm_bench translate: sources and search options")
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="only the first N sentences")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (a tfm checkpoint's model)")
    ap.add_argument("--warmup", type=int, default=0, help="untimed searches of the first batch first")
    o = ap.parse_args()
    torch.set_num_threads(o.threads)
    job = json.load(open(o.ids))
    o.bos, o.eos, o.length_penalty = job["bos"], job["eos"], job["length_penalty"]
    o.max_len_a, o.max_len_b = job["max_len_a"], job["max_len_b"]
    sources = job["sources"][: o.limit or None]
    device = torch.device(o.device)
    if os.path.isdir(o.model):  # a Hugging Face MarianMT directory
        if device.type != "cpu":
            raise SystemExit("--device: a Marian model decodes on the CPU only")
        dec, cfg = torch_marian.load(o.model)
    else:
        model, cfg = load_checkpoint(o.model)
        dec = CachedDecoder(model.to(device), cfg)
    search = greedy if o.beam == 1 else beam_search
    order = sorted((i for i in range(len(sources)) if sources[i]), key=lambda i: len(sources[i]))  # tfm's order
    outputs = [[] for _ in sources]
    batch_ms = []

    def padded(idx):  # the sentences idx, each ended by the end symbol, padded to the longest, on the device
        src = torch.full((len(idx), max(len(sources[i]) for i in idx) + 1), cfg["pad_id"], dtype=torch.long)
        for r, i in enumerate(idx):
            src[r, :len(sources[i])] = torch.tensor(sources[i])
            src[r, len(sources[i])] = o.eos
        return src.to(device)

    batches = [order[b:b + o.batch] for b in range(0, len(order), o.batch)]
    with torch.no_grad():
        for _ in range(o.warmup if batches else 0):  # a GPU's first calls load its kernels
            search(dec, padded(batches[0]), cfg, o)
        start = time.perf_counter()
        for idx in batches:
            src = padded(idx)
            t0 = time.perf_counter()
            for i, hyp in zip(idx, search(dec, src, cfg, o)):
                outputs[i] = hyp
            batch_ms.append((time.perf_counter() - t0) * 1e3)
    seconds = time.perf_counter() - start
    print(json.dumps({"engine": "pytorch " + torch.__version__, "seconds": seconds, "sentences": len(sources),
                      "target_tokens": sum(len(h) + 1 for h in outputs), "median_batch_ms": statistics.median(batch_ms),
                      "outputs": outputs}))


if __name__ == "__main__":
    main()
