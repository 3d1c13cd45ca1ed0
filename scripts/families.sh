#!/usr/bin/env bash
# The Llama architecture against GPT-2's, trained from scratch on tinyshakespeare
# (characters) by `tfm lm train` at the same parameter count, steps and schedule, both
# at once on one thread each (scripts/families.py says why); rewrites the results in
# docs/FAMILIES.md and docs/families_curves.png. About 10 minutes (--minutes caps each run).
#   scripts/families.sh [TEXT] [-- options of scripts/families.py]
# TFM=path/to/tfm uses that binary instead of building build/tfm.
set -euo pipefail
cd "$(dirname "$0")/.."
text=../shared/data/tinyshakespeare/input.txt
if [[ -n ${1:-} && $1 != -- ]]; then text=$1; shift; fi
[[ ${1:-} == -- ]] && shift
[[ -f $text ]] || { echo "scripts/families.sh: $text is missing" >&2; exit 1; }
if [[ -z ${TFM:-} ]]; then
  scripts/build.sh >/dev/null
  TFM=build/tfm
fi
exec /usr/bin/python3 scripts/families.py --text "$text" --tfm "$TFM" "$@"
