#!/usr/bin/python3
"""Writes tokenizer.json fixtures of today's BPE tokenizers (Llama 2 and Mistral's SentencePiece-style BPE with
byte fallback, Llama 3's and Qwen2's byte-level BPE cut by their patterns) with the ids transformers' tokenizers
give for varied texts.

Run with Debian's interpreter inside the offline transformers 4.39 environment that
../shared/tools/hf-reference/setup.sh builds (its README says how):
    /usr/bin/python3 tests/reference/make_hf_bpe_tokenizers.py HFENV
HFENV: the DEST given to setup.sh. Outputs go to tests/fixtures/hf/<name>/ (committed).

That environment has no compiled `tokenizers`, so the references come from transformers' Python ("slow")
tokenizers and from the published definitions, and each tokenizer.json is written here in the layout `tokenizers`
saves (as transformers' convert_slow_tokenizer builds it):

- llama2_json: a SentencePiece BPE model trained here as Llama 2's was (byte_fallback, split_digits, identity
  normalization, no removal of extra whitespace), converted as LlamaConverter does (its vocabulary, and the merges
  of SentencePieceExtractor, ordered by score): normalizer Sequence[Prepend("▁"), Replace(" ", "▁")], decoder
  Sequence[Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0)], TemplateProcessing "<s> $A", fuse_unk and
  byte_fallback. Ids: transformers' LlamaTokenizer (SentencePiece itself).
- mistral_json: the same model in the other form `tokenizers` saves SentencePiece-style BPE in (Mistral's later
  repositories, LlamaConverter with legacy false): no normalizer, a Metaspace pre-tokenizer (prepend_scheme
  "first", split false), the same decoder, "[INST]" and "[/INST]" as added special tokens. Ids: LlamaTokenizer on
  the texts where the two forms agree (no added token inside, no leading space).
- llama3_json: byte-level BPE (vocabulary and merges trained here on the same texts) with Llama 3's
  pre-tokenizer (Sequence[Split(its pattern, Isolated), ByteLevel(use_regex false)]), ignore_merges, and
  "<|begin_of_text|> $A"; added special tokens beyond the vocabulary. Ids: GPT2Tokenizer's byte-level BPE with
  Llama 3's pattern through the `regex` module and ignore_merges (a word of the vocabulary is one token), as the
  issue proposes; transformers 4.39 has no Llama 3 tokenizer.
- qwen2_json: the same vocabulary as Qwen2's tokenizer: NFC, Qwen2's pattern (single digits), ByteLevel
  post-processor, <|endoftext|>, <|im_start|>, <|im_end|>. Ids: transformers' Qwen2Tokenizer.

Decoded texts: the slow tokenizers' for byte-level BPE (spaces_between_special_tokens false, as the fast ones
join); for SentencePiece-style BPE, the decoder chain of `tokenizers` transcribed below (decode_chain), checked
against LlamaTokenizer's decode (special tokens skipped) where they agree: SentencePiece drops all the whitespace
a text starts with, the fast tokenizer one space. The byte-level fixtures also hold each pattern's words of more
texts (regex.findall, after NFC for Qwen2).

Chat templates: each fixture's tokenizer_config.json holds the chat_template its model family ships, and
reference.json's chat_cases what transformers' apply_chat_template gave (or the message it raised) for a few
conversations (make_chat_templates.py writes the templates of today's checkpoints and the smaller templates of
jinja_cases.json).
"""
import collections
import json
import os
import shutil
import sys
import tempfile
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "hf")

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HFENV", "/work/hfenv"))
import hfenv  # noqa: E402,F401

import regex  # noqa: E402
import sentencepiece as spm  # noqa: E402
from transformers import AddedToken, GPT2Tokenizer, LlamaTokenizer, Qwen2Tokenizer  # noqa: E402
from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode  # noqa: E402

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")

