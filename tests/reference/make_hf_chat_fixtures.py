#!/usr/bin/python3
"""Writes qwen2_chat_tiny: a tiny Qwen2 chat model with the tokenizer of tests/fixtures/hf/qwen2_json (its
tokenizer.json, and the tokenizer_config.json holding Qwen2's ChatML template), and what transformers' own code
makes of it: conversations through apply_chat_template, plain texts through the tokenizer, each continued by
greedy search, new ids and decoded text. Beside it, two fixtures of the same weights:
- qwen25_tools_tiny: the model with Qwen2.5-Instruct's chat template (chat_templates/Qwen2.5-7B-Instruct.jinja),
  and a conversation with tools (also in tools.json), an assistant's tool calls and the tools' answers, through
  apply_chat_template(messages, tools=TOOLS, add_generation_prompt=True), continued greedily. The calls' arguments
  are dicts, as tfm gives the template the JSON object of OpenAI's "arguments" text. transformers 4.39 renders
  with jinja2's HTML-safe tojson; its later versions (4.43 on) with a tojson of their own, which
  make_chat_templates.py reproduces: the tokenizer renders with that environment.
- qwen25_tool_caller_tiny: a model made to call a tool, since a random one writes no call: Qwen2.5's template, and
  the tokenizer with three added tokens (as Qwen2.5's has <tool_call> and </tool_call>): <tool_call>, the call's
  JSON between line breaks, </tool_call>. The layers' output projections are zero (each position's state is its
  token's embedding), and the untied head maps the last token of the generation prompt to <tool_call>, it to the
  JSON, the JSON to </tool_call> and that to <|im_end|>: greedy generation calls get_current_weather with
  {"location": "Paris"} whatever the conversation, as transformers' generate() shows.
- qwen2_chat_tiny_lora: a LoRA adapter of qwen2_chat_tiny in PEFT's layout (adapter_config.json,
  adapter_model.safetensors; rank 2, lora_alpha 4, every projection) and what the merged model
  (W + B A alpha / r, PEFT's merge) generates greedily from the first conversation and the first text.

Run with Debian's interpreter inside the offline transformers 4.39 environment that
../shared/tools/hf-reference/setup.sh builds (its README says how), after make_hf_bpe_tokenizers.py:
    /usr/bin/python3 tests/reference/make_hf_chat_fixtures.py HFENV
HFENV: the DEST given to setup.sh (default /work/hfenv). Output: tests/fixtures/hf/qwen2_chat_tiny/, qwen25_tools_tiny/ and qwen2_chat_tiny_lora/ (committed).

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
from make_chat_templates import TIME, WEATHER, environment  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
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
TOOLS_NAME, CALLER_NAME, LORA_NAME = "qwen25_tools_tiny", "qwen25_tool_caller_tiny", "qwen2_chat_tiny_lora"
CALL_TOKENS = ["<tool_call>", '\n{"name": "get_current_weather", "arguments": {"location": "Paris"}}\n', "</tool_call>"]
TOOLS = [WEATHER, TIME]
TOOL_CONVERSATION = [
    {"role": "system", "content": "You help with the weather."},
    {"role": "user", "content": "How warm is it in Paris, and what time is it?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call0abcd", "type": "function", "function": {"name": "get_current_weather", "arguments": {"location": "Paris"}}},
        {"id": "call1efgh", "type": "function", "function": {"name": "get_time", "arguments": {}}}]},
    {"role": "tool", "tool_call_id": "call0abcd", "name": "get_current_weather", "content": "21"},
    {"role": "tool", "tool_call_id": "call1efgh", "name": "get_time", "content": "12:00"},
    {"role": "assistant", "content": "It is 21 °C at noon."},
    {"role": "user", "content": "And tomorrow?"},
]
LORA_RANK, LORA_ALPHA = 2, 4.0
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
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
    summary = {"fixture": NAME, "generated_by": generated_by(),
               "ends": ends, "max_new_tokens": NEW_TOKENS,
               "generation": "model.generate(apply_chat_template(messages, add_generation_prompt=True) or tok(text).input_ids, "
                             "do_sample=False)", "cases": out}
    write_reference(directory, summary)
    with tempfile.TemporaryDirectory() as scratch:
        make_tools_fixture(slow_tokenizer(scratch), directory, ends)
    with tempfile.TemporaryDirectory() as scratch:
        make_caller_fixture(slow_tokenizer(scratch), directory, [im_end, endoftext])
    make_lora_fixture(tok, directory, cases, ends)


def write_reference(directory, summary):
    with open(os.path.join(directory, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, ensure_ascii=False, indent=1)
        f.write("\n")


def generated_by():
    return {"transformers": __import__("transformers").__version__, "torch": torch.__version__,
            "script": "tests/reference/make_hf_chat_fixtures.py"}


def make_tools_fixture(tok, model_directory, ends):
    """qwen25_tools_tiny: the chat model's files with Qwen2.5's template, and a conversation with tools."""
    directory = os.path.join(OUT, TOOLS_NAME)
    shutil.rmtree(directory, ignore_errors=True)
    shutil.copytree(model_directory, directory, ignore=shutil.ignore_patterns("reference.json", "tokenizer_config.json"))
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config["max_position_embeddings"] = 2048  # the tools' text is long; rotary positions need no table to grow
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(HERE, "chat_templates", "Qwen2.5-7B-Instruct.jinja"), encoding="utf-8", newline="") as f:
        template = f.read()
    with open(os.path.join(SOURCE, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config["chat_template"] = template
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)
        f.write("\n")
    with open(os.path.join(directory, "tools.json"), "w", encoding="utf-8") as f:  # (for tfm chat --tools)
        json.dump(TOOLS, f, ensure_ascii=False, indent=1)
        f.write("\n")
    tok.chat_template = template
    tok._compile_jinja_template = lambda source: environment().from_string(source)  # transformers' later tojson (above)
    ids = tok.apply_chat_template(TOOL_CONVERSATION, tools=TOOLS, add_generation_prompt=True)
    model = Qwen2ForCausalLM.from_pretrained(directory, torch_dtype=torch.float32).eval()
    new = continue_greedily(model, ids, ends)
    print("tools ->", len(ids), "ids,", new)
    write_reference(directory, {
        "fixture": TOOLS_NAME, "generated_by": generated_by(), "ends": ends, "max_new_tokens": NEW_TOKENS,
        "generation": "model.generate(apply_chat_template(messages, tools=tools, add_generation_prompt=True), do_sample=False)",
        "tools": TOOLS, "messages": TOOL_CONVERSATION,
        "text": tok.apply_chat_template(TOOL_CONVERSATION, tools=TOOLS, add_generation_prompt=True, tokenize=False),
        "input_ids": ids, "greedy_new_ids": new, "new_text": tok.decode(new, skip_special_tokens=True)})


def make_caller_fixture(tok, model_directory, ends):
    """qwen25_tool_caller_tiny: qwen25_tools_tiny's files, three added tokens, and weights that call a tool."""
    directory = os.path.join(OUT, CALLER_NAME)
    shutil.rmtree(directory, ignore_errors=True)
    shutil.copytree(os.path.join(OUT, TOOLS_NAME), directory, ignore=shutil.ignore_patterns("reference.json", "model.safetensors"))
    first = len(tok)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in CALL_TOKENS])
    call_ids = [first + i for i in range(len(CALL_TOKENS))]
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": False}
             for i, t in zip(call_ids, CALL_TOKENS)]
    for name, update in [("tokenizer.json", lambda j: j["added_tokens"].extend(added)),
                         ("tokenizer_config.json", lambda j: j["added_tokens_decoder"].update(
                             {str(a["id"]): {k: v for k, v in a.items() if k != "id"} for a in added}))]:
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            content = json.load(f)
        update(content)
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            json.dump(content, f, ensure_ascii=False, indent=2)
            f.write("\n")
    with open(os.path.join(directory, "tokenizer_config.json"), encoding="utf-8") as f:
        tok.chat_template = json.load(f)["chat_template"]
    tok._compile_jinja_template = lambda source: environment().from_string(source)
    ids = tok.apply_chat_template(TOOL_CONVERSATION[:2], tools=TOOLS, add_generation_prompt=True)
    config = Qwen2ForCausalLM.from_pretrained(model_directory).config
    config.vocab_size, config.tie_word_embeddings, config.max_position_embeddings = len(tok), False, 2048
    model = seeded(config)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.norm.weight.fill_(1)
        model.lm_head.weight.zero_()
        chain = [ids[-1]] + call_ids + [ends[0]]  # each token's successor: the next in the chain
        for k, (token, successor) in enumerate(zip(chain, chain[1:])):
            model.model.embed_tokens.weight[token] = torch.nn.functional.one_hot(torch.tensor(k), config.hidden_size).float()
            model.lm_head.weight[successor, k] = 10
    model.save_pretrained(directory, safe_serialization=True)
    reloaded = Qwen2ForCausalLM.from_pretrained(directory, torch_dtype=torch.float32).eval()
    new = continue_greedily(reloaded, ids, ends)
    text = tok.decode(new, skip_special_tokens=True, spaces_between_special_tokens=False)  # (as the fast tokenizer joins them)
    print("caller ->", new, repr(text))
    assert new == call_ids + [ends[0]]
    write_reference(directory, {
        "fixture": CALLER_NAME, "generated_by": generated_by(), "ends": ends,
        "generation": "model.generate(apply_chat_template(messages, tools=tools, add_generation_prompt=True), do_sample=False)",
        "tools": TOOLS, "messages": TOOL_CONVERSATION[:2], "input_ids": ids, "greedy_new_ids": new, "new_text": text,
        "tool_calls": [{"name": "get_current_weather", "arguments": {"location": "Paris"}}]})


