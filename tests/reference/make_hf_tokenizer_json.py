#!/usr/bin/python3
"""Writes tokenizer.json fixtures (the one file of Hugging Face's `tokenizers` library) with the ids
transformers' tokenizers give for varied texts.

Run with Debian's interpreter inside the offline transformers 4.39 environment that
../shared/tools/hf-reference/setup.sh builds (its README says how):
    /usr/bin/python3 tests/reference/make_hf_tokenizer_json.py HFENV
HFENV: the DEST given to setup.sh. Outputs go to tests/fixtures/hf/<name>/ (committed).

That environment has no compiled `tokenizers`, so transformers runs its Python ("slow") tokenizers
(BertTokenizer, GPT2Tokenizer, RobertaTokenizer), which give the fast ones' ids on ordinary text. Each
fixture's tokenizer is therefore made as the older files (vocab.txt; vocab.json and merges.txt; with
tokenizer_config.json), saved and reloaded with from_pretrained; its references are the reloaded slow
tokenizer's; and its tokenizer.json is written here in the layout `tokenizers` saves (as transformers'
convert_slow_tokenizer builds it for BertTokenizerFast, GPT2TokenizerFast, RobertaTokenizerFast, and as
BertWordPieceTokenizer trains one). The older files are not kept: the fixtures hold only what a
directory saved with legacy_format=False holds. The vocabularies are the shared fixtures' (so that the
models of ../shared/fixtures/hf run with these tokenizers), grown where a case needs more tokens.

- bert_json_uncased: bert_tiny_uncased's vocabulary; BertNormalizer (lowercase, strip_accents null),
  BertPreTokenizer, TemplateProcessing [CLS] $A [SEP], WordPiece decoder; tokenizer_config.json as
  BertTokenizerFast saves it.
- bert_json_cased: a cased vocabulary (accented words, CJK characters, an emoji); do_lower_case false; added
  tokens: a special one (additional_special_tokens), a non-special one, one with lstrip and rstrip, one
  single_word.
- bert_json_trained: as BertWordPieceTokenizer trains one (no tokenizer_config.json): normalizer
  Sequence [NFD, Lowercase, StripAccents], pre_tokenizer Sequence [WhitespaceSplit, BertPreTokenizer],
  BertProcessing, no Chinese-character splitting.
- gpt2_json: gpt2_tiny's vocabulary and merges ("a b" strings, as tokenizers up to 0.19 saves them);
  ByteLevel pre-tokenizer, post-processor and decoder; tokenizer.json alone.
- roberta_json_added: byte-level BPE as RoBERTa's (<s> $A </s> by RobertaProcessing, <mask> with lstrip),
  merges as ["a", "b"] pairs (tokenizers 0.20 on), added tokens beyond the vocabulary (special and not,
  rstrip, single_word).
"""
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "hf")
SHARED = os.path.join(HERE, "..", "..", "..", "shared", "fixtures", "hf")

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HFENV", "/work/hfenv"))
import hfenv  # noqa: E402,F401

from transformers import AddedToken, BertTokenizer, GPT2Tokenizer, RobertaTokenizer  # noqa: E402

# Texts for every fixture: accents, CJK characters, punctuation, runs of whitespace, emoji, numbers.
TEXTS = [
    "A man is walking his dog in the park.",
    "Two young girls, playing; a boy's ball!",
    "  many   spaces\tand\ttabs \n new lines  ",
    "Café naïve résumé Über São Paulo",
    "中文 in 你好 text",
    "emoji 😀 here 👍🏽 too",
    "dogs123 4,5 9.0 $30 #tag @who",
    "don't won't it's I'm we've they're",
    "",
    "x" * 120 + " long word",
]


def added(id_, content, special, normalized=None, lstrip=False, rstrip=False, single_word=False):
    """An entry of tokenizer.json's added_tokens, with its keys in the order tokenizers writes them."""
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": (not special) if normalized is None else normalized, "special": special}


def added_from(tok):
    """The slow tokenizer's added tokens (added_tokens_decoder) as tokenizer.json lists them."""
    return [added(i, t.content, t.special, t.normalized, t.lstrip, t.rstrip, t.single_word)
            for i, t in sorted(tok.added_tokens_decoder.items())]


def template(cls, sep, ids):
    """TemplateProcessing as convert_slow_tokenizer writes BERT's: [CLS] $A [SEP] (and the pair form)."""
    special = lambda t, type_id: {"SpecialToken": {"id": t, "type_id": type_id}}  # noqa: E731
    seq = lambda s, type_id: {"Sequence": {"id": s, "type_id": type_id}}  # noqa: E731
    return {"type": "TemplateProcessing",
            "single": [special(cls, 0), seq("A", 0), special(sep, 0)],
            "pair": [special(cls, 0), seq("A", 0), special(sep, 0), seq("B", 1), special(sep, 1)],
            "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]} for t in (cls, sep)}}


def document(added_tokens, normalizer, pre_tokenizer, post_processor, decoder, model):
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens, "normalizer": normalizer,
            "pre_tokenizer": pre_tokenizer, "post_processor": post_processor, "decoder": decoder, "model": model}


