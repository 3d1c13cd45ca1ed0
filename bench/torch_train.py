#!/usr/bin/python3
"""PyTorch side of the training benchmark (bench/run.sh): the same model
(tests/reference/model.py, tfm's configuration) and the very batches tfm_bench
trained on, forward + backward + Adam. Prints one JSON line."""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from model import EncoderDecoder  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="the model configuration tfm_bench train printed (JSON)")
    ap.add_argument("--batches", required=True, help="the batches tfm_bench train wrote (JSON)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    cfg = json.loads(a.config)
    batches = [{k: torch.tensor(v, dtype=torch.long) for k, v in b.items()} for b in json.load(open(a.batches))]
    model = EncoderDecoder(cfg).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=cfg["pad_id"])
    step_s, tokens = [], 0
    for i, b in enumerate(batches):
        t0 = time.perf_counter()
        logits = model(b["src"], b["tgt_in"])
        loss = loss_fn(logits.reshape(-1, logits.size(-1)), b["tgt_out"].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i >= a.warmup:
            step_s.append(time.perf_counter() - t0)
            tokens += int((b["tgt_out"] != cfg["pad_id"]).sum())
    print(json.dumps({"engine": "pytorch " + torch.__version__, "threads": torch.get_num_threads(),
                      "parameters": sum(p.numel() for p in model.parameters()), "steps": len(step_s), "seconds": sum(step_s),
                      "target_tokens": tokens, "median_step_ms": statistics.median(step_s) * 1e3}))


if __name__ == "__main__":
    main()
