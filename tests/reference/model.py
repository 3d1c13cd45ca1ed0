"""The PyTorch twin of tfm's EncoderDecoder (src/models/encoder_decoder.h).

Parameter names are tfm's checkpoint names, so a tfm checkpoint loads with
`model.load_state_dict(safetensors_state, strict=False)` (strict=False only
because tied weights appear once) and this model's state_dict, saved as
safetensors, loads in tfm.
"""
import inspect
import math

import torch
import torch.nn as nn


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table of the paper (section 3.5), then dropout."""

    def __init__(self, d_model, dropout, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * -(math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.float(), persistent=False)

    def forward(self, x):  # [batch, len, d_model]
        return self.dropout(x + self.pe[: x.size(1)].to(x.dtype))


class EncoderDecoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.cfg = cfg
        self.src_embed = nn.Embedding(cfg["src_vocab"], d)
        self.tgt_embed = nn.Embedding(cfg["tgt_vocab"], d)
        self.src_pos = PositionalEncoding(d, cfg["dropout"], cfg["max_len"])
        self.tgt_pos = PositionalEncoding(d, cfg["dropout"], cfg["max_len"])
        self.transformer = nn.Transformer(
            d_model=d, nhead=cfg["heads"], num_encoder_layers=cfg["encoder_layers"],
            num_decoder_layers=cfg["decoder_layers"], dim_feedforward=cfg["d_ff"], dropout=cfg["dropout"],
            activation=cfg["activation"], batch_first=True, norm_first=cfg["norm_first"])
        self.generator = nn.Linear(d, cfg["tgt_vocab"])
        if cfg["share_embeddings"]:
            self.tgt_embed.weight = self.src_embed.weight
            self.generator.weight = self.src_embed.weight

    def forward(self, src, tgt):
        """src [batch, src_len], tgt [batch, tgt_len] token ids -> logits [batch, tgt_len, vocab]."""
        pad, d = self.cfg["pad_id"], self.cfg["d_model"]
        src_pad, tgt_pad = src == pad, tgt == pad
        causal = torch.triu(torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool, device=tgt.device), diagonal=1)
        x = self.src_pos(self.src_embed(src) * math.sqrt(d))
        y = self.tgt_pos(self.tgt_embed(tgt) * math.sqrt(d))
        h = self.transformer(x, y, tgt_mask=causal, src_key_padding_mask=src_pad,
                             tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
        return self.generator(h)


def noam_lr(step, d_model, factor, warmup):
    step = max(step, 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def encoder_stack(cfg):
    """nn.TransformerEncoder with a final LayerNorm: tfm's nn::Encoder."""
    layer = nn.TransformerEncoderLayer(cfg["d_model"], cfg["heads"], cfg["d_ff"], cfg["dropout"], activation=cfg["activation"],
                                       batch_first=True, norm_first=cfg["norm_first"])
    return nn.TransformerEncoder(layer, cfg["layers"], norm=nn.LayerNorm(cfg["d_model"]), enable_nested_tensor=False)


# PyTorch 2 lets TransformerEncoder be told that its mask is the causal one, and then
# runs scaled_dot_product_attention's causal kernels (flash) without the mask; Debian's
# PyTorch 1.13, which the CPU tests use, has no such argument.
CAUSAL_HINT = {"is_causal": True} if "is_causal" in inspect.signature(nn.TransformerEncoder.forward).parameters else {}


class GPT(nn.Module):
    """The twin of tfm's models::GPT: learned positions, causal pre-norm blocks, output tied to the token embedding."""

    def __init__(self, cfg):
        super().__init__()
        self.tok_embed = nn.Embedding(cfg["vocab"], cfg["d_model"])
        self.pos_embed = nn.Embedding(cfg["max_len"], cfg["d_model"])
        self.blocks = encoder_stack(cfg)

    def forward(self, ids):
        """ids [batch, len] -> logits [batch, len, vocab]."""
        n = ids.size(1)
        causal = torch.triu(torch.ones(n, n, dtype=torch.bool, device=ids.device), diagonal=1)
        x = self.tok_embed(ids) + self.pos_embed(torch.arange(n, device=ids.device))
        return self.blocks(x, mask=causal, **CAUSAL_HINT) @ self.tok_embed.weight.t()


class ViT(nn.Module):
    """The twin of tfm's models::ViT: Conv2d patches, [CLS], learned positions, pre-norm encoder, head on [CLS]."""

    def __init__(self, cfg):
        super().__init__()
        d, p = cfg["d_model"], cfg["patch"]
        patches = (cfg["image_size"] // p) ** 2
        self.patch_embed = nn.Conv2d(cfg["channels"], d, kernel_size=p, stride=p)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
        self.pos_embed = nn.Parameter(torch.zeros(1, patches + 1, d))
        self.encoder = encoder_stack(cfg)
        self.head = nn.Linear(d, cfg["classes"])

    def forward(self, images):
        """images [batch, C, H, W] -> logits [batch, classes]."""
        x = self.patch_embed(images).flatten(2).transpose(1, 2)  # [batch, patches, d]
        x = torch.cat([self.cls_token.expand(x.size(0), -1, -1), x], dim=1) + self.pos_embed
        return self.head(self.encoder(x)[:, 0])
