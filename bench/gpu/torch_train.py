#!/usr/bin/env python3
"""PyTorch's side of the GPU training benchmark (scripts/gpu/run.sh, stage bench): the
same model (tests/reference/model.py: nn.Transformer, whose attention is
scaled_dot_product_attention in training), the very batches tfm_bench trained on,
forward + backward + Adam (fused) on one GPU, eager or torch.compile'd, in f32 (TF32
off, as tfm) or bf16 autocast. Each step ends with its loss read back, as tfm_bench's.
Prints one JSON line."""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "reference"))
from model import EncoderDecoder  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="the model configuration tfm_bench train printed (JSON)")
    ap.add_argument("--batches", required=True, help="the batches tfm_bench train wrote (JSON)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--precision", choices=["f32", "bf16"], default="bf16")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--cudnn-sdpa", action="store_true",
                    help="let PyTorch pick cuDNN's attention (its default for bf16 on Hopper): it builds a graph for every new shape")
    ap.add_argument("--profile", action="store_true", help="print the GPU kernels' total times over the timed steps (torch.profiler) to stderr")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # PyTorch 2.11 runs bf16 attention on Hopper through cuDNN, which builds an execution
    # graph for every new shape: on Multi30k's batches, each of other lengths, a bf16 step
    # took 452 ms against 171 in f32, with 47 ms of GPU work (H200, window 6 and 7 of
    # scripts/gpu/NOTES.md). Its flash and memory-efficient kernels take any shape.
    torch.backends.cuda.enable_cudnn_sdp(a.cudnn_sdpa)
    torch.manual_seed(1)
    cfg = json.loads(a.config)
    dev = torch.device("cuda")
    batches = [{k: torch.tensor(v, dtype=torch.long, device=dev) for k, v in b.items()} for b in json.load(open(a.batches))]
    model = EncoderDecoder(cfg).to(dev).train()
    step_model = torch.compile(model) if a.compile else model
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=cfg["pad_id"])
    step_s, tokens = [], 0
    torch.cuda.reset_peak_memory_stats()
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) if a.profile else None
    for i, b in enumerate(batches):
        if profiler and i == a.warmup:
            profiler.start()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            logits = step_model(b["src"], b["tgt_in"])
            loss = loss_fn(logits.reshape(-1, logits.size(-1)).float(), b["tgt_out"].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()
        if i >= a.warmup:
            step_s.append(time.perf_counter() - t0)
            tokens += int((b["tgt_out"] != cfg["pad_id"]).sum())
    if profiler:
        profiler.stop()
        print(profiler.key_averages().table(sort_by="cuda_time_total", row_limit=25), file=sys.stderr)
    print(json.dumps({"engine": "pytorch " + torch.__version__ + (" compile" if a.compile else " eager") + (" cudnn-sdpa" if a.cudnn_sdpa else ""), "precision": a.precision,
                      "device": torch.cuda.get_device_name(), "parameters": sum(p.numel() for p in model.parameters()),
                      "steps": len(step_s), "seconds": sum(step_s), "target_tokens": tokens,
                      "median_step_ms": statistics.median(step_s) * 1e3,
                      "peak_memory_mib": torch.cuda.max_memory_allocated() / 2**20}))


if __name__ == "__main__":
    main()
