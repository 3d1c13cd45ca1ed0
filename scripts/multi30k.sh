#!/usr/bin/env bash
# Multi30k German->English end to end: vocabulary, training of the `small` preset
# (capped at MINUTES of training, 57 by default) with PRECISION's products (f32 by
# default, or bf16), beam-4 translation of test_2016_flickr (in f32), BLEU and chrF.
#   scripts/multi30k.sh [DATA_DIR] [OUT_DIR] [MINUTES] [PRECISION]
# DATA_DIR holds train/val/test_2016_flickr .de.gz/.en.gz (default ../shared/data/multi30k).
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/data/multi30k}
out=${2:-runs/multi30k}
minutes=${3:-57}
precision=${4:-f32}
for f in train val test_2016_flickr; do
  for l in de en; do
    [[ -f "$data/$f.$l.gz" ]] || { echo "missing $data/$f.$l.gz (Multi30k task 1 raw text)" >&2; exit 1; }
  done
done
scripts/build.sh >/dev/null
mkdir -p "$out"
start=$(date +%s)
build/tfm vocab --src "$data/train.de.gz" --tgt "$data/train.en.gz" --joint --size 8000 --out "$out/vocab"
build/tfm --precision "$precision" train --train-src "$data/train.de.gz" --train-tgt "$data/train.en.gz" \
  --valid-src "$data/val.de.gz" --valid-tgt "$data/val.en.gz" \
  --src-vocab "$out/vocab.model" --tgt-vocab "$out/vocab.model" --out "$out" \
  --preset small --max-tokens 4000 --warmup 800 --lr 1.0 --validate-every 400 \
  --epochs 100 --max-minutes "$minutes"
echo "training took $(( ($(date +%s) - start) / 60 )) minutes"
zcat "$data/test_2016_flickr.de.gz" | build/tfm translate --model "$out/best.safetensors" --beam 4 -o "$out/test_2016_flickr.hyp.en"
zcat "$data/test_2016_flickr.en.gz" > "$out/test_2016_flickr.ref.en"
build/tfm score --hyp "$out/test_2016_flickr.hyp.en" --ref "$out/test_2016_flickr.ref.en" | tee "$out/test_2016_flickr.score"
