#!/usr/bin/python3
"""Writes tiny M2M100 and NLLB directories (model_type m2m_100), with the outputs transformers' own code
computes from them: tests/fixtures/hf/m2m100_tiny and nllb_tiny.

Run with Debian's interpreter inside the offline transformers 4.39 environment that
../shared/tools/hf-reference/setup.sh builds:
    /usr/bin/python3 tests/reference/make_hf_m2m100_fixtures.py HFENV

- m2m100_tiny: M2M100Tokenizer (slow): a SentencePiece model, vocab.json (the fairseq dictionary: <s> <pad>
  </s> <unk>, then the pieces) and the 100 language tokens __xx__ after it, then 8 made-up words; the source
  is [__en__] + pieces + [</s>], the target starts from </s> with __de__ forced first.
- nllb_tiny: NllbTokenizer (slow): the SentencePiece ids shifted by one behind <s> <pad> </s> <unk>, the 202
  language codes (eng_Latn, deu_Latn, ...) after them and <mask> last; the same layout of inputs.
Each model: 2 + 2 layers, 16 wide, 4 heads, pre-norm with final layer norms, ReLU, embeddings scaled by
sqrt(d_model), fairseq's sinusoids from position pad + 1; reference.json and reference.safetensors hold the
ids, the teacher-forced logits, and greedy and beam-4 generations (forced_bos_token_id: the target language).
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_hf_fixtures import OUT, lines, perturb, save_and_reload, seeded, spm_pieces, write_reference  # noqa: E402

import sentencepiece as spm  # noqa: E402
import torch  # noqa: E402
from transformers import M2M100Config, M2M100ForConditionalGeneration, M2M100Tokenizer, NllbTokenizer  # noqa: E402
import json  # noqa: E402
import io  # noqa: E402

SOURCES = ["A man in an orange hat starring at something.", "Two dogs play in the snow.", "Ünïcode: 42 €"]
TARGETS = ["Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.", "Zwei Hunde spielen im Schnee.", "Zahlen: 42 €"]


def train_bpe(sentences, pieces, path):
    """A BPE model as NLLB's and M2M100's sentencepiece.bpe.model are, with the identity normaliser."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=model, vocab_size=pieces, model_type="bpe",
                                   normalization_rule_name="identity", character_coverage=1.0, minloglevel=2)
    with open(path, "wb") as f:
        f.write(model.getvalue())


def config(vocab, pad=1):
    return M2M100Config(vocab_size=vocab, d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                        decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
                        activation_function="relu", scale_embedding=True, pad_token_id=pad, bos_token_id=0, eos_token_id=2,
                        decoder_start_token_id=2, init_std=0.3, dropout=0.1, max_length=40, num_beams=4)