# What the vocabularies are trained on: English prose, numbers, code, some accented words.
CORPUS = """The quick brown fox jumps over the lazy dog. A man is walking his dog in the park.
Two young girls are playing with a ball; a boy's kite flies high over the river!
She said: "I'm sure we'll be there by 10:30, won't we?" They're late again, aren't they?
In 2023 the company sold 1234567 units at $19.99 each, up 12% from 2022.
def tokenize(text):
    for word in text.split():
        yield word.lower()
    return None
Café naïve résumé über São Paulo, déjà vu, façade, Ärger, Öl, Übermut.
The weather today is sunny with a high of 25 degrees and a low of 14 degrees.
Hello world! Hello there, general. What's the matter with you? Nothing's the matter.
    Indented lines, tabs\tand\tmore tabs, and   runs   of   spaces.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 100 1000 3.14159 2,718 -42 +7 1e10.
Questions? Answers! Lists: one, two, three; and more... (parentheses) [brackets] {braces} <angles>.
I've seen it. You'd think so. He'll go. We're here. It's fine. Don't stop. I'LL SHOUT. IT'S LOUD.
"""

TEXTS = [
    "Hello world",
    "A man is walking his dog in the park.",
    " leading space",
    "  two leading spaces and trailing  ",
    "many   spaces\tand\ttabs \n new lines\n\n\nthree",
    "windows\r\nline ends\r\n",
    "Café naïve résumé Über São Paulo",
    "unseen: 中文 你好 ☃ 😀 👍🏽",
    "digits 1 12 123 1234 12345 1234567890 3.14159 $19.99 10:30",
    "don't won't it's I'm we've they'd you'll",
    "DON'T WON'T IT'S I'M WE'VE THEY'D YOU'LL",
    "'s 'S 'x ' s",
    "tabs\t\tdouble\t tab-space",
    "code:\n    for x in y:\n        print(x)\n",
    "punctuation!!! ... ??? --- (a) [b] {c} <d> \"quoted\"",
    "über-cool naïve façade",
    "",
    " ",
    "\n",
    "end with space ",
    "x" * 40,
]

SPIECE = "\u2581"

# The chat templates of the tokenizer_config.json of meta-llama/Llama-2-7b-chat-hf,
# mistralai/Mistral-7B-Instruct-v0.1, meta-llama/Meta-Llama-3-8B-Instruct and Qwen/Qwen2-7B-Instruct.
LLAMA2_CHAT = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}"
    "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")
MISTRAL_CHAT = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}"
    "{% endfor %}")
LLAMA3_CHAT = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
QWEN2_CHAT = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": " Hi "},
     {"role": "assistant", "content": " Hello there. "}, {"role": "user", "content": "What is 2+2?\n"}],
    [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"},
     {"role": "assistant", "content": "d"}],
    [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
]


def chat_cases(tok):
    """apply_chat_template(messages, tokenize=False) of each conversation, or the message it raises."""
    cases = []
    for messages in CONVERSATIONS:
        for prompt in (False, True):
            case = {"messages": messages, "add_generation_prompt": prompt}
            try:
                case["text"] = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=prompt)
            except Exception as e:  # jinja2's TemplateError from raise_exception
                case["error"] = str(e)
            cases.append(case)
    return cases


def added(id_, content, special=True, normalized=False):
    """An entry of tokenizer.json's added_tokens, with its keys in the order tokenizers writes them."""
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False, "normalized": normalized,
            "special": special}


