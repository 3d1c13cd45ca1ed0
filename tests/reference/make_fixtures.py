#!/usr/bin/python3
"""Writes the PyTorch reference fixtures that tfm's C++ tests compare against.

Run with Debian's interpreter (python3-torch is installed for it only):
    /usr/bin/python3 tests/reference/make_fixtures.py
Outputs go to tests/fixtures/ (committed, so CI needs no torch). The models are
built in float32 from fixed seeds, then evaluated in float64, so the reference
carries no rounding error of its own; dropout is 0.
"""
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import GPT, EncoderDecoder, ViT, noam_lr  # noqa: E402
import safetensors_io  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
SMOOTHING, CLIP, FACTOR, WARMUP, STEPS = 0.1, 1.0, 1.0, 10, 5
ADAMW = {"lr": 1e-2, "min_lr": 1e-3, "warmup": 2, "decay_steps": 5, "beta2": 0.99, "weight_decay": 0.1}


def tfm_config(norm_first, activation, share):
    vocab = 13
    return {"src_vocab": vocab, "tgt_vocab": vocab if share else 11, "d_model": 16, "heads": 4, "d_ff": 32,
            "encoder_layers": 2, "decoder_layers": 2, "dropout": 0.0, "activation": activation,
            "norm_first": norm_first, "share_embeddings": share, "max_len": 64, "pad_id": 0}


def padded_batch(gen, rows, lengths, vocab):
    """Random ids 1..vocab-1 with padding (id 0) after each row's length."""
    x = torch.randint(1, vocab, (rows, max(lengths)), generator=gen)
    for r, n in enumerate(lengths):
        x[r, n:] = 0
    return x


def unique_state(model):
    """state_dict without the duplicates that weight tying creates (first name wins, as in tfm)."""
    seen, out = set(), {}
    for name, p in model.named_parameters():  # named_parameters already skips tied duplicates
        if id(p) not in seen:
            seen.add(id(p))
            out[name] = p
    return out


def optimizer_steps(model, opt, lr_at, loss_of):
    """STEPS optimiser steps with the learning rate lr_at(step) and clipping; returns each step's loss."""
    losses = []
    for step in range(1, STEPS + 1):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        step_loss = loss_of(model)
        opt.zero_grad()
        step_loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        losses.append(step_loss.item())
    return losses


def make_model_fixture(name, norm_first, activation, share):
    torch.manual_seed(1234)
    cfg = tfm_config(norm_first, activation, share)
    model = EncoderDecoder(cfg)
    for p in model.parameters():
        if p.dim() > 1:
            torch.nn.init.xavier_uniform_(p)
    # Non-trivial LayerNorm and bias values, so that a swapped parameter cannot go unnoticed.
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.empty_like(p).uniform_(-0.2, 0.2))
    weights = {n: p.detach().clone() for n, p in unique_state(model).items()}
    model = model.double().train()

    gen = torch.Generator().manual_seed(99)
    src = padded_batch(gen, 3, [7, 5, 3], cfg["src_vocab"])
    tgt = padded_batch(gen, 3, [6, 6, 4], cfg["tgt_vocab"])
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]

    trace = {}
    hooks = []
    for mod_name, mod in model.named_modules():
        leaf = mod_name.split(".")[-1]
        if mod_name in ("src_pos", "tgt_pos", "generator", "transformer.encoder.norm", "transformer.decoder.norm") or \
                leaf in ("self_attn", "multihead_attn", "linear1", "linear2", "norm1", "norm2", "norm3") or \
                (mod_name.count(".") == 3 and ".layers." in mod_name):
            def hook(m, inputs, output, key=mod_name):
                trace[key] = (output[0] if isinstance(output, tuple) else output).detach().clone()
            hooks.append(mod.register_forward_hook(hook))

    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=SMOOTHING, ignore_index=cfg["pad_id"])
    logits = model(src, tgt_in)
    loss = loss_fn(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1))
    loss.backward()
    for h in hooks:
        h.remove()
    grads = {n: p.grad.detach().clone() for n, p in unique_state(model).items()}

    # A few optimiser steps: Adam (paper betas/eps), warm-up schedule, clipping.
    opt = torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)
    losses = optimizer_steps(model, opt, lambda step: noam_lr(step, cfg["d_model"], FACTOR, WARMUP),
                             lambda m: loss_fn(m(src, tgt_in).reshape(-1, cfg["tgt_vocab"]), tgt_out.reshape(-1)))

    tensors = dict(weights)
    tensors["input.src"] = src.float()
    tensors["input.tgt_in"] = tgt_in.float()
    tensors["input.tgt_out"] = tgt_out.float()
    tensors.update({"trace." + k: v for k, v in trace.items()})
    tensors["loss"] = loss.detach().reshape(())
    tensors.update({"grad." + k: v for k, v in grads.items()})
    tensors["train.losses"] = torch.tensor(losses)
    meta = {"tfm.config": json.dumps(cfg), "tfm.model": "encoder_decoder",
            "fixture.train": json.dumps({"smoothing": SMOOTHING, "clip": CLIP, "factor": FACTOR, "warmup": WARMUP, "steps": STEPS})}
    safetensors_io.save(os.path.join(OUT, f"model_{name}.safetensors"), tensors, meta)
    # The bare state_dict, as a PyTorch user would save it: loads into tfm directly.
    if name == "post_relu":
        safetensors_io.save(os.path.join(OUT, "pytorch_state_dict.safetensors"), weights, {"format": "pt"})
    print(f"model_{name}: loss {loss.item():.6f}, {len(trace)} traced outputs, step losses {np.round(losses, 5).tolist()}")


