#!/usr/bin/python3
"""Checks that transformers 4.39 loads what `tfm export --hf` writes of the Llama family, and computes what
the source directory computed: for llama_tiny, mistral_tiny, qwen2_tiny and llama_bf16_sharded_tiny, the
export's class (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM), its logits within 1e-4 of the
fixture's reference.safetensors (transformers' own on the source) and the same greedy ids.

    /usr/bin/python3 tests/reference/check_hf_llama_export.py BUILD/tfm [HFENV [MODEL ADAPTER]]

HFENV: the DEST given to ../shared/tools/hf-reference/setup.sh (default /work/hfenv). With MODEL (a Llama-family
directory) and ADAPTER (a LoRA adapter of it from `tfm lm train --lora-rank`, PEFT's layout), also: the export with
the adapter merged (`tfm export --hf --lora`) computes in transformers what MODEL computes with each adapter tensor
added to the module PEFT's name of it names (W + lora_alpha / r * B @ A, PEFT's merge_and_unload), within 1e-5.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, sys.argv[2] if len(sys.argv) > 2 else os.environ.get("HFENV", "/work/hfenv"))
import hfenv  # noqa: E402,F401

import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import load  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "hf")
CLASSES = {"llama_tiny": "LlamaForCausalLM", "mistral_tiny": "MistralForCausalLM", "qwen2_tiny": "Qwen2ForCausalLM",
           "llama_bf16_sharded_tiny": "LlamaForCausalLM"}


def check(tfm, name, tmp):
    out = os.path.join(tmp, name)
    subprocess.run([tfm, "export", "--model", os.path.join(FIXTURES, name), "--hf", out], check=True)
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    assert type(model).__name__ == CLASSES[name], type(model).__name__
    ref, _ = load(os.path.join(FIXTURES, name, "reference.safetensors"))
    worst = 0.0
    for p in ("p0", "p1"):
        ids = torch.tensor(ref[p + ".input_ids"], dtype=torch.long).reshape(1, -1)
        with torch.no_grad():
            logits = model(ids).logits
        worst = max(worst, (logits - torch.tensor(ref[p + ".logits"]).reshape(logits.shape)).abs().max().item())
        greedy = model.generate(ids, max_new_tokens=10, do_sample=False)
        expected = torch.tensor(ref[p + ".greedy_ids"], dtype=torch.long).reshape(-1)
        assert torch.equal(greedy[0], expected), (name, p, greedy[0].tolist(), expected.tolist())
    assert worst < 1e-4, (name, worst)
    print(f"{name}: {type(model).__name__}, largest logit difference {worst:.2e}, greedy ids equal")


def check_lora(tfm, model_dir, adapter, tmp):
    merged_dir = os.path.join(tmp, "merged")
    subprocess.run([tfm, "export", "--model", model_dir, "--lora", adapter, "--hf", merged_dir], check=True)
    merged = AutoModelForCausalLM.from_pretrained(merged_dir).eval()
    base = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    with open(os.path.join(adapter, "adapter_config.json")) as f:
        config = json.load(f)
    scaling = config["lora_alpha"] / config["r"]
    tensors, _ = load(os.path.join(adapter, "adapter_model.safetensors"))
    modules = dict(base.named_modules())
    with torch.no_grad():
        for name, a in tensors.items():
            if not name.endswith(".lora_A.weight"):
                continue
            module = name[len("base_model.model."):-len(".lora_A.weight")]
            b = torch.tensor(tensors[name.replace("lora_A", "lora_B")])
            modules[module].weight += scaling * (b @ torch.tensor(a))
        ids = torch.arange(1, min(base.config.vocab_size, 40)).reshape(1, -1) % base.config.vocab_size
        worst = (merged(ids).logits - base(ids).logits).abs().max().item()
    assert worst < 1e-5, worst
    print(f"{model_dir} with {adapter} merged: largest logit difference from PEFT's merge {worst:.2e}")


def main():
    tfm = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        for name in CLASSES:
            check(tfm, name, tmp)
        if len(sys.argv) > 4:
            check_lora(tfm, sys.argv[3], sys.argv[4], tmp)


if __name__ == "__main__":
    main()