def case(model, tok, name, source, target, forced, tensors):
    enc = tok(source, return_tensors="pt")
    labels = tok(text_target=target, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model(**enc, labels=labels)
        greedy = model.generate(**enc, num_beams=1, do_sample=False, forced_bos_token_id=forced)
        beam = model.generate(**enc, num_beams=4, do_sample=False, forced_bos_token_id=forced, return_dict_in_generate=True,
                              output_scores=True)
    for key, t in {"input_ids": enc.input_ids, "labels": labels, "encoder_last_hidden_state": out.encoder_last_hidden_state,
                   "logits": out.logits, "greedy_ids": greedy, "beam4_ids": beam.sequences, "beam4_sequences_scores": beam.sequences_scores}.items():
        tensors[f"{name}.{key}"] = t
    return {"source_text": source, "target_text": target, "input_ids": enc.input_ids[0].tolist(), "labels": labels[0].tolist(),
            "source_tokens": tok.convert_ids_to_tokens(enc.input_ids[0]), "greedy_ids": greedy[0].tolist(),
            "greedy_text": tok.decode(greedy[0], skip_special_tokens=True), "beam4_ids": beam.sequences[0].tolist(),
            "beam4_text": tok.decode(beam.sequences[0], skip_special_tokens=True), "beam4_sequences_score": beam.sequences_scores[0].item()}


def run_cases(model, tok, name, forced):
    """Every sentence's case; the tensors by name."""
    tensors, cases = {}, []
    for i, (source, target) in enumerate(zip(SOURCES, TARGETS)):
        cases.append(case(model, tok, f"s{i}", source, target, forced, tensors))
        c = cases[-1]
        print(f"{name} s{i}: {c['source_tokens'][:4]} ... -> greedy {c['greedy_ids'][:6]} ({len(c['greedy_ids'])}), "
              f"beam {c['beam4_ids'][:6]} ({len(c['beam4_ids'])})")
    return cases, tensors


def summary(name, script, model_class, tokenizer_class, vocab, src_lang, tgt_lang, forced, cases, **extra):
    """reference.json's record of a fixture: what made it, its languages and its cases."""
    return {"fixture": name, "generated_by": {"transformers": __import__("transformers").__version__, "torch": torch.__version__,
                                              "script": script},
            "model_class": model_class, "tokenizer_class": tokenizer_class + " (slow, sentencepiece)",
            "vocab_size": vocab, "src_lang": src_lang, "tgt_lang": tgt_lang, "forced_bos_token_id": forced, **extra,
            "generation": {"greedy_call": "model.generate(**tok(source), num_beams=1, do_sample=False, forced_bos_token_id=...)",
                           "beam4_call": "model.generate(**tok(source), num_beams=4, do_sample=False, forced_bos_token_id=...)"},
            "cases": cases}


def tiny_bpe(directory):
    """The SentencePiece model all these fixtures share: 200 BPE pieces of Multi30k's English and German."""
    path = os.path.join(directory, "sentencepiece.bpe.model")
    train_bpe(lines("multi30k/train.en.gz", 1000) + lines("multi30k/train.de.gz", 1000), 200, path)
    return path


def hub_like(directory):
    """4.39's save_pretrained writes "additional_special_tokens": [] (it keeps the language tokens elsewhere), and
    a tokenizer reloaded from that no longer counts them special, so that decode(skip_special_tokens=True) keeps
    "__de__". The hub's files (facebook/m2m100_418M, nllb-200-*) have no such key: the languages stay special, as
    users see them. The key is dropped here to match those files."""
    path = os.path.join(directory, "tokenizer_config.json")
    with open(path) as f:
        config = json.load(f)
    if config.get("additional_special_tokens") == []:
        del config["additional_special_tokens"]
    with open(path, "w") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)


def vocab_size(tok):
    """M2M100's: the dictionary, its 100 languages and 8 made-up words; NLLB's: every token, the added ones
    (its language codes and <mask>, numbered as tokenizer_config.json's added_tokens_decoder says) included."""
    if isinstance(tok, M2M100Tokenizer):
        return len(tok.encoder) + len(tok.lang_token_to_id) + tok.num_madeup_words
    return len(tok)


def make(name, tokenizer, src_lang, tgt_lang, tokenizer_class):
    directory = os.path.join(OUT, name)
    os.makedirs(directory, exist_ok=True)
    tokenizer.src_lang, tokenizer.tgt_lang = src_lang, tgt_lang
    vocab = vocab_size(tokenizer)
    model = seeded(M2M100ForConditionalGeneration, config(vocab))
    perturb(model, 0.1)
    model.eval()
    model, _ = save_and_reload(model, tokenizer, directory, M2M100ForConditionalGeneration, tokenizer_class)
    hub_like(directory)
    tok = tokenizer_class.from_pretrained(directory)
    tok.src_lang, tok.tgt_lang = src_lang, tgt_lang
    forced = tok.convert_tokens_to_ids(tgt_lang if tokenizer_class is NllbTokenizer else tok.get_lang_token(tgt_lang))
    cases, tensors = run_cases(model, tok, name, forced)
    record = summary(name, "tests/reference/make_hf_m2m100_fixtures.py", "M2M100ForConditionalGeneration", tokenizer_class.__name__,
                     vocab, src_lang, tgt_lang, forced, cases)
    write_reference(directory, record, tensors)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model = tiny_bpe(tmp)
        fairseq = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
        for piece in spm_pieces(model):
            fairseq.setdefault(piece, len(fairseq))
        with open(os.path.join(tmp, "vocab.json"), "w") as f:
            json.dump(fairseq, f, ensure_ascii=False)
        make("m2m100_tiny", M2M100Tokenizer(os.path.join(tmp, "vocab.json"), model), "en", "de", M2M100Tokenizer)
        make("nllb_tiny", NllbTokenizer(model, legacy_behaviour=False), "eng_Latn", "deu_Latn", NllbTokenizer)


if __name__ == "__main__":
    main()