def trace_hooks(model, keep):
    """Forward hooks recording the output of every module whose name `keep` accepts."""
    trace, hooks = {}, []
    for mod_name, mod in model.named_modules():
        if keep(mod_name):
            def hook(m, inputs, output, key=mod_name):
                trace[key] = (output[0] if isinstance(output, tuple) else output).detach().clone()
            hooks.append(mod.register_forward_hook(hook))
    return trace, hooks


def is_stack_module(name):
    leaf = name.split(".")[-1]
    return leaf in ("self_attn", "linear1", "linear2", "norm1", "norm2", "head") or name.endswith("encoder.norm") or \
        name == "blocks.norm" or (name.count(".") == 2 and ".layers." in name)


def cosine_lr(step, lr, min_lr, warmup, decay_steps):
    """tfm's Schedule::Kind::Cosine (nanoGPT's get_lr with steps counted from 1)."""
    if step < warmup:
        return lr * step / warmup
    if step >= decay_steps:
        return min_lr
    ratio = (step - warmup) / max(1, decay_steps - warmup)
    return min_lr + 0.5 * (1 + math.cos(math.pi * ratio)) * (lr - min_lr)


def make_family_fixture(name, model, cfg, inputs, loss_of):
    """Weights, per-module outputs, loss, gradients and 5 AdamW + cosine + clipping steps of one model."""
    with torch.no_grad():  # non-trivial LayerNorm and bias values, so that a swapped parameter cannot go unnoticed
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.empty_like(p).uniform_(-0.2, 0.2))
    weights = {n: p.detach().clone() for n, p in model.named_parameters()}
    model = model.double().train()
    trace, hooks = trace_hooks(model, is_stack_module)
    loss = loss_of(model)
    loss.backward()
    for h in hooks:
        h.remove()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    # AdamW as nanoGPT groups it: weight decay on matrices and embeddings only.
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": ADAMW["weight_decay"]}, {"params": rest, "weight_decay": 0.0}],
                            lr=0.0, betas=(0.9, ADAMW["beta2"]), eps=1e-8)
    losses = optimizer_steps(model, opt, lambda step: cosine_lr(step, ADAMW["lr"], ADAMW["min_lr"], ADAMW["warmup"], ADAMW["decay_steps"]),
                             loss_of)
    tensors = dict(weights)
    tensors.update({"input." + k: v.float() for k, v in inputs.items()})
    tensors.update({"trace." + k: v for k, v in trace.items()})
    tensors["loss"] = loss.detach().reshape(())
    tensors.update({"grad." + k: v for k, v in grads.items()})
    tensors["train.losses"] = torch.tensor(losses)
    meta = {"tfm.config": json.dumps(cfg), "tfm.model": cfg["family"], "fixture.train": json.dumps(dict(ADAMW, clip=CLIP, steps=STEPS))}
    safetensors_io.save(os.path.join(OUT, f"{name}.safetensors"), tensors, meta)
    print(f"{name}: loss {loss.item():.6f}, {len(trace)} traced outputs, step losses {np.round(losses, 5).tolist()}")


