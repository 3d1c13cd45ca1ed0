#!/usr/bin/python3
"""Writes tests/fixtures/classifier/: a sentence classification task derived from Multi30k's English captions
(../shared/data/multi30k), for fine-tuning tests without downloads. A caption's label is what it shows, by its
words: "animal" (dog, cat, horse, bird, ...), else "vehicle" (car, bike, boat, train, ...), else "sport" (ball,
soccer, tennis, skateboard, ...), else "other". Balanced: the first 800 captions of each label from train (3,200,
shuffled with seed 1: train.tsv.gz) and at most 60 of each from val (226: valid.tsv); text<TAB>label a line.
    /usr/bin/python3 tests/reference/make_classifier_fixture.py
"""
import gzip
import os
import random
import re

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "..", "shared", "data", "multi30k")
OUT = os.path.join(HERE, "..", "fixtures", "classifier")
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


def main():
    os.makedirs(OUT, exist_ok=True)
    with gzip.open(os.path.join(OUT, "train.tsv.gz"), "wt", encoding="utf-8") as f:
        f.write(balanced("train", 800))
    with open(os.path.join(OUT, "valid.tsv"), "w", encoding="utf-8") as f:
        f.write(balanced("val", 60))


if __name__ == "__main__":
    main()
