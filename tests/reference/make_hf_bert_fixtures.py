#!/usr/bin/python3
"""Writes tiny Hugging Face BERT directories of the kinds people download besides the masked-LM ones, with the
outputs transformers' own code computes from them (as make_hf_fixtures.py does for Marian and GPT-2; run the
same way: /usr/bin/python3 tests/reference/make_hf_bert_fixtures.py HFENV).

- bert_sentence_tiny: a BertModel (no prefix, a pooler, no head) laid out as a sentence-transformers directory,
  as all-MiniLM-L6-v2 is: modules.json (Transformer, Pooling, Normalize), 1_Pooling/config.json (mean tokens),
  sentence_bert_config.json (max_seq_length 12). sentence-transformers itself is not installed here, so its
  embedding is computed by its own recipe in PyTorch: the mean of last_hidden_state over the attention mask,
  then torch.nn.functional.normalize; the input cut to max_seq_length tokens ([CLS] and [SEP] included).
- bert_sequence_tiny: BertForSequenceClassification, id2label NEGATIVE/NEUTRAL/POSITIVE (softmax).
- bert_multilabel_tiny: BertForSequenceClassification with problem_type multi_label_classification (sigmoids).
- bert_token_tiny: BertForTokenClassification (no pooler), id2label O, B-PER, I-PER, B-LOC, I-LOC, B-MISC.
- bert_mlm_tiny: BertForMaskedLM (no pooler, no next-sentence head).
The vocabulary is ../shared/fixtures/hf/bert_tiny_uncased/vocab.txt (uncased WordPiece, 312 tokens).
"""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_hf_fixtures as common  # noqa: E402  (imports hfenv, torch and safetensors)

import torch  # noqa: E402
from transformers import (BertConfig, BertForMaskedLM, BertForSequenceClassification,  # noqa: E402
                          BertForTokenClassification, BertModel, BertTokenizer)

VOCAB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "fixtures", "hf", "bert_tiny_uncased",
                     "vocab.txt")
SENTENCES = ["A man sleeps on the bench.", "Two dogs are running in the park near the water.", "the",
             "John Smith lives in London and works at the station every day of the week."]
GENERATED_BY = {"transformers": __import__("transformers").__version__, "torch": torch.__version__,
                "script": "tests/reference/make_hf_bert_fixtures.py"}


def config(**extra):
    return BertConfig(vocab_size=312, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                      max_position_embeddings=64, initializer_range=0.3, **extra)


def labelled_config(labels, **extra):
    return config(id2label=dict(enumerate(labels)), label2id={label: i for i, label in enumerate(labels)}, **extra)


def logits_of(model, tok, sentence):
    """The tokenizer's ids of the sentence, and the model's logits."""
    enc = tok(sentence, return_tensors="pt")
    with torch.no_grad():
        return enc, model(**enc).logits


def build(name, model_class, cfg, extra_files=None):
    """The model from seed 0, perturbed, saved with the tokenizer, reloaded (bit-exact), in eval mode."""
    directory = os.path.join(common.OUT, name)
    if os.path.isdir(directory):
        shutil.rmtree(directory)
    os.makedirs(directory)
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(VOCAB, os.path.join(tmp, "vocab.txt"))
        tokenizer = BertTokenizer(os.path.join(tmp, "vocab.txt"), do_lower_case=True, model_max_length=64)
        model = common.seeded(model_class, cfg)
        common.perturb(model, 0.1)
        model.eval()
        model, tok = common.save_and_reload(model, tokenizer, directory, model_class, BertTokenizer)
    for path, content in (extra_files or {}).items():
        os.makedirs(os.path.dirname(os.path.join(directory, path)), exist_ok=True)
        with open(os.path.join(directory, path), "w") as f:
            json.dump(content, f, indent=2)
    return directory, model, tok


def write(directory, name, model_class, cases, tensors, **summary):
    common.write_reference(directory, {"fixture": name, "generated_by": GENERATED_BY, "model_class": model_class, **summary,
                                       "cases": cases}, tensors)
    print(name, len(cases), "sentences")


