#!/usr/bin/python3
"""Writes tiny Hugging Face directories of the Llama family (model_type llama, mistral, qwen2), with the
logits and greedy generations transformers' own code computes from them.

Run with Debian's interpreter inside the offline transformers 4.39 environment that
../shared/tools/hf-reference/setup.sh builds (its README says how):
    /usr/bin/python3 tests/reference/make_hf_llama_fixtures.py HFENV
HFENV: the DEST given to setup.sh (default /work/hfenv). Outputs go to tests/fixtures/hf/<name>/ (committed, so
CI needs no torch): config.json, generation_config.json and the weights save_pretrained writes (no tokenizer:
the models are run from token ids), reference.json and reference.safetensors (p<i>.input_ids, p<i>.logits of
every position, p<i>.greedy_ids: the prompt and up to 10 new tokens of model.generate(do_sample=False)). Each
model is saved, reloaded with from_pretrained in float32, and the references are computed by the reloaded
model on the CPU. All are 2 layers of width 32 with 4 query heads of 8 over 2 key/value heads (1 in one) and a
vocabulary of 256, seeded:

- llama_tiny: Llama with an untied head and linear rope_scaling (factor 2), rope_theta 500; float32, one file.
- llama_bf16_sharded_tiny: Llama in bfloat16 in three shards and model.safetensors.index.json (the references
  from its bfloat16 weights widened to float32), multi-query attention (1 key/value head), attention_bias (the
  query, key, value and output projections' biases), the head tied to the embedding.
- mistral_tiny: Mistral with a sliding window of 48 (the context tfm gives it) and rope_theta 10000.
- qwen2_tiny: Qwen2: biases on the query, key and value projections only, the head tied to the embedding.
"""
import json
import os
import sys

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HFENV", "/work/hfenv"))
import hfenv  # noqa: E402,F401

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,  # noqa: E402
                          Qwen2ForCausalLM)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "hf")
PROMPTS = [[1, 17, 200, 45, 3, 99, 128], [1, 250, 7, 7, 64]]
SIZES = dict(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=128, initializer_range=0.2, rms_norm_eps=1e-6,
             bos_token_id=1, eos_token_id=2)


def seeded(model_class, config):
    """The model with HF's own init (config's std, a wide one so that greedy search does not repeat one token),
    every norm's gain moved off 1 and every bias off 0."""
    torch.manual_seed(0)
    model = model_class(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.3)
    return model.eval()


def save_and_reload(model, directory, model_class, **save):
    model.save_pretrained(directory, safe_serialization=True, **save)
    reloaded = model_class.from_pretrained(directory, torch_dtype=torch.float32).eval()
    before, after = model.state_dict(), reloaded.state_dict()
    for name, t in before.items():
        assert torch.equal(t.float(), after[name]), name
    return reloaded


def make(name, model_class, config, dtype=torch.float32, **save):
    directory = os.path.join(OUT, name)
    os.makedirs(directory, exist_ok=True)
    for f in os.listdir(directory):
        os.remove(os.path.join(directory, f))
    model = seeded(model_class, config).to(dtype)
    model = save_and_reload(model, directory, model_class, **save)
    tensors, cases = {}, []
    for i, prompt in enumerate(PROMPTS):
        ids = torch.tensor([prompt])
        with torch.no_grad():
            logits = model(ids).logits
            greedy = model.generate(ids, max_new_tokens=10, do_sample=False, num_beams=1, pad_token_id=config.eos_token_id)
        p = f"p{i}"
        tensors.update({p + ".input_ids": ids, p + ".logits": logits, p + ".greedy_ids": greedy})
        cases.append({"input_ids": prompt, "greedy_new_ids": greedy[0, len(prompt):].tolist()})
        print(f"{name} {p}: {prompt} -> {cases[-1]['greedy_new_ids']}")
    summary = {"fixture": name, "generated_by": {"transformers": __import__("transformers").__version__, "torch": torch.__version__,
                                                 "script": "tests/reference/make_hf_llama_fixtures.py"},
               "model_class": model_class.__name__, "eos_token_id": config.eos_token_id,
               "generation": "model.generate(input_ids, max_new_tokens=10, do_sample=False)", "cases": cases}
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(directory, "reference.safetensors"))
    with open(os.path.join(directory, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    print(name, sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory)), "bytes")


def main():
    make("llama_tiny", LlamaForCausalLM,
         LlamaConfig(**SIZES, rope_theta=500.0, rope_scaling={"type": "linear", "factor": 2.0}, tie_word_embeddings=False))
    make("llama_bf16_sharded_tiny", LlamaForCausalLM,
         LlamaConfig(**dict(SIZES, num_key_value_heads=1), attention_bias=True, tie_word_embeddings=True),
         dtype=torch.bfloat16, max_shard_size="20KB")
    make("mistral_tiny", MistralForCausalLM, MistralConfig(**SIZES, sliding_window=48, rope_theta=10000.0))
    make("qwen2_tiny", Qwen2ForCausalLM, Qwen2Config(**SIZES, tie_word_embeddings=True))


if __name__ == "__main__":
    main()
