#!/usr/bin/python3
"""Writes tests/fixtures/llama_ops.safetensors: the forward of the Llama family's pieces as transformers' own
code computes them, for the ops that implement them (ops::rms_norm, ops::rotary, grouped-query ops::attention).

Run with Debian's interpreter inside the offline transformers 4.39 environment that
../shared/tools/hf-reference/setup.sh builds (its README says how):
    /usr/bin/python3 tests/reference/make_llama_op_fixtures.py HFENV
HFENV: the DEST given to setup.sh (default /work/hfenv). Float32 on the CPU, from seed 0:

- rms.x [2, 3, 16], rms.weight, rms.y: LlamaRMSNorm (eps 1e-6).
- rope.x [2, 5, 32] (4 heads of 8), rope.positions [2, 5]; rope.half: LlamaRotaryEmbedding (base 500) and
  apply_rotary_pos_emb; rope.linear: LlamaLinearScalingRotaryEmbedding (factor 2); rope.interleaved: Meta's
  llama reference (apply_rotary_emb: pairs (2i, 2i + 1) as complex numbers, torch.polar).
- rope.llama3.freq [64]: the inverse frequencies of Llama 3.1's rope_scaling (factor 8, low_freq_factor 1,
  high_freq_factor 4, original_max_position_embeddings 8192, rope_theta 500000, heads of 128), by
  _compute_llama3_parameters of later transformers (4.43+), which 4.39 lacks: copied below from its
  published definition.
- gqa.q [2, 5, 32] (4 heads of 8), gqa.k and gqa.v [2, 5, 16] (2 K/V heads), gqa.out: LlamaAttention's eager
  path (repeat_kv, softmax of the scaled scores under the causal mask, the weighted values).
"""
import math
import os
import sys

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HFENV", "/work/hfenv"))
import hfenv  # noqa: E402,F401

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers.models.llama.modeling_llama import (LlamaLinearScalingRotaryEmbedding, LlamaRMSNorm,  # noqa: E402
                                                      LlamaRotaryEmbedding, apply_rotary_pos_emb, repeat_kv)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "llama_ops.safetensors")


def heads(x, n):
    """[batch, time, n * dk] -> [batch, n, time, dk], as LlamaAttention's view and transpose."""
    b, t, d = x.shape
    return x.view(b, t, n, d // n).transpose(1, 2)


def merged(x):
    """[batch, n, time, dk] -> [batch, time, n * dk]."""
    b, n, t, dk = x.shape
    return x.transpose(1, 2).reshape(b, t, n * dk)


def rotated(embedding, x, positions):
    cos, sin = embedding(x, positions)
    q = heads(x, 4)
    out, _ = apply_rotary_pos_emb(q, q, cos, sin)
    return merged(out)


def interleaved(x, positions, theta):
    """Meta's llama/model.py: precompute_freqs_cis and apply_rotary_emb."""
    dk = 8
    freqs = 1.0 / (theta ** (torch.arange(0, dk, 2)[: (dk // 2)].float() / dk))
    cis = torch.polar(torch.ones(positions.shape + (dk // 2,)), positions.float()[..., None] * freqs)  # [b, t, pairs]
    b, t, d = x.shape
    xc = torch.view_as_complex(x.float().reshape(b, t, d // dk, dk // 2, 2))
    return torch.view_as_real(xc * cis[:, :, None, :]).reshape(b, t, d)


def llama3_inv_freq(theta, dim, factor, low_freq_factor, high_freq_factor, old_context_len):
    """transformers' _compute_llama3_parameters (modeling_rope_utils.py, 4.43 and later)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def gqa(q, k, v):
    qh, kh, vh = heads(q, 4), repeat_kv(heads(k, 2), 2), repeat_kv(heads(v, 2), 2)
    scores = qh @ kh.transpose(2, 3) / math.sqrt(qh.shape[-1])
    t = q.shape[1]
    scores = scores + torch.triu(torch.full((t, t), float("-inf")), 1)
    return merged(torch.softmax(scores, dim=-1, dtype=torch.float32) @ vh)


def main():
    torch.manual_seed(0)
    t = {}
    with torch.no_grad():
        norm = LlamaRMSNorm(16, eps=1e-6)
        norm.weight.copy_(1.0 + 0.3 * torch.randn(16))
        t["rms.x"], t["rms.weight"] = 2 * torch.randn(2, 3, 16), norm.weight.clone()
        t["rms.y"] = norm(t["rms.x"])
        x, positions = torch.randn(2, 5, 32), torch.tensor([[0, 1, 2, 3, 4], [3, 9, 17, 30, 61]])
        t["rope.x"], t["rope.positions"] = x, positions.to(torch.int32)
        t["rope.half"] = rotated(LlamaRotaryEmbedding(8, base=500), x, positions)
        t["rope.linear"] = rotated(LlamaLinearScalingRotaryEmbedding(8, base=500, scaling_factor=2.0), x, positions)
        t["rope.interleaved"] = interleaved(x, positions, 500.0)
        t["rope.llama3.freq"] = llama3_inv_freq(500000.0, 128, 8.0, 1.0, 4.0, 8192)
        t["gqa.q"], t["gqa.k"], t["gqa.v"] = torch.randn(2, 5, 32), torch.randn(2, 5, 16), torch.randn(2, 5, 16)
        t["gqa.out"] = gqa(t["gqa.q"], t["gqa.k"], t["gqa.v"])
    save_file({k: v.contiguous() for k, v in t.items()}, OUT,
              metadata={"transformers": __import__("transformers").__version__, "torch": torch.__version__})
    print(OUT, ", ".join(f"{k} {list(v.shape)}" for k, v in t.items()))


if __name__ == "__main__":
    main()
