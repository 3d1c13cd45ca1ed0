#!/usr/bin/python3
"""Writes tests/fixtures/tagger/: a token classification (NER-style) task derived from Multi30k's English
captions (../shared/data/multi30k), for fine-tuning tests without downloads, in CoNLL columns (a word and its
label a line, a blank line between sentences). Words: the caption split at spaces, punctuation apart. Entities
(IOB2): ANIMAL, an animal's word ("dog", "horses", ...: B-ANIMAL); CLOTHING, a garment's word ("shirt",
"jacket", ...) with the colour words right before it ("a red and white shirt": red B-CLOTHING, and I-CLOTHING,
white I-CLOTHING, shirt I-CLOTHING), so that a colour's label depends on what follows it. The first 2,000
training captions (train.conll.gz) and the first 300 val captions (valid.conll).
    /usr/bin/python3 tests/reference/make_tagger_fixture.py
"""
import gzip
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "..", "shared", "data", "multi30k")
OUT = os.path.join(HERE, "..", "fixtures", "tagger")
ANIMALS = set("dog dogs cat cats horse horses bird birds cow cows sheep puppy bull camel camels goat goats".split())
GARMENTS = set("shirt shirts jacket jackets hat hats dress dresses coat coats pants shorts sweater helmet helmets uniform uniforms "
               "jeans skirt scarf hoodie vest t-shirt top".split())
COLORS = set("red blue green yellow black white orange pink purple brown gray grey dark light striped".split())


def labels(words):
    out = ["O"] * len(words)
    for i, w in enumerate(words):
        lw = w.lower()
        if lw in ANIMALS:
            out[i] = "B-ANIMAL"
        elif lw in GARMENTS:
            start = i
            while start > 0 and (words[start - 1].lower() in COLORS or (words[start - 1].lower() == "and" and start > 1
                                                                          and words[start - 2].lower() in COLORS)):
                start -= 1
            out[start] = "B-CLOTHING"
            for j in range(start + 1, i + 1):
                out[j] = "I-CLOTHING"
    return out


def conll(split, count):
    with gzip.open(os.path.join(DATA, f"{split}.en.gz"), "rt", encoding="utf-8") as f:
        captions = [next(f).strip() for _ in range(count)]
    blocks = []
    for c in captions:
        words = re.findall(r"[\w'-]+|[^\w\s]", c)
        blocks.append("".join(f"{w} {t}\n" for w, t in zip(words, labels(words))))
    return "\n".join(blocks)


def main():
    os.makedirs(OUT, exist_ok=True)
    with gzip.open(os.path.join(OUT, "train.conll.gz"), "wt", encoding="utf-8") as f:
        f.write(conll("train", 2000))
    with open(os.path.join(OUT, "valid.conll"), "w", encoding="utf-8") as f:
        f.write(conll("val", 300))


if __name__ == "__main__":
    main()
