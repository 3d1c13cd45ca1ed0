#!/usr/bin/python3
"""Writes tests/fixtures/lora_forward.safetensors: a LoRA layer's forward as PEFT's lora.Linear computes it
(result = base_layer(x) + lora_B(lora_A(dropout(x))) * scaling, scaling = lora_alpha / r, dropout 0), in PyTorch,
for tfm's nn::LoraBlocks (tests/test_lora.cpp, Lora.ForwardAsPyTorch).

    /usr/bin/python3 tests/reference/make_lora_fixtures.py

Float32 on the CPU, from seed 0. tfm fuses q, k and v into one product: W [7, 4] is the three projections
stacked (q 3 rows, k 2, v 2), the q and v blocks adapted (rank 2, lora_alpha 3), k not; PEFT adapts the
separate projections, so y is the three outputs concatenated.

- x [2, 3, 4], W [7, 4], A0 [2, 4], B0 [3, 2] (q), A2 [2, 4], B2 [2, 2] (v): the inputs.
- y [2, 3, 7]: q_proj(x) | k_proj(x) | v_proj(x), each a PEFT-style LoRA Linear where adapted.
- delta [7, 4]: the change merging makes to W (PEFT's get_delta_weight: B @ A * scaling), zeros for k.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import save  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "lora_forward.safetensors")


class LoraLinear(torch.nn.Module):
    """PEFT's lora.Linear forward, written out: the base layer plus the scaled low-rank path."""

    def __init__(self, weight, a, b, alpha):
        super().__init__()
        self.base_layer = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
        self.base_layer.weight.data = weight
        self.lora_A = torch.nn.Linear(a.shape[1], a.shape[0], bias=False)
        self.lora_A.weight.data = a
        self.lora_B = torch.nn.Linear(b.shape[1], b.shape[0], bias=False)
        self.lora_B.weight.data = b
        self.scaling = alpha / a.shape[0]

    def forward(self, x):
        return self.base_layer(x) + self.lora_B(self.lora_A(x)) * self.scaling

    def delta_weight(self):
        return (self.lora_B.weight @ self.lora_A.weight) * self.scaling


def main():
    torch.manual_seed(0)
    t = {"x": torch.rand(2, 3, 4) * 2 - 1, "W": torch.rand(7, 4) * 2 - 1, "A0": torch.rand(2, 4) * 2 - 1,
         "B0": torch.rand(3, 2) * 2 - 1, "A2": torch.rand(2, 4) * 2 - 1, "B2": torch.rand(2, 2) * 2 - 1}
    q = LoraLinear(t["W"][:3].clone(), t["A0"], t["B0"], 3.0)
    k = torch.nn.Linear(4, 2, bias=False)
    k.weight.data = t["W"][3:5].clone()
    v = LoraLinear(t["W"][5:].clone(), t["A2"], t["B2"], 3.0)
    with torch.no_grad():
        t["y"] = torch.cat([q(t["x"]), k(t["x"]), v(t["x"])], dim=-1)
        t["delta"] = torch.cat([q.delta_weight(), torch.zeros(2, 4), v.delta_weight()], dim=0)
    save(OUT, {name: x.contiguous() for name, x in t.items()})
    print("wrote", OUT)


if __name__ == "__main__":
    main()