def make_lora_fixture(tok, model_directory, cases, ends):
    """qwen2_chat_tiny_lora: an adapter of every projection, and the merged model's greedy continuations."""
    directory = os.path.join(OUT, LORA_NAME)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    model = Qwen2ForCausalLM.from_pretrained(model_directory, torch_dtype=torch.float32).eval()
    torch.manual_seed(2)
    tensors = {}
    with torch.no_grad():
        for name, module in model.named_modules():
            if name.split(".")[-1] not in LORA_TARGETS:
                continue
            a = torch.randn(LORA_RANK, module.in_features) * 0.5
            b = torch.randn(module.out_features, LORA_RANK) * 0.5  # (PEFT starts B at 0: a trained adapter's is not)
            tensors[f"base_model.model.{name}.lora_A.weight"] = a.contiguous()
            tensors[f"base_model.model.{name}.lora_B.weight"] = b.contiguous()
            module.weight.add_(b @ a * (LORA_ALPHA / LORA_RANK))
    save_file(tensors, os.path.join(directory, "adapter_model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(directory, "adapter_config.json"), "w", encoding="utf-8") as f:
        json.dump({"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": LORA_RANK, "lora_alpha": LORA_ALPHA, "lora_dropout": 0.0,
                   "target_modules": LORA_TARGETS, "bias": "none", "fan_in_fan_out": False, "inference_mode": True,
                   "base_model_name_or_path": None}, f, indent=2)
        f.write("\n")
    out = []
    for kind, prompt, ids in (cases[0], cases[2]):
        new = continue_greedily(model, ids, ends)
        out.append({kind: prompt, "input_ids": ids, "greedy_new_ids": new, "new_text": tok.decode(new, skip_special_tokens=True)})
        print("lora", kind, "->", new, repr(out[-1]["new_text"]))
    write_reference(directory, {"fixture": LORA_NAME, "base": "qwen2_chat_tiny", "generated_by": generated_by(), "ends": ends,
                                "max_new_tokens": NEW_TOKENS, "generation": "the merged model's generate(ids, do_sample=False)",
                                "cases": out})


if __name__ == "__main__":
    main()