def wordpiece_model(tok):
    return {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
            "vocab": dict(sorted(tok.vocab.items(), key=lambda kv: kv[1]))}


def byte_level(add_prefix_space, trim_offsets=True):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": trim_offsets, "use_regex": True}


def bpe_model(tok, pair_form):
    """BPE as tokenizers saves it: up to 0.19 "a b" merges and "" for the unused affixes; from 0.20 pairs,
    null affixes and ignore_merges."""
    ranks = sorted(tok.bpe_ranks.items(), key=lambda kv: kv[1])
    model = {"type": "BPE", "dropout": None, "unk_token": None,
             "continuing_subword_prefix": None if pair_form else "", "end_of_word_suffix": None if pair_form else "",
             "fuse_unk": False, "byte_fallback": False}
    if pair_form:
        model["ignore_merges"] = False
    model["vocab"] = dict(sorted(tok.encoder.items(), key=lambda kv: kv[1]))
    model["merges"] = [list(pair) if pair_form else " ".join(pair) for pair, _ in ranks]
    return model


def saved_config(tok, directory, drop=()):
    """tokenizer_config.json as the fast class saves it (the slow one's, less the keys only it has)."""
    with open(os.path.join(directory, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    for key in drop:
        config.pop(key, None)
    return config


def write(name, tokenizer_json, config, tok, texts):
    directory = os.path.join(OUT, name)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    with open(os.path.join(directory, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_json, f, ensure_ascii=False, indent=2)
        f.write("\n")
    if config is not None:
        with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f, ensure_ascii=False, indent=2, sort_keys=True)
            f.write("\n")
    cases = []
    for text in texts:
        ids = tok(text).input_ids
        cases.append({"text": text, "ids": ids, "tokens": tok.convert_ids_to_tokens(ids), "decoded": tok.decode(ids)})
    reference = {"tokenizer": type(tok).__name__, "size": len(tok), "cases": cases}
    with open(os.path.join(directory, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(reference, f, ensure_ascii=False, indent=1)
        f.write("\n")


def reloaded(tok, tokenizer_class, scratch):
    tok.save_pretrained(scratch)
    return tokenizer_class.from_pretrained(scratch)


def bert_json(tok, normalizer):
    ids = tok.vocab
    return document(added_from(tok), normalizer, {"type": "BertPreTokenizer"}, template("[CLS]", "[SEP]", ids),
                    {"type": "WordPiece", "prefix": "##", "cleanup": True}, wordpiece_model(tok))


def bert_normalizer(lowercase, strip_accents=None, chinese=True):
    return {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": chinese, "strip_accents": strip_accents,
            "lowercase": lowercase}


def make_bert_uncased(scratch):
    tok = reloaded(BertTokenizer.from_pretrained(os.path.join(SHARED, "bert_tiny_uncased")), BertTokenizer, scratch)
    config = saved_config(tok, scratch, drop=("do_basic_tokenize", "never_split"))
    write("bert_json_uncased", bert_json(tok, bert_normalizer(True)), config, tok, TEXTS + ["Hello [MASK] world [SEP] again"])


def cased_vocabulary():
    """bert_tiny_uncased's tokens, their capitalised forms, and accented, CJK and emoji tokens."""
    with open(os.path.join(SHARED, "bert_tiny_uncased", "vocab.txt"), encoding="utf-8") as f:
        base = f.read().split("\n")[:-1]
    extra = [w.capitalize() for w in base if w.isalpha() and w.islower()] + [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"]
    extra += ["Café", "caf", "##é", "##ï", "##ü", "##ã", "na", "##ve", "résumé", "Über", "São", "Paulo", "中", "文", "你", "好",
              "😀", "👍", "##🏽", "don", "won", "t", "I", "we", "they", "re", "ve", "$", "#", "@", "tag", "who", "tfm", "##xt"]
    vocab = []
    for token in base + extra:
        if token not in vocab:
            vocab.append(token)
    return vocab


def make_bert_cased(scratch):
    vocab_file = os.path.join(scratch, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
        f.write("\n".join(cased_vocabulary()) + "\n")
    tok = BertTokenizer(vocab_file, do_lower_case=False, model_max_length=64)
    tok.add_special_tokens({"additional_special_tokens": [AddedToken("[NEW]", special=True, normalized=False)]})
    tok.add_tokens([AddedToken("Tfm-Token", normalized=False), AddedToken("<wide>", lstrip=True, rstrip=True),
                    AddedToken("xx", single_word=True)])
    tok = reloaded(tok, BertTokenizer, os.path.join(scratch, "saved"))
    config = saved_config(tok, os.path.join(scratch, "saved"), drop=("do_basic_tokenize", "never_split"))
    texts = TEXTS + ["A [NEW] sign, a Tfm-Token and Tfm-Tokens", "left   <wide>   right<wide>end", "xx marks xx. but notxx or xxnot",
                     "[CLS] inside [SEP] text"]
    write("bert_json_cased", bert_json(tok, bert_normalizer(False)), config, tok, texts)


def make_bert_trained(scratch):
    tok = BertTokenizer(os.path.join(SHARED, "bert_tiny_uncased", "vocab.txt"), do_lower_case=True, strip_accents=True,
                        tokenize_chinese_chars=False)
    tok = reloaded(tok, BertTokenizer, scratch)
    steps = lambda *types: [{"type": t} for t in types]  # noqa: E731
    tokenizer_json = document(added_from(tok), {"type": "Sequence", "normalizers": steps("NFD", "Lowercase", "StripAccents")},
                              {"type": "Sequence", "pretokenizers": steps("WhitespaceSplit", "BertPreTokenizer")},
                              {"type": "BertProcessing", "sep": ["[SEP]", tok.vocab["[SEP]"]], "cls": ["[CLS]", tok.vocab["[CLS]"]]},
                              {"type": "WordPiece", "prefix": "##", "cleanup": True}, wordpiece_model(tok))
    # No control characters: BertTokenizer drops them always, a Sequence without BertNormalizer keeps them.
    write("bert_json_trained", tokenizer_json, None, tok, [t for t in TEXTS if "\t" not in t and "\n" not in t])


def make_gpt2(scratch):
    tok = reloaded(GPT2Tokenizer.from_pretrained(os.path.join(SHARED, "gpt2_tiny")), GPT2Tokenizer, scratch)
    tokenizer_json = document(added_from(tok), None, byte_level(False), byte_level(True, trim_offsets=False), byte_level(True),
                              bpe_model(tok, pair_form=False))
    write("gpt2_json", tokenizer_json, None, tok, TEXTS + ["end<|endoftext|>start <|endoftext|> again"])


def roberta_files(scratch):
    """RoBERTa's layout of gpt2_tiny's tokenizer: <s> <pad> </s> <unk> first, <mask> last."""
    with open(os.path.join(SHARED, "gpt2_tiny", "vocab.json"), encoding="utf-8") as f:
        gpt2 = json.load(f)
    tokens = ["<s>", "<pad>", "</s>", "<unk>"] + [t for t, _ in sorted(gpt2.items(), key=lambda kv: kv[1]) if t != "<|endoftext|>"]
    vocab = {t: i for i, t in enumerate(tokens + ["<mask>"])}
    with open(os.path.join(scratch, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    shutil.copy(os.path.join(SHARED, "gpt2_tiny", "merges.txt"), os.path.join(scratch, "merges.txt"))
    return os.path.join(scratch, "vocab.json"), os.path.join(scratch, "merges.txt")


def make_roberta(scratch):
    tok = RobertaTokenizer(*roberta_files(scratch), model_max_length=64)
    tok.add_special_tokens({"additional_special_tokens": [AddedToken("<ctl>", special=True, normalized=False)]})
    tok.add_tokens([AddedToken("tfm", normalized=True), AddedToken("<gap>", rstrip=True), AddedToken("yy", single_word=True)])
    tok = reloaded(tok, RobertaTokenizer, os.path.join(scratch, "saved"))
    config = saved_config(tok, os.path.join(scratch, "saved"))
    ids = tok.get_vocab()
    tokenizer_json = document(added_from(tok), None, byte_level(False),
                              {"type": "RobertaProcessing", "sep": ["</s>", ids["</s>"]], "cls": ["<s>", ids["<s>"]],
                               "trim_offsets": True, "add_prefix_space": False},
                              byte_level(True), bpe_model(tok, pair_form=True))
    texts = TEXTS + ["The <mask> sat down.", "a<ctl>b <ctl> c", "use tfm and tfms", "<gap>   after the gap", "yy ok yy. notyy"]
    write("roberta_json_added", tokenizer_json, config, tok, texts)


def main():
    for make in (make_bert_uncased, make_bert_cased, make_bert_trained, make_gpt2, make_roberta):
        with tempfile.TemporaryDirectory() as scratch:
            make(scratch)


if __name__ == "__main__":
    main()
