#!/usr/bin/python3
"""Writes tests/fixtures/sampling/penalties.json: rows of logits, the tokens seen so far
and the logits after each penalty, computed by the reference definitions.

- repetition_penalty: transformers 4.39's own RepetitionPenaltyLogitsProcessor (every
  token of the prompt and the text so far, each once: logit / p if positive, * p if not).
- frequency_penalty and presence_penalty: OpenAI's definition as vLLM applies it (over the
  generated tokens: logit - count * frequency - (count > 0) * presence).
- min_p: transformers' MinPLogitsWarper (added after 4.39; its published definition,
  written out here): after the temperature, tokens whose probability is below min_p times
  the most likely's are dropped. The fixture keeps the ids that remain.

Run with Debian's interpreter inside the offline transformers 4.39 environment
(../shared/tools/hf-reference/):
    /usr/bin/python3 tests/reference/make_sampling_fixtures.py HFENV
"""
import json
import os
import sys

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "/work/hfenv")
import hfenv  # noqa: E402,F401 - makes transformers importable offline
import torch  # noqa: E402
from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "sampling", "penalties.json")


def frequency_presence(logits, generated, frequency, presence):
    counts = torch.bincount(torch.tensor(generated, dtype=torch.long), minlength=logits.numel()).float() if generated else torch.zeros(logits.numel())
    return logits - counts * frequency - (counts > 0).float() * presence


def min_p_kept(logits, temperature, min_p):
    probs = torch.softmax(logits / temperature, dim=-1)
    return sorted(int(i) for i in torch.nonzero(probs >= min_p * probs.max()).flatten())


def main():
    g = torch.Generator().manual_seed(7)
    cases = []
    for n, (vocab, seen, generated) in enumerate([(12, [3, 5, 3, 0, 11], 3), (12, [1, 2, 2, 2, 7], 4), (30, [4, 9, 29, 9, 4, 4, 17], 5)]):
        logits = torch.randn(vocab, generator=g) * 3
        logits[seen[0]] = -abs(logits[seen[0]])  # a negative and a positive logit among the seen
        logits[seen[1]] = abs(logits[seen[1]])
        penalty, frequency, presence, temperature, min_p = 1.3 + 0.2 * n, 0.25, 0.5, 0.7 + 0.3 * n, 0.05 + 0.1 * n
        repeated = RepetitionPenaltyLogitsProcessor(penalty)(torch.tensor([seen]), logits.clone()[None])[0]
        both = frequency_presence(repeated, seen[len(seen) - generated:], frequency, presence)
        cases.append({"logits": logits.tolist(), "seen": seen, "generated": generated, "repetition_penalty": penalty,
                      "frequency_penalty": frequency, "presence_penalty": presence, "repeated": repeated.tolist(), "penalized": both.tolist(),
                      "temperature": temperature, "min_p": min_p, "min_p_kept": min_p_kept(logits, temperature, min_p)})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump({"made_by": "tests/reference/make_sampling_fixtures.py", "cases": cases}, f, indent=1)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
