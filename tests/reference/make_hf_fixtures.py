#!/usr/bin/python3
"""Writes tiny Hugging Face model directories, with the outputs transformers' own code computes from them,
for the checkpoint layouts the fixtures of ../shared/fixtures/hf do not show.

Run with Debian's interpreter inside the offline transformers 4.39 environment that
../shared/tools/hf-reference/setup.sh builds (its README says how):
    /usr/bin/python3 tests/reference/make_hf_fixtures.py HFENV
HFENV: the DEST given to setup.sh. Outputs go to tests/fixtures/hf/<name>/ (committed, so CI needs no
torch): the files save_pretrained writes, reference.json (ids, tokens, texts, settings) and
reference.safetensors (float32 tensors). Each model is saved, reloaded with from_pretrained (checked
bit-exact) and the references are computed by the reloaded model and tokenizer, in float32 on the CPU.

- marian_multi_target_tiny: one vocabulary for both sides holding language labels (>>fr<<, >>cmn_Hans<<,
  the tc-big >>fra<<), as opus-mt-en-ROMANCE, -en-mul and the tc-big models have; generation_config.json's
  max_length (40) is above 1.5 n + 10 for the short sources.
- marian_separate_vocabs_tiny: separate source and target vocabularies (vocab.json, target_vocab.json,
  separate_vocabs true), untied encoder and decoder embeddings (share_encoder_decoder_embeddings false), the
  head tied to the decoder's embedding; generation_config.json's max_new_tokens (30) overrides its max_length.
- gpt2_layer_scaled_tiny: GPT-2 with scale_attn_by_inverse_layer_idx and reorder_and_upcast_attn (3 layers).
"""
import gzip
import io
import json
import os
import sys
import tempfile

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "hf")
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data")

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HFENV", "/work/hfenv"))
import hfenv  # noqa: E402,F401

import sentencepiece as spm  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import (GenerationConfig, GPT2Config, GPT2LMHeadModel, GPT2Tokenizer, MarianConfig,  # noqa: E402
                          MarianMTModel, MarianTokenizer)

LABELS = [">>fr<<", ">>es<<", ">>it<<", ">>pt_BR<<", ">>cmn_Hans<<", ">>fra<<", ">>por<<"]


def lines(name, count):
    with gzip.open(os.path.join(DATA, name), "rt", encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(count)]


def train_spm(sentences, pieces, path):
    """A unigram model with the identity normaliser, so that the file stays a few KB (opus-mt's nmt_nfkc
    charsmap alone is 240 KB); MarianTokenizer treats it as any other."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=model, vocab_size=pieces,
                                   model_type="unigram", normalization_rule_name="identity", character_coverage=1.0,
                                   minloglevel=2)
    with open(path, "wb") as f:
        f.write(model.getvalue())


def spm_pieces(path):
    p = spm.SentencePieceProcessor(model_file=path)
    return [p.id_to_piece(i) for i in range(p.get_piece_size()) if not (p.is_control(i) or p.is_unknown(i))]


def vocab_json(*piece_lists, labels=()):
    """opus-mt's vocab.json: </s>, <unk>, the language labels, the pieces of each list not already in, <pad> last."""
    vocab = {"</s>": 0, "<unk>": 1}
    for token in [*labels, *(p for pieces in piece_lists for p in pieces)]:
        vocab.setdefault(token, len(vocab))
    vocab["<pad>"] = len(vocab)
    return vocab


def seeded(model_class, config):
    """The model with HF's own init (config's std), from seed 0."""
    torch.manual_seed(0)
    return model_class(config)


