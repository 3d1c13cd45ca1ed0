#!/usr/bin/env python3
"""PyTorch's side of the GPU language-model benchmark (scripts/gpu/run.sh, stage
bench-lm): tfm's GPT twin (tests/reference/model.py: learned positions, causal pre-norm
nn.TransformerEncoder layers with GELU, the output tied to the token embedding) on the
very windows tfm_bench lm trained on, with tfm lm train's recipe as tfm_bench takes it:
forward, backward, clipping at 1.0 and AdamW (fused on the GPU; lr 1e-3, betas 0.9 and
0.99, weight decay 0.1 on matrices and embeddings). Eager or torch.compile'd, in f32
(TF32 off, as tfm) or bf16 autocast with flash attention (checked once before timing:
"attention" in the output). Each step ends with its loss read back, as tfm_bench's.
Prints one JSON line."""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "reference"))
from model import GPT  # noqa: E402


def init_parameters(model, layers):
    """tfm's GPT::init_parameters (nanoGPT's): matrices and embeddings N(0, 0.02), the residual
    output projections N(0, 0.02 / sqrt(2 x layers)); biases stay 0 and LayerNorm gains 1.
    PyTorch's defaults (N(0, 1) embeddings) would start the tied output at a loss of
    tens, and the two sides' losses would not be comparable."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                residual = name.endswith(("out_proj.weight", "linear2.weight"))
                p.normal_(0.0, 0.02 / (2 * layers) ** 0.5 if residual else 0.02)


def adamw(model, on_gpu):
    """tfm lm train's AdamW: weight decay on matrices and embeddings only, as nanoGPT groups them."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    fused = {"fused": True} if on_gpu else {}  # one kernel for every parameter; a CUDA option
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}], lr=1e-3,
                             betas=(0.9, 0.99), eps=1e-8, **fused)


def attention_kernel(model, x):
    """Whether the bf16 forward runs on flash attention alone: the twin's causal hint must reach
    scaled_dot_product_attention without a mask, or PyTorch takes a slower kernel silently."""
    from torch.nn.attention import SDPBackend, sdpa_kernel  # PyTorch 2.3 and later
    try:
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16), sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            model(x)
        return "flash"
    except RuntimeError as e:
        return "NOT flash: " + str(e).strip().splitlines()[0][:80]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="the model configuration tfm_bench lm printed (JSON)")
    ap.add_argument("--batches", required=True, help="the windows tfm_bench lm wrote (JSON)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--precision", choices=["f32", "bf16"], default="bf16")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu to try the script on tiny sizes")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1)
    dev = torch.device(a.device)
    on_gpu = dev.type == "cuda"
    if on_gpu:  # PyTorch 2.11's bf16 attention on Hopper is cuDNN's; off, as in torch_train.py (which says why), it is flash
        torch.backends.cuda.enable_cudnn_sdp(False)
    cfg = json.loads(a.config)
    windows = [torch.tensor(b["ids"], dtype=torch.long, device=dev) for b in json.load(open(a.batches))]
    batches = [(w[:, :-1].contiguous(), w[:, 1:].contiguous()) for w in windows]  # inputs, and the next tokens as targets
    model = GPT(cfg)
    init_parameters(model, cfg["layers"])
    model = model.to(dev).train()
    step_model = torch.compile(model) if a.compile else model
    opt = adamw(model, on_gpu)
    attention = attention_kernel(model, batches[0][0]) if on_gpu and a.precision == "bf16" else None  # f32: PyTorch's choice
    step_s, tokens, loss_value = [], 0, 0.0
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    for i, (x, y) in enumerate(batches):
        t0 = time.perf_counter()
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            logits = step_model(x)
            loss = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_value = loss.item()
        if i >= a.warmup:
            step_s.append(time.perf_counter() - t0)
            tokens += y.numel()
    print(json.dumps({"engine": "pytorch " + torch.__version__ + (" compile" if a.compile else " eager"), "precision": a.precision,
                      "device": torch.cuda.get_device_name() if on_gpu else "cpu", "parameters": sum(p.numel() for p in model.parameters()),
                      "steps": len(step_s), "seconds": sum(step_s), "target_tokens": tokens, "median_step_ms": statistics.median(step_s) * 1e3,
                      "last_loss": loss_value, "attention": attention, "peak_memory_mib": torch.cuda.max_memory_allocated() / 2**20 if on_gpu else 0.0}))


if __name__ == "__main__":
    main()