def stack_config(family, **extra):
    cfg = {"family": family, "d_model": 16, "heads": 4, "d_ff": 32, "layers": 2, "dropout": 0.0, "activation": "gelu",
           "norm_first": True}
    cfg.update(extra)
    return cfg


def make_gpt_fixture():
    """A causal pre-norm GELU block stack with the output tied to the token embedding."""
    torch.manual_seed(4321)
    cfg = stack_config("gpt", vocab=17, max_len=16, learned_positions=True)
    model = GPT(cfg)
    for p in model.parameters():
        if p.dim() > 1:
            torch.nn.init.normal_(p, std=0.3)
    ids = torch.randint(0, cfg["vocab"], (3, 10), generator=torch.Generator().manual_seed(5))

    def loss_of(m):
        logits = m(ids[:, :-1])
        return torch.nn.functional.cross_entropy(logits.reshape(-1, cfg["vocab"]), ids[:, 1:].reshape(-1))
    make_family_fixture("gpt", model, cfg, {"ids": ids}, loss_of)


def make_vit_fixture():
    """ViT forward and backward: Conv2d patches, [CLS], positions, nn.TransformerEncoderLayer(norm_first, gelu)."""
    torch.manual_seed(8765)
    cfg = stack_config("vit", image_size=8, channels=2, patch=4, classes=5)
    model = ViT(cfg)
    for n, p in model.named_parameters():
        if p.dim() > 1:
            torch.nn.init.normal_(p, std=0.3)
    gen = torch.Generator().manual_seed(6)
    images = torch.randn(3, 2, 8, 8, generator=gen)
    labels = torch.tensor([4, 0, 2])

    def loss_of(m):
        return torch.nn.functional.cross_entropy(m(images.double()), labels)
    make_family_fixture("vit", model, cfg, {"images": images, "labels": labels}, loss_of)


def make_loss_fixture():
    """Both label-smoothing forms on logits with padding targets."""
    gen = torch.Generator().manual_seed(7)
    logits = torch.randn(8, 9, generator=gen, dtype=torch.float64) * 2
    targets = torch.tensor([3, 0, 8, 1, 0, 5, 2, 7])
    pad, eps = 0, 0.1

    x = logits.clone().requires_grad_(True)
    ce = torch.nn.CrossEntropyLoss(label_smoothing=eps, ignore_index=pad)(x, targets)
    ce.backward()
    ce_grad = x.grad.clone()

    # The Annotated Transformer's LabelSmoothing + KLDivLoss(sum), normalised by the token count.
    x = logits.clone().requires_grad_(True)
    log_probs = torch.log_softmax(x, dim=-1)
    true_dist = torch.full_like(log_probs, eps / (logits.size(1) - 2))
    true_dist.scatter_(1, targets.unsqueeze(1), 1.0 - eps)
    true_dist[:, pad] = 0
    true_dist[targets == pad] = 0
    ntokens = float((targets != pad).sum())
    kl = torch.nn.KLDivLoss(reduction="sum")(log_probs, true_dist) / ntokens
    kl.backward()
    safetensors_io.save(os.path.join(OUT, "losses.safetensors"), {
        "logits": logits, "targets": targets.float(), "cross_entropy": ce.detach().reshape(()),
        "cross_entropy.grad": ce_grad, "kl": kl.detach().reshape(()), "kl.grad": x.grad, "kl.normalizer": torch.tensor(ntokens)},
        {"smoothing": str(eps), "pad": str(pad)})
    print(f"losses: cross_entropy {ce.item():.6f}, kl {kl.item():.6f}")


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    make_loss_fixture()
    for name, norm_first, activation, share in [("post_relu", False, "relu", False), ("post_gelu", False, "gelu", False),
                                                ("pre_relu", True, "relu", False), ("pre_gelu", True, "gelu", False),
                                                ("pre_gelu_tied", True, "gelu", True)]:
        make_model_fixture(name, norm_first, activation, share)
    make_gpt_fixture()
    make_vit_fixture()


if __name__ == "__main__":
    main()