def perturb(model, std):
    """Every 1-D parameter moved off 0/1, as the shared fixtures do."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * std)


def save_and_reload(model, tokenizer, directory, model_class, tokenizer_class):
    tokenizer.save_pretrained(directory)
    model.save_pretrained(directory, safe_serialization=True)
    reloaded, tok = model_class.from_pretrained(directory).eval(), tokenizer_class.from_pretrained(directory)
    before, after = model.state_dict(), reloaded.state_dict()
    for name, t in before.items():
        assert torch.equal(t, after[name]), name
    return reloaded, tok


def write_reference(directory, summary, tensors):
    index = {name: {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape)} for name, t in tensors.items()}
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(directory, "reference.safetensors"))
    with open(os.path.join(directory, "reference.json"), "w", encoding="utf-8") as f:
        json.dump({**summary, "tensors": index}, f, ensure_ascii=False, indent=1)
        f.write("\n")


def marian_case(model, tok, name, source, target, tensors):
    """ids, tokens, teacher-forced logits, greedy and beam-4 generations of one sentence."""
    enc = tok(source, return_tensors="pt")
    labels = tok(text_target=target, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model(**enc, labels=labels)
        greedy = model.generate(**enc, num_beams=1, do_sample=False)
        beam = model.generate(**enc, num_beams=4, do_sample=False, return_dict_in_generate=True, output_scores=True)
    tensors[name + ".input_ids"] = enc.input_ids
    tensors[name + ".labels"] = labels
    tensors[name + ".encoder_last_hidden_state"] = out.encoder_last_hidden_state
    tensors[name + ".logits"] = out.logits
    tensors[name + ".greedy_ids"] = greedy
    tensors[name + ".beam4_ids"] = beam.sequences
    tensors[name + ".beam4_sequences_scores"] = beam.sequences_scores
    return {"source_text": source, "target_text": target, "input_ids": enc.input_ids[0].tolist(),
            "source_tokens": tok.tokenize(source) + [tok.eos_token], "labels": labels[0].tolist(),
            "greedy_ids": greedy[0].tolist(), "greedy_text": tok.decode(greedy[0], skip_special_tokens=True),
            "beam4_ids": beam.sequences[0].tolist(), "beam4_text": tok.decode(beam.sequences[0], skip_special_tokens=True),
            "beam4_sequences_score": beam.sequences_scores[0].item()}


def make_marian(name, separate, labels, generation, sources, targets, eos_bias):
    directory = os.path.join(OUT, name)
    os.makedirs(directory, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src_spm, tgt_spm = os.path.join(tmp, "source.spm"), os.path.join(tmp, "target.spm")
        en, de = lines("multi30k/train.en.gz", 1000), lines("multi30k/train.de.gz", 1000)
        # Separate vocabularies have one size (the opus-mt conversion needs dim-vocabs equal): the target
        # model has a piece for each label the source vocabulary holds.
        train_spm(en, 100, src_spm)
        train_spm(de, 100 + (len(labels) if separate else 0), tgt_spm)
        vocab_files = {}
        if separate:
            src_vocab, tgt_vocab = vocab_json(spm_pieces(src_spm), labels=labels), vocab_json(spm_pieces(tgt_spm))
            assert len(src_vocab) == len(tgt_vocab)
            vocab_files["target_vocab_file"] = os.path.join(tmp, "target_vocab.json")
            with open(vocab_files["target_vocab_file"], "w") as f:
                json.dump(tgt_vocab, f, ensure_ascii=False)
        else:
            src_vocab = vocab_json(spm_pieces(src_spm), spm_pieces(tgt_spm), labels=labels)
        with open(os.path.join(tmp, "vocab.json"), "w") as f:
            json.dump(src_vocab, f, ensure_ascii=False)
        tokenizer = MarianTokenizer(src_spm, tgt_spm, os.path.join(tmp, "vocab.json"), separate_vocabs=separate,
                                    source_lang="en", target_lang="mul", **vocab_files)
        vocab = len(src_vocab)
        pad = vocab - 1
        config = MarianConfig(vocab_size=vocab, decoder_vocab_size=vocab, d_model=16, encoder_layers=2, decoder_layers=2,
                              encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32,
                              max_position_embeddings=64, activation_function="swish", scale_embedding=True,
                              share_encoder_decoder_embeddings=not separate, pad_token_id=pad, eos_token_id=0,
                              bos_token_id=0, decoder_start_token_id=pad, forced_eos_token_id=0, init_std=0.3,
                              static_position_embeddings=True, normalize_embedding=False, max_length=512, num_beams=4,
                              bad_words_ids=[[pad]])
        model = seeded(MarianMTModel, config)
        perturb(model, 0.1)
        with torch.no_grad():
            bias = torch.randn(1, vocab) * 0.5
            bias[0, 0] += eos_bias
            model.final_logits_bias.copy_(bias)
        model.generation_config = GenerationConfig(bad_words_ids=[[pad]], bos_token_id=0, decoder_start_token_id=pad,
                                                   eos_token_id=0, forced_eos_token_id=0, num_beams=4, pad_token_id=pad,
                                                   renormalize_logits=True, **generation)
        model.eval()
        model, tok = save_and_reload(model, tokenizer, directory, MarianMTModel, MarianTokenizer)
    tensors, cases = {}, []
    for i, (source, target) in enumerate(zip(sources, targets)):
        cases.append(marian_case(model, tok, f"s{i}", source, target, tensors))
        c = cases[-1]
        print(f"{name} s{i}: {len(c['input_ids'])} source ids, greedy {len(c['greedy_ids'])}, beam {len(c['beam4_ids'])}: "
              f"{c['source_tokens'][:3]} -> {c['greedy_text'][:60]!r}")
    summary = {"fixture": name, "generated_by": {"transformers": __import__("transformers").__version__,
                                                 "torch": torch.__version__, "script": "tests/reference/make_hf_fixtures.py"},
               "model_class": "MarianMTModel", "tokenizer_class": "MarianTokenizer (slow, sentencepiece)",
               "vocab_size": vocab, "pad_token_id": pad, "separate_vocabs": separate, "language_labels": list(labels),
               "stored_tensors": sorted(__import__("safetensors").safe_open(os.path.join(directory, "model.safetensors"), "pt").keys()),
               "generation": {"generation_config.json": model.generation_config.to_diff_dict(),
                              "greedy_call": "model.generate(**tok(source), num_beams=1, do_sample=False)",
                              "beam4_call": "model.generate(**tok(source), num_beams=4, do_sample=False)"},
               "cases": cases}
    write_reference(directory, summary, tensors)


class _TorchWithExactBaddbmm:
    """torch, but baddbmm(bias, a, b, beta=0, alpha=s) computed as s * bmm(a, b). Debian's PyTorch 1.13 returns NaNs
    there for a [heads, 1, head_dim] query (GPT-2's cached decoding step with reorder_and_upcast_attn): it multiplies
    the uninitialised bias (torch.empty) by beta 0, and 0 * inf is NaN. A correct PyTorch computes the same product."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def baddbmm(bias, a, b, beta, alpha):
        assert beta == 0
        return alpha * torch.bmm(a, b)


def make_gpt2_layer_scaled():
    import transformers.models.gpt2.modeling_gpt2 as modeling_gpt2
    modeling_gpt2.torch = _TorchWithExactBaddbmm()
    name = "gpt2_layer_scaled_tiny"
    directory = os.path.join(OUT, name)
    os.makedirs(directory, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        # GPT-2's byte symbols, a few merges and <|endoftext|>: the tokenizer is not what this fixture is about.
        from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode
        symbols = list(bytes_to_unicode().values())
        merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("Ġ", "a"), ("i", "n"), ("o", "u"), ("e", "r"), ("Ġ", "s")]
        vocab = {s: i for i, s in enumerate(symbols)}
        for a, b in merges:
            vocab[a + b] = len(vocab)
        vocab["<|endoftext|>"] = len(vocab)
        with open(os.path.join(tmp, "vocab.json"), "w") as f:
            json.dump(vocab, f, ensure_ascii=False)
        with open(os.path.join(tmp, "merges.txt"), "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
        tokenizer = GPT2Tokenizer(os.path.join(tmp, "vocab.json"), os.path.join(tmp, "merges.txt"), model_max_length=64)
        end = vocab["<|endoftext|>"]
        config = GPT2Config(vocab_size=len(vocab), n_positions=64, n_embd=16, n_layer=3, n_head=4, initializer_range=0.3,
                            scale_attn_by_inverse_layer_idx=True, reorder_and_upcast_attn=True, bos_token_id=end,
                            eos_token_id=end)
        model = seeded(GPT2LMHeadModel, config)
        perturb(model, 0.1)
        model.eval()
        model, tok = save_and_reload(model, tokenizer, directory, GPT2LMHeadModel, GPT2Tokenizer)
    tensors, cases = {}, []
    for i, prompt in enumerate(["the house in the town", "A man sits outside."]):
        enc = tok(prompt, return_tensors="pt")
        with torch.no_grad():
            logits = model(**enc).logits
            greedy = model.generate(**enc, max_new_tokens=20, do_sample=False, num_beams=1, pad_token_id=end)
        p = f"p{i}"
        tensors.update({p + ".input_ids": enc.input_ids, p + ".logits": logits, p + ".greedy_ids": greedy})
        new = greedy[0, enc.input_ids.shape[1]:]
        cases.append({"prompt": prompt, "input_ids": enc.input_ids[0].tolist(), "greedy_new_ids": new.tolist(),
                      "greedy_new_text": tok.decode(new)})
        print(f"{name} {p}: {len(cases[-1]['input_ids'])} ids -> {cases[-1]['greedy_new_text']!r}")
    summary = {"fixture": name, "generated_by": {"transformers": __import__("transformers").__version__,
                                                 "torch": torch.__version__, "script": "tests/reference/make_hf_fixtures.py"},
               "model_class": "GPT2LMHeadModel", "generation": "model.generate(**tok(prompt), max_new_tokens=20, do_sample=False)",
               "cases": cases}
    write_reference(directory, summary, tensors)


def main():
    # The bias on </s> (as the shared Marian fixture's +3.4) is chosen so that some generations end at once, some
    # run to the length limit and beam search ends others earlier than greedy search.
    make_marian("marian_multi_target_tiny", False, LABELS, {"max_length": 40},
                [">>fr<< A man sleeps.", ">>es<< A man sleeps.", ">>cmn_Hans<< Two dogs.", ">>fra<<A girl is running.",
                 ">>por<< A dog.", "A dog >>es<< runs >>fr<< fast.", "Two men are working."],
                ["Ein Mann schläft.", "Ein Mann schläft.", "Zwei Hunde.", "Ein Mädchen rennt.", "Ein Hund.", "Ein Hund rennt.",
                 "Zwei Männer arbeiten."], eos_bias=2.0)
    make_marian("marian_separate_vocabs_tiny", True, [">>deu<<", ">>nld<<"], {"max_length": 512, "max_new_tokens": 30},
                [">>deu<< A man sleeps.", ">>nld<< A man sleeps.", "Two dogs are playing.", "A girl."],
                ["Ein Mann schläft.", "Ein Mann schläft.", "Zwei Hunde spielen.", "Ein Mädchen."], eos_bias=1.0)
    make_gpt2_layer_scaled()


if __name__ == "__main__":
    main()