def template(token, id_):
    """TemplateProcessing "<s> $A" (and "<s> $A <s> $B") as LlamaTokenizerFast.update_post_processor writes it."""
    special = {"SpecialToken": {"id": token, "type_id": 0}}
    return {"type": "TemplateProcessing",
            "single": [special, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [special, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": token, "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {token: {"id": token, "ids": [id_], "tokens": [token]}}}


def document(added_tokens, normalizer, pre_tokenizer, post_processor, decoder, model):
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens, "normalizer": normalizer,
            "pre_tokenizer": pre_tokenizer, "post_processor": post_processor, "decoder": decoder, "model": model}


def write(name, tokenizer_json, config, cases, size, words=None, chats=None):
    directory = os.path.join(OUT, name)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    with open(os.path.join(directory, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_json, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(directory, "reference.json"), "w", encoding="utf-8") as f:
        extra = {**({"pattern_cases": words} if words else {}), **({"chat_cases": chats} if chats else {})}
        json.dump({"size": size, "cases": cases, **extra}, f, ensure_ascii=False, indent=1)
        f.write("\n")


def config_decoder(tokens):
    """tokenizer_config.json's added_tokens_decoder for tokenizer.json's added tokens."""
    return {str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
            for t in tokens}


# ---- SentencePiece-style BPE (Llama 2, Mistral) ----

def train_sentencepiece(scratch):
    path = os.path.join(scratch, "tokenizer.model")
    with open(path, "wb") as model:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(CORPUS.split("\n")), model_writer=model, model_type="bpe", vocab_size=420,
            byte_fallback=True, split_digits=True, allow_whitespace_only_pieces=True, remove_extra_whitespaces=False,
            normalization_rule_name="identity", add_dummy_prefix=True, character_coverage=1.0, num_threads=1,
            unk_id=0, bos_id=1, eos_id=2, pad_id=-1, max_sentencepiece_length=16, hard_vocab_limit=False)
    return path


def llama_vocab_and_merges(model_path):
    """LlamaConverter.vocab and SentencePieceExtractor.extract (transformers 4.39), through the sentencepiece API
    (the converter reads the same pieces and scores from the model's protobuf)."""
    sp = spm.SentencePieceProcessor(model_file=model_path)
    vocab_scores = [("<unk>", 0.0), ("<s>", 0.0), ("</s>", 0.0)]
    vocab_scores += [(sp.id_to_piece(i), sp.get_score(i)) for i in range(3, sp.get_piece_size())]
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    merges = []
    for merge, score in dict(vocab_scores).items():
        local = [(merge[:i], merge[i:], score) for i in range(1, len(merge)) if merge[:i] in vocab and merge[i:] in vocab]
        merges.extend(sorted(local, key=lambda x: (vocab[x[0]], vocab[x[1]])))
    merges = sorted(merges, key=lambda m: m[2], reverse=True)
    return {piece: i for i, (piece, _) in enumerate(vocab_scores)}, [[a, b] for a, b, _ in merges]


def spm_model_json(vocab, merges):
    return {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None, "end_of_word_suffix": None,
            "fuse_unk": True, "byte_fallback": True, "ignore_merges": False, "vocab": vocab, "merges": merges}


def replace(pattern, content):
    return {"type": "Replace", "pattern": {"String": pattern}, "content": content}


def decode_chain(steps, tokens):
    """tokenizers' decoders (Replace, ByteFallback, Fuse, Strip), transcribed from their Rust source:
    each step maps the list of token strings to a new list; the result is their concatenation."""
    for step in steps:
        kind = step["type"]
        if kind == "Replace":
            tokens = [t.replace(step["pattern"]["String"], step["content"]) for t in tokens]
        elif kind == "ByteFallback":
            out, pending = [], []

            def flush():
                if pending:
                    try:
                        out.append(bytes(pending).decode("utf-8"))
                    except UnicodeDecodeError:
                        out.extend(["\ufffd"] * len(pending))
                    pending.clear()
            for t in tokens:
                if len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
                    pending.append(int(t[3:5], 16))
                else:
                    flush()
                    out.append(t)
            flush()
            tokens = out
        elif kind == "Fuse":
            tokens = ["".join(tokens)]
        elif kind == "Strip":
            def strip(t):
                chars = list(t)
                start = 0
                while start < min(step["start"], len(chars)) and chars[start] == step["content"]:
                    start += 1
                stop = len(chars)
                while len(chars) - stop < step["stop"] and stop > start and chars[stop - 1] == step["content"]:
                    stop -= 1
                return "".join(chars[start:stop])
            tokens = [strip(t) for t in tokens]
        else:
            raise ValueError(kind)
    return "".join(tokens)


def spm_cases(tok, texts, decoder_steps, specials):
    cases = []
    for text in texts:
        ids = tok(text).input_ids
        tokens = tok.convert_ids_to_tokens(ids)
        decoded = decode_chain(decoder_steps, tokens)
        plain = decode_chain(decoder_steps, [t for t in tokens if t not in specials])
        slow = tok.decode(ids, skip_special_tokens=True)
        # The transcription agrees with SentencePiece's own decoding, but where the text starts with whitespace:
        # SentencePiece drops all of it, the fast tokenizer's Strip one space.
        assert plain == slow or text[:1].isspace() or text.startswith(SPIECE), (text, plain, slow)
        cases.append({"text": text, "ids": ids, "tokens": tokens, "decoded": decoded, "decoded_skip_special": plain})
    return cases


def make_llama2(scratch):
    model = train_sentencepiece(scratch)
    tok = LlamaTokenizer(model, legacy=True, add_bos_token=True, add_eos_token=False, clean_up_tokenization_spaces=False)
    vocab, merges = llama_vocab_and_merges(model)
    specials = [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")]
    decoder = [replace(SPIECE, " "), {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]
    tokenizer_json = document(specials, {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": SPIECE}, replace(" ", SPIECE)]},
                              None, template("<s>", 1), {"type": "Sequence", "decoders": decoder}, spm_model_json(vocab, merges))
    config = {"add_bos_token": True, "add_eos_token": False, "added_tokens_decoder": config_decoder(specials), "bos_token": "<s>",
              "clean_up_tokenization_spaces": False, "eos_token": "</s>", "legacy": False, "model_max_length": 1000000000000000019884624838656,
              "pad_token": None, "sp_model_kwargs": {}, "tokenizer_class": "LlamaTokenizer", "unk_token": "<unk>", "use_default_system_prompt": False}
    texts = TEXTS + ["<s>Hello</s> world <s>", "a<unk>b", "text</s>", "\u2581already metaspace\u2581", "x\u2581 y"]
    tok.chat_template = config["chat_template"] = LLAMA2_CHAT
    write("llama2_json", tokenizer_json, config, spm_cases(tok, texts, decoder, {"<unk>", "<s>", "</s>"}), len(tok), chats=chat_cases(tok))
    return model


def make_mistral(scratch, model):
    tok = LlamaTokenizer(model, legacy=True, add_bos_token=True, add_eos_token=False, clean_up_tokenization_spaces=False)
    vocab, merges = llama_vocab_and_merges(model)
    # Mistral's later repositories append control tokens; here two, beyond the vocabulary.
    specials = [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>"), added(len(vocab), "[INST]"), added(len(vocab) + 1, "[/INST]")]
    tok.add_special_tokens({"additional_special_tokens": [AddedToken("[INST]", special=True, normalized=False),
                                                         AddedToken("[/INST]", special=True, normalized=False)]})
    metaspace = {"type": "Metaspace", "replacement": SPIECE, "prepend_scheme": "first", "split": False}
    decoder = [replace(SPIECE, " "), {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]
    tokenizer_json = document(specials, None, metaspace, template("<s>", 1), {"type": "Sequence", "decoders": decoder},
                              spm_model_json(vocab, merges))
    config = {"add_bos_token": True, "add_eos_token": False, "added_tokens_decoder": config_decoder(specials),
              "additional_special_tokens": ["[INST]", "[/INST]"], "bos_token": "<s>", "clean_up_tokenization_spaces": False,
              "eos_token": "</s>", "legacy": False, "pad_token": None, "tokenizer_class": "LlamaTokenizer", "unk_token": "<unk>"}
    texts = [t for t in TEXTS if t and not t[0].isspace()]
    tok.chat_template = config["chat_template"] = MISTRAL_CHAT
    write("mistral_json", tokenizer_json, config, spm_cases(tok, texts, decoder, {"<unk>", "<s>", "</s>", "[INST]", "[/INST]"}), len(tok),
          chats=chat_cases(tok))


# ---- Byte-level BPE (Llama 3, Qwen2) ----

def train_byte_level(pattern, merges_wanted=360):
    """A byte-level BPE trained on CORPUS: words cut by `pattern`, the most frequent adjacent pair merged each
    round (ties: the pair first seen), as GPT-2's merges were made."""
    symbol = bytes_to_unicode()
    words = collections.Counter("".join(symbol[b] for b in w.encode("utf-8")) for w in regex.findall(pattern, CORPUS))
    splits = {w: list(w) for w in words}
    merges = []
    for _ in range(merges_wanted):
        pairs = collections.Counter()
        for w, n in words.items():
            s = splits[w]
            for a, b in zip(s, s[1:]):
                pairs[a, b] += n
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: kv[1])
        merges.append((a, b))
        for w in words:
            s, out, i = splits[w], [], 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            splits[w] = out
    vocab = [symbol[b] for b in range(256)]
    vocab += [a + b for a, b in merges if a + b not in vocab]
    # Words of the vocabulary that no merge makes: ignore_merges (Llama 3) gives them whole.
    vocab += ["\u0120zebra", "\u0120giraffe", "quokka"]
    return {t: i for i, t in enumerate(vocab)}, merges


def write_slow_files(scratch, vocab, merges):
    with open(os.path.join(scratch, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(scratch, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    return os.path.join(scratch, "vocab.json"), os.path.join(scratch, "merges.txt")


def byte_level_model_json(vocab, merges, ignore_merges):
    return {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None, "end_of_word_suffix": None,
            "fuse_unk": False, "byte_fallback": False, "ignore_merges": ignore_merges, "vocab": vocab, "merges": [list(m) for m in merges]}


def split_and_byte_level(pattern):
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}


def byte_level_step(trim_offsets=True):
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": trim_offsets, "use_regex": False}


class Llama3Reference(GPT2Tokenizer):
    """GPT2Tokenizer's byte-level BPE with Llama 3's pattern, and ignore_merges: a word of the vocabulary is one
    token, whatever the merges (tokenizers' BPE with ignore_merges)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pat = regex.compile(LLAMA3_PATTERN)

    def bpe(self, token):
        return token if token in self.encoder else super().bpe(token)


def byte_level_cases(tok, texts):
    cases = []
    for text in texts:
        ids = tok(text).input_ids
        cases.append({"text": text, "ids": ids, "tokens": tok.convert_ids_to_tokens(ids),
                      "decoded": tok.decode(ids, spaces_between_special_tokens=False),
                      "decoded_skip_special": tok.decode(ids, skip_special_tokens=True, spaces_between_special_tokens=False)})
    return cases


BYTE_LEVEL_TEXTS = TEXTS + [
    "a zebra, a giraffe and a quokka",           # ignore_merges
    "'ſ 'S 'Ll 'rE",                              # case-insensitive contractions
    "x\u00a0y \u3000z \u2028w",                   # whitespace that is not " "
    "!!!\n\n?? \r\n\r\n",                         # punctuation followed by line breaks
    "\u0663\u0664\u0665\u0666 \u00bd\u2167",      # numbers of other scripts (Nd, No, Nl)
    "e\u0301 \u00e9 \u212b",                      # NFC (Qwen2 composes)
    "\t\n \n",                                    # whitespace ending in line breaks
]


# Texts for the patterns alone: each pattern's words (regex.findall) of each text, whatever the vocabulary.
PATTERN_TEXTS = BYTE_LEVEL_TEXTS + [
    "'sure 'Sure 'SURE '\u017fure 'llama 'LLama 'Ll 'dx 'tea 'ReVe 'vE", "x'S y'\u017f z'\u212a",
    "  \n\n  x", " \t\n\r\n z", "abc   ", "   ", "1234567 \u0661\u0662\u0663\u0664 12a34",
    "!!!\r\n\r\nfoo", " !!!\n", " !!! \n", "a\u0301b \u0301", "\u00a0\u00a0x \u00a0!", "\u2028\u2029x", "$$$ $ 12ab",
    "hello\u3000world", "x\x1c y\x1cz", "\x85x", "\r\rx\ry", "_under_score_ __x", "a\tb\t\tc", "\u00bd\u00bd\u00bd\u00bd",
    "\U0001F600abc \U0001F600 abc", "\u0915\u093e\u0930 \u0e01\u0e32", "a.b,c;d", "'", "''s", "x'", "'\n's",
]


def pattern_cases(pattern, normalize):
    return [{"text": t, "words": regex.findall(pattern, normalize(t))} for t in PATTERN_TEXTS]


def make_llama3(scratch):
    vocab, merges = train_byte_level(LLAMA3_PATTERN)
    n = len(vocab)
    names = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    specials = [added(n + i, t) for i, t in enumerate(names)]
    tok = Llama3Reference(*write_slow_files(scratch, vocab, merges), bos_token="<|begin_of_text|>", eos_token="<|end_of_text|>",
                          unk_token=None, add_bos_token=True, clean_up_tokenization_spaces=True)
    tok.add_special_tokens({"additional_special_tokens": [AddedToken(t, special=True, normalized=False) for t in names[2:]]})
    assert [tok.convert_tokens_to_ids(t) for t in names] == list(range(n, n + 5))
    post = {"type": "Sequence", "processors": [byte_level_step(trim_offsets=False), template("<|begin_of_text|>", n)]}
    tokenizer_json = document(specials, None, split_and_byte_level(LLAMA3_PATTERN), post, {"type": "ByteLevel", "add_prefix_space": True,
                              "trim_offsets": True, "use_regex": True}, byte_level_model_json(vocab, merges, ignore_merges=True))
    config = {"added_tokens_decoder": config_decoder(specials), "bos_token": "<|begin_of_text|>", "clean_up_tokenization_spaces": True,
              "eos_token": "<|end_of_text|>", "model_input_names": ["input_ids", "attention_mask"], "model_max_length": 131072,
              "tokenizer_class": "PreTrainedTokenizerFast"}
    texts = BYTE_LEVEL_TEXTS + ["<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>", "a<|begin_of_text|>b <|end_of_text|> c"]
    tok.chat_template = config["chat_template"] = LLAMA3_CHAT
    write("llama3_json", tokenizer_json, config, byte_level_cases(tok, texts), len(tok), pattern_cases(LLAMA3_PATTERN, lambda t: t),
          chat_cases(tok))


def make_qwen2(scratch):
    vocab, merges = train_byte_level(QWEN2_PATTERN)
    n = len(vocab)
    names = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    specials = [added(n + i, t) for i, t in enumerate(names)]
    tok = Qwen2Tokenizer(*write_slow_files(scratch, vocab, merges), clean_up_tokenization_spaces=False)
    tok.add_special_tokens({"additional_special_tokens": [AddedToken(t, special=True, normalized=False) for t in names[1:]]})
    assert [tok.convert_tokens_to_ids(t) for t in names] == list(range(n, n + 3))
    tokenizer_json = document(specials, {"type": "NFC"}, split_and_byte_level(QWEN2_PATTERN), byte_level_step(trim_offsets=False),
                              {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
                              byte_level_model_json(vocab, merges, ignore_merges=False))
    config = {"add_prefix_space": False, "added_tokens_decoder": config_decoder(specials), "additional_special_tokens": names[1:],
              "bos_token": None, "clean_up_tokenization_spaces": False, "eos_token": "<|endoftext|>", "errors": "replace",
              "model_max_length": 32768, "pad_token": "<|endoftext|>", "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer",
              "unk_token": None}
    texts = BYTE_LEVEL_TEXTS + ["<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n", "a<|endoftext|>b"]
    tok.chat_template = config["chat_template"] = QWEN2_CHAT
    write("qwen2_json", tokenizer_json, config, byte_level_cases(tok, texts), len(tok),
          pattern_cases(QWEN2_PATTERN, lambda t: unicodedata.normalize("NFC", t)), chat_cases(tok))


def main():
    with tempfile.TemporaryDirectory() as scratch:
        model = make_llama2(scratch)
        make_mistral(scratch, model)
    for make in (make_llama3, make_qwen2):
        with tempfile.TemporaryDirectory() as scratch:
            make(scratch)


if __name__ == "__main__":
    main()
