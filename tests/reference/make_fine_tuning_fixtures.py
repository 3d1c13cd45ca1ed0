#!/usr/bin/python3
"""Writes the fine-tuning tasks of tests/fixtures/classifier and tests/fixtures/tagger, derived from Multi30k's
English captions (../shared/data/multi30k), so that the fine-tuning tests need no download:
    /usr/bin/python3 tests/reference/make_fine_tuning_fixtures.py

classifier/ (text<TAB>label a line): a caption's label is what it shows, by its words: "animal" (dog, cat, horse,
bird, ...), else "vehicle" (car, bike, boat, train, ...), else "sport" (ball, soccer, tennis, skateboard, ...),
else "other". Balanced: the first 800 captions of each label from train (3,200, shuffled with seed 1:
train.tsv.gz) and at most 60 of each from val (226: valid.tsv).

tagger/ (CoNLL columns: a word and its label a line, a blank line between sentences): words are the caption split
at spaces, punctuation apart. Entities (IOB2): ANIMAL, an animal's word ("dog", "horses", ...: B-ANIMAL);
CLOTHING, a garment's word ("shirt", "jacket", ...) with the colour words right before it ("a red and white
shirt": red B-CLOTHING, and I-CLOTHING, white I-CLOTHING, shirt I-CLOTHING), so that a colour's label depends on
what follows it. The first 2,000 training captions (train.conll.gz) and the first 300 val captions (valid.conll).
"""
import gzip
import os
import random
import re

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "..", "shared", "data", "multi30k")
FIXTURES = os.path.join(HERE, "..", "fixtures")
WORDS = [("animal", "dog dogs cat cats horse horses bird birds cow cows sheep animal animals puppy bull"),
         ("vehicle", "car cars bike bikes bicycle bicycles motorcycle truck bus boat train vehicle motorbike"),
         ("sport", "ball soccer football basketball baseball tennis skateboard surfer surfing snowboard skiing skier")]


def label(caption):
    words = set(re.findall(r"[a-z]+", caption.lower()))
    return next((name for name, keys in WORDS if words & set(keys.split())), "other")


def balanced(split, per_label):
    with gzip.open(os.path.join(DATA, f"{split}.en.gz"), "rt", encoding="utf-8") as f:
        captions = [line.strip() for line in f]
    by_label = {}
    for c in captions:
        by_label.setdefault(label(c), []).append(c)
    rows = [(c, name) for name, cs in sorted(by_label.items()) for c in cs[:per_label]]
    random.Random(1).shuffle(rows)
    return "".join(f"{c}\t{name}\n" for c, name in rows)


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


def write(directory, train_name, train_text, valid_name, valid_text):
    os.makedirs(os.path.join(FIXTURES, directory), exist_ok=True)
    with gzip.open(os.path.join(FIXTURES, directory, train_name), "wt", encoding="utf-8") as f:
        f.write(train_text)
    with open(os.path.join(FIXTURES, directory, valid_name), "w", encoding="utf-8") as f:
        f.write(valid_text)


def main():
    write("classifier", "train.tsv.gz", balanced("train", 800), "valid.tsv", balanced("val", 60))
    write("tagger", "train.conll.gz", conll("train", 2000), "valid.conll", conll("val", 300))


if __name__ == "__main__":
    main()
