#!/usr/bin/env bash
# Multi30k German->English end to end, the recipe of docs/TRANSLATION.md: vocabulary,
# training of the `small` preset for MINUTES (25 by default) with PRECISION's products
# (bf16 by default, or f32), a step-N checkpoint kept every 200 steps, the mean of the
# last AVERAGE of them (tfm average), the length penalty that translates val best, and
# beam-4 translation of test_2016_flickr (and of test_2017_flickr, test_2017_mscoco and
# test_2018_flickr where DATA_DIR has them) scored with BLEU and chrF, greedy beside it.
#   scripts/multi30k.sh [DATA_DIR] [OUT_DIR] [MINUTES] [PRECISION] [AVERAGE]
# DATA_DIR holds train/val/test_2016_flickr .de.gz/.en.gz (default ../shared/data/multi30k).
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/data/multi30k}
out=${2:-runs/multi30k}
minutes=${3:-25}
precision=${4:-bf16}
average=${5:-5}
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
  --preset small --max-tokens 4000 --warmup 800 --lr 1.0 --validate-every 400 --save-every 200 \
  --epochs 100 --max-minutes "$minutes"
echo "training took $(( ($(date +%s) - start) / 60 )) minutes"
rm -f "$out/average.safetensors"
build/tfm average --last "$average" "$out" -o "$out/average.safetensors"
model="$out/average.safetensors"
# The length penalty that translates val best with beam 4 (ranking by log p / words^penalty).
zcat "$data/val.en.gz" > "$out/val.ref.en"
best_bleu=-1 penalty=1
for p in 0.6 1.0 1.4 1.8; do
  zcat "$data/val.de.gz" | build/tfm translate --model "$model" --beam 4 --length-penalty "$p" -o "$out/val.lp$p.hyp.en"
  bleu=$(build/tfm score --hyp "$out/val.lp$p.hyp.en" --ref "$out/val.ref.en" | awk 'NR == 1 { print $3 }')
  echo "val, beam 4, length penalty $p: BLEU $bleu"
  if awk -v a="$bleu" -v b="$best_bleu" 'BEGIN { exit !(a > b) }'; then best_bleu=$bleu penalty=$p; fi
done
echo "length penalty $penalty (val BLEU $best_bleu)" | tee "$out/scores.txt"
for set in test_2016_flickr test_2017_flickr test_2017_mscoco test_2018_flickr; do
  [[ -f "$data/$set.de.gz" && -f "$data/$set.en.gz" ]] || { echo "$set: not in $data, skipped"; continue; }
  zcat "$data/$set.en.gz" > "$out/$set.ref.en"
  for search in greedy beam4; do
    flags=(--greedy); [[ $search == beam4 ]] && flags=(--beam 4 --length-penalty "$penalty")
    zcat "$data/$set.de.gz" | build/tfm translate --model "$model" "${flags[@]}" -o "$out/$set.$search.hyp.en"
    echo "$set, $search: $(build/tfm score --hyp "$out/$set.$search.hyp.en" --ref "$out/$set.ref.en" | tr '\n' ' ')" | tee -a "$out/scores.txt"
  done
done
