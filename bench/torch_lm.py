#!/usr/bin/python3
"""PyTorch side of the language-model benchmark (bench/run.sh): the recipe of
`tfm lm train`'s defaults (nanoGPT's CPU shakespeare_char recipe) with the GPT twin
of tests/reference/model.py: characters, the last 10% held out, 4 layers, 4 heads,
128 dims, context 64, batch 12, 2,000 steps, AdamW lr 1e-3 (β2 0.99, weight decay
0.1 on matrices and embeddings), 100 warm-up steps and cosine decay to 1e-4,
clipping 1.0, validation every 250 steps and at the end over every whole window of
the held-out text, as tfm validates. Prints one JSON line."""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from model import GPT  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", required=True)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    start = time.perf_counter()
    text = open(a.text, encoding="utf-8").read()
    chars = sorted(set(text))
    ids = torch.tensor([chars.index(c) + 5 for c in text], dtype=torch.long)  # after tfm's 5 special ids
    split = int(len(ids) * 0.9)
    train, valid = ids[:split], ids[split:]
    ctx, batch, warmup, lr, min_lr = 64, 12, 100, 1e-3, 1e-4
    cfg = {"vocab": len(chars) + 5, "d_model": 128, "heads": 4, "d_ff": 512, "layers": 4, "dropout": 0.0, "activation": "gelu",
           "norm_first": True, "max_len": ctx}
    model = GPT(cfg)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}], lr=lr,
                            betas=(0.9, 0.99))
    windows = valid[: (len(valid) // (ctx + 1)) * (ctx + 1)].view(-1, ctx + 1)

    def validate():
        model.eval()
        with torch.no_grad():
            total = 0.0
            for w in windows.split(64):
                total += F.cross_entropy(model(w[:, :-1]).flatten(0, 1), w[:, 1:].flatten(), reduction="sum").item()
        model.train()
        return total / windows[:, 1:].numel()

    def lr_at(step):  # step counts from 1
        if step <= warmup:
            return lr * step / warmup
        t = (step - warmup) / (a.steps - warmup)
        return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * t))

    losses = []
    for step in range(1, a.steps + 1):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        starts = torch.randint(0, len(train) - ctx - 1, (batch,))
        w = torch.stack([train[s:s + ctx + 1] for s in starts.tolist()])
        loss = F.cross_entropy(model(w[:, :-1]).flatten(0, 1), w[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 250 == 0 or step == a.steps:
            losses.append(validate())
    print(json.dumps({"engine": "pytorch " + torch.__version__, "seconds": time.perf_counter() - start, "val_loss": losses[-1],
                      "best_val_loss": min(losses)}))


if __name__ == "__main__":
    main()