def make_sentence():
    name, max_tokens = "bert_sentence_tiny", 12
    files = {"modules.json": [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                              {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                              {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
             "1_Pooling/config.json": {"word_embedding_dimension": 16, "pooling_mode_cls_token": False,
                                       "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
                                       "pooling_mode_mean_sqrt_len_tokens": False},
             "sentence_bert_config.json": {"max_seq_length": max_tokens, "do_lower_case": False}}
    directory, model, tok = build(name, BertModel, config(), files)
    tensors, cases = {}, []
    for i, s in enumerate(SENTENCES):
        enc = tok(s, return_tensors="pt", truncation=True, max_length=max_tokens)
        with torch.no_grad():
            out = model(**enc)
        mask = enc.attention_mask.unsqueeze(-1).float()
        mean = (out.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        p = f"s{i}"
        tensors.update({p + ".input_ids": enc.input_ids, p + ".last_hidden_state": out.last_hidden_state,
                        p + ".pooler_output": out.pooler_output,
                        p + ".sentence_embedding": torch.nn.functional.normalize(mean, p=2, dim=1)})
        cases.append({"text": s, "input_ids": enc.input_ids[0].tolist()})
    write(directory, name, "BertModel", cases, tensors, max_seq_length=max_tokens,
          embedding="sentence-transformers' recipe: mean of last_hidden_state over the mask, then L2-normalised")


def make_sequence(name, labels, problem_type):
    directory, model, tok = build(name, BertForSequenceClassification, labelled_config(labels, problem_type=problem_type))
    tensors, cases = {}, []
    for i, s in enumerate(SENTENCES):
        enc, logits = logits_of(model, tok, s)
        probs = torch.sigmoid(logits) if problem_type == "multi_label_classification" else torch.softmax(logits, -1)
        p = f"s{i}"
        tensors.update({p + ".input_ids": enc.input_ids, p + ".logits": logits, p + ".probabilities": probs})
        cases.append({"text": s, "input_ids": enc.input_ids[0].tolist(), "label": labels[int(probs.argmax())]})
    write(directory, name, "BertForSequenceClassification", cases, tensors, problem_type=problem_type)


def make_token():
    name, labels = "bert_token_tiny", ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-MISC"]
    directory, model, tok = build(name, BertForTokenClassification, labelled_config(labels))
    tensors, cases = {}, []
    for i, s in enumerate(SENTENCES):
        enc, logits = logits_of(model, tok, s)
        pieces = tok.convert_ids_to_tokens(enc.input_ids[0])
        best = logits[0].argmax(-1).tolist()
        words = []  # a word's label is its first piece's (aggregation "first"); [CLS] and [SEP] are no words
        for j, piece in enumerate(pieces[1:-1], start=1):
            if piece.startswith("##") and words:
                words[-1]["pieces"].append(piece)
                continue
            words.append({"pieces": [piece], "label": labels[best[j]]})
        for w in words:
            w["word"] = tok.convert_tokens_to_string(w.pop("pieces"))
        p = f"s{i}"
        tensors.update({p + ".input_ids": enc.input_ids, p + ".logits": logits})
        cases.append({"text": s, "input_ids": enc.input_ids[0].tolist(), "words": words})
    write(directory, name, "BertForTokenClassification", cases, tensors,
          words="each word's label is its first piece's argmax (transformers' aggregation_strategy 'first')")


def make_mlm():
    name = "bert_mlm_tiny"
    directory, model, tok = build(name, BertForMaskedLM, config())
    tensors, cases = {}, []
    for i, s in enumerate(SENTENCES[:2]):
        enc, logits = logits_of(model, tok, s)
        tensors.update({f"s{i}.input_ids": enc.input_ids, f"s{i}.logits": logits})
        cases.append({"text": s, "input_ids": enc.input_ids[0].tolist()})
    write(directory, name, "BertForMaskedLM", cases, tensors)


def main():
    make_sentence()
    make_sequence("bert_sequence_tiny", ["NEGATIVE", "NEUTRAL", "POSITIVE"], "single_label_classification")
    make_sequence("bert_multilabel_tiny", ["toxic", "insult", "threat", "obscene"], "multi_label_classification")
    make_token()
    make_mlm()


if __name__ == "__main__":
    main()
