#!/usr/bin/python3
"""Writes qwen2_chat_tiny: a tiny Qwen2 chat model with the tokenizer of tests/fixtures/hf/qwen2_json (its
tokenizer.json, and the tokenizer_config.json holding Qwen2's ChatML template), and what transformers' own code
makes of it: conversations through apply_chat_template, plain texts through the tokenizer, each continued by
greedy search, new ids and decoded text.

Run with Debian's interpreter inside the offline transformers 4.39 environment that
../shared/tools/hf-reference/setup.sh builds (its README says how), after make_hf_bpe_tokenizers.py:
    /usr/bin/python3 tests/reference/make_hf_chat_fixtures.py HFENV
HFENV: the DEST given to setup.sh (default /work/hfenv). Output: tests/fixtures/hf/qwen2_chat_tiny/ (committed).

That environment has no compiled `tokenizers`: the tokenizer is transformers' Qwen2Tokenizer over the vocabulary
and merges of the tokenizer.json (as make_hf_bpe_tokenizers.py checked them against each other). The generation
config ends a text at <|im_end|>, at <|endoftext|>, and at one ordinary token that the first conversation's
greedy continuation reaches (so that a list of end tokens, not just the tokenizer's, is what stops it). The last
case is the first conversation with the model's reply and one more user turn, as `tfm chat` would go on.
"""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HFENV", "/work/hfenv"))
import hfenv  # noqa: E402,F401

import torch  # noqa: E402
from transformers import AddedToken, GenerationConfig, Qwen2Config, Qwen2ForCausalLM, Qwen2Tokenizer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "hf")
SOURCE = os.path.join(OUT, "qwen2_json")
NAME = "qwen2_chat_tiny"
NEW_TOKENS = 12
CONVERSATIONS = [
    [{"role": "user", "content": "Hello! Who are you?"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"},
     {"role": "assistant", "content": "4."}, {"role": "user", "content": "And 3+3?"}],
]
TEXTS = ["The quick brown fox", "A man is walking his dog in the park."]
FOLLOW_UP = "Tell me more."  # the first conversation's next turn, after the model's reply (`tfm chat`'s second turn)


def slow_tokenizer(scratch):
    """Qwen2Tokenizer over tokenizer.json's vocabulary and merges, its specials and chat template."""
    with open(os.path.join(SOURCE, "tokenizer.json"), encoding="utf-8") as f:
        model = json.load(f)["model"]
    with open(os.path.join(SOURCE, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    vocab, merges = os.path.join(scratch, "vocab.json"), os.path.join(scratch, "merges.txt")
    with open(vocab, "w", encoding="utf-8") as f:
        json.dump(model["vocab"], f, ensure_ascii=False)
    with open(merges, "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in model["merges"]))
    tok = Qwen2Tokenizer(vocab, merges, clean_up_tokenization_spaces=False)
    names = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok.add_special_tokens({"additional_special_tokens": [AddedToken(t, special=True, normalized=False) for t in names[1:]]})
    tok.chat_template = config["chat_template"]
    return tok


def seeded(config):
    torch.manual_seed(1)
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.3)
    return model.eval()


def prompts(tok):
    chats = [tok.apply_chat_template(m, add_generation_prompt=True) for m in CONVERSATIONS]
    return [("messages", m, ids) for m, ids in zip(CONVERSATIONS, chats)] + [("text", t, tok(t).input_ids) for t in TEXTS]


def continue_greedily(model, ids, ends):
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False, num_beams=1, eos_token_id=ends,
                             pad_token_id=ends[0])
    return out[0, len(ids):].tolist()


def main():
    directory = os.path.join(OUT, NAME)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    with tempfile.TemporaryDirectory() as scratch:
        tok = slow_tokenizer(scratch)
    im_end, endoftext = tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.2, tie_word_embeddings=True,
                         bos_token_id=endoftext, eos_token_id=im_end)
    model = seeded(config)
    cases = prompts(tok)
    first = continue_greedily(model, cases[0][2], [im_end, endoftext])
    ends = [im_end, endoftext, first[4]]  # the fifth new token of the first conversation ends its text
    model.generation_config = GenerationConfig(bos_token_id=endoftext, eos_token_id=ends, pad_token_id=endoftext)
    model.save_pretrained(directory, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(SOURCE, f), directory)
    reloaded = Qwen2ForCausalLM.from_pretrained(directory, torch_dtype=torch.float32).eval()
    out = []
    first_reply = tok.decode(continue_greedily(reloaded, cases[0][2], ends), skip_special_tokens=True)
    follow_up = CONVERSATIONS[0] + [{"role": "assistant", "content": first_reply}, {"role": "user", "content": FOLLOW_UP}]
    cases.append(("messages", follow_up, tok.apply_chat_template(follow_up, add_generation_prompt=True)))
    for kind, prompt, ids in cases:
        new = continue_greedily(reloaded, ids, ends)
        out.append({kind: prompt, "input_ids": ids, "greedy_new_ids": new, "new_text": tok.decode(new, skip_special_tokens=True),
                    "ended": new[-1] in ends})
        print(kind, json.dumps(prompt)[:60], "->", new, repr(out[-1]["new_text"]))
    summary = {"fixture": NAME, "generated_by": {"transformers": __import__("transformers").__version__, "torch": torch.__version__,
                                                 "script": "tests/reference/make_hf_chat_fixtures.py"},
               "ends": ends, "max_new_tokens": NEW_TOKENS,
               "generation": "model.generate(apply_chat_template(messages, add_generation_prompt=True) or tok(text).input_ids, "
                             "do_sample=False)", "cases": out}
    with open(os.path.join(directory, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
