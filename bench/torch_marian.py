"""A MarianMT (opus-mt) model in plain PyTorch, for bench/torch_translate.py: the
Hugging Face layout read from a model directory (config.json, model.safetensors),
computed as transformers' MarianMTModel computes it (post-norm, SiLU, sqrt(d)-scaled
shared embeddings, [sin | cos] positions, final_logits_bias), and decoded as its
generate() does with use_cache: the encoder runs once, the encoder memory is projected
to keys and values once per layer, each step feeds only the newest token and appends
its keys and values to a cache."""
import json
import math
import os

import torch
import torch.nn.functional as F

import safetensors_io


def sinusoids(positions, d):
    """[positions, d]: MarianSinusoidalPositionalEmbedding, sines in the first half, cosines in the second."""
    pos = torch.arange(positions, dtype=torch.float64)[:, None]
    rate = torch.pow(10000.0, torch.arange(0, d, 2, dtype=torch.float64) / d)[None, :]
    return torch.cat([torch.sin(pos / rate), torch.cos(pos / rate)], 1).float()


def load(directory):
    """-> (MarianDecoder, the search settings torch_translate's beam search reads)."""
    hf = json.load(open(os.path.join(directory, "config.json")))
    generation_path = os.path.join(directory, "generation_config.json")
    generation = json.load(open(generation_path)) if os.path.exists(generation_path) else {}
    tensors, _ = safetensors_io.load(os.path.join(directory, "model.safetensors"))
    w = {k.removeprefix("model."): torch.from_numpy(v).float() for k, v in tensors.items()}
    setting = lambda key, default: generation.get(key, hf.get(key, default))  # noqa: E731
    cfg = {"pad_id": hf["pad_token_id"], "max_len": hf["max_position_embeddings"], "hf_search": True,
           "forced_eos": setting("forced_eos_token_id", -1) == setting("eos_token_id", 0),
           "renormalize": bool(setting("renormalize_logits", False)), "max_length": setting("max_length", 20)}
    return MarianDecoder(w, hf), cfg


class MarianDecoder:
    """Incremental decoding with MarianMTModel's weights (names without the `model.` prefix)."""

    def __init__(self, w, hf):
        self.w, self.d, self.h, self.pad = w, hf["d_model"], hf["decoder_attention_heads"], hf["pad_token_id"]
        self.enc_layers, self.dec_layers = hf["encoder_layers"], hf["decoder_layers"]
        self.scale = math.sqrt(self.d) if hf.get("scale_embedding", False) else 1.0
        self.pos_table = sinusoids(hf["max_position_embeddings"], self.d)

    def linear(self, x, name):
        return F.linear(x, self.w[name + ".weight"], self.w[name + ".bias"])

    def norm(self, x, name):
        return F.layer_norm(x, (self.d,), self.w[name + ".weight"], self.w[name + ".bias"], 1e-5)

    def split(self, x):  # [rows, len, d] -> [rows, heads, len, d_k]
        return x.view(x.size(0), x.size(1), self.h, self.d // self.h).transpose(1, 2)

    def attend(self, q, k, v, out_proj, mask=None):  # q [rows, heads, q_len, d_k], k/v [rows, heads, k_len, d_k]
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.linear(ctx.transpose(1, 2).reshape(q.size(0), q.size(2), self.d), out_proj)

    def feed_forward(self, x, layer):
        return self.linear(F.silu(self.linear(x, layer + "fc1")), layer + "fc2")

    def embed(self, ids, first):  # ids [rows, len] -> [rows, len, d]
        return F.embedding(ids, self.w["shared.weight"]) * self.scale + self.pos_table[first:first + ids.size(1)]

    def start(self, src):
        """src [rows, src_len] -> caches the encoder memory's keys and values per decoder layer."""
        pad = (src == self.pad)[:, None, None, :]
        x = self.embed(src, 0)
        for i in range(self.enc_layers):
            at = f"encoder.layers.{i}."
            q, k, v = (self.split(self.linear(x, at + "self_attn." + p)) for p in ("q_proj", "k_proj", "v_proj"))
            x = self.norm(x + self.attend(q, k, v, at + "self_attn.out_proj", pad), at + "self_attn_layer_norm")
            x = self.norm(x + self.feed_forward(x, at), at + "final_layer_norm")
        self.mem_pad = pad
        self.mem_kv = [tuple(self.split(self.linear(x, f"decoder.layers.{i}.encoder_attn.{p}")) for p in ("k_proj", "v_proj"))
                       for i in range(self.dec_layers)]
        self.self_kv = [None] * self.dec_layers
        self.pos = 0

    def step(self, tokens):
        """tokens [rows] (the newest of each row) -> log-probabilities [rows, vocab]."""
        x = self.embed(tokens[:, None], self.pos)
        self.pos += 1
        for i in range(self.dec_layers):
            at = f"decoder.layers.{i}."
            q, k, v = (self.split(self.linear(x, at + "self_attn." + p)) for p in ("q_proj", "k_proj", "v_proj"))
            if self.self_kv[i] is not None:
                k, v = torch.cat([self.self_kv[i][0], k], 2), torch.cat([self.self_kv[i][1], v], 2)
            self.self_kv[i] = (k, v)
            x = self.norm(x + self.attend(q, k, v, at + "self_attn.out_proj"), at + "self_attn_layer_norm")
            q = self.split(self.linear(x, at + "encoder_attn.q_proj"))
            x = self.norm(x + self.attend(q, *self.mem_kv[i], at + "encoder_attn.out_proj", self.mem_pad), at + "encoder_attn_layer_norm")
            x = self.norm(x + self.feed_forward(x, at), at + "final_layer_norm")
        logits = F.linear(x[:, 0], self.w["shared.weight"]) + self.w["final_logits_bias"][0]
        return torch.log_softmax(logits, dim=-1)

    def keep_rows(self, rows):
        """Reorders (beam search) and drops (finished sentences) cached rows."""
        self.self_kv = [(k[rows], v[rows]) for k, v in self.self_kv]
        self.mem_kv = [(k[rows], v[rows]) for k, v in self.mem_kv]
        self.mem_pad = self.mem_pad[rows]
