#!/usr/bin/python3
"""PyTorch side of bench/run.sh: the same model (tests/reference/model.py), shapes
and steps as bench_transformer.cpp. Prints one JSON line."""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from model import EncoderDecoder  # noqa: E402


def median_seconds(warmup, repeats, fn):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    for name, default in [("d-model", 512), ("heads", 8), ("d-ff", 2048), ("layers", 6), ("vocab", 8000), ("batch", 64),
                          ("src-len", 14), ("tgt-len", 14), ("repeats", 5), ("warmup", 2), ("threads", 2)]:
        ap.add_argument("--" + name, type=int, default=default)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    cfg = {"src_vocab": a.vocab, "tgt_vocab": a.vocab, "d_model": a.d_model, "heads": a.heads, "d_ff": a.d_ff,
           "encoder_layers": a.layers, "decoder_layers": a.layers, "dropout": 0.1, "activation": "relu",
           "norm_first": False, "share_embeddings": True, "max_len": 5000, "pad_id": 0}
    model = EncoderDecoder(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=0)
    src = torch.randint(1, a.vocab, (a.batch, a.src_len))
    tgt_in = torch.randint(1, a.vocab, (a.batch, a.tgt_len))
    tgt_out = torch.randint(1, a.vocab, (a.batch, a.tgt_len))

    def train_step():
        logits = model(src, tgt_in)
        loss = loss_fn(logits.reshape(-1, a.vocab), tgt_out.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()

    model.train()
    train_s = median_seconds(a.warmup, a.repeats, train_step)
    model.eval()

    def forward():
        with torch.no_grad():
            model(src, tgt_in)

    forward_s = median_seconds(a.warmup, a.repeats, forward)
    print(json.dumps({"engine": "pytorch " + torch.__version__, "threads": torch.get_num_threads(),
                      "parameters": sum(p.numel() for p in model.parameters()), "train_step_ms": train_s * 1e3,
                      "forward_ms": forward_s * 1e3, "train_tokens_per_s": a.batch * a.tgt_len / train_s}))


if __name__ == "__main__":
    main()
