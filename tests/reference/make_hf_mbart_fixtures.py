#!/usr/bin/python3
"""Writes tiny mBART-50 directories (model_type mbart), with the outputs transformers' own code computes from
them: tests/fixtures/hf/mbart50_tiny and mbart50_unscaled_tiny.

Run with Debian's interpreter inside the offline transformers 4.39 environment that
../shared/tools/hf-reference/setup.sh builds:
    /usr/bin/python3 tests/reference/make_hf_mbart_fixtures.py HFENV

MBart50Tokenizer (slow): the SentencePiece ids shifted by one behind <s> <pad> </s> <unk>, mBART-50's 52
language codes (en_XX, de_DE, ...) after them and <mask> last; the source is [en_XX] + pieces + [</s>], the
target starts from </s> (decoder_start_token_id 2) with de_DE forced first (forced_bos_token_id), and </s> is
forced at the length limit (MBartConfig's forced_eos_token_id 2).
Each model: 2 + 2 layers, 16 wide, 4 heads, GELU, pre-norm with final layer norms, learned positions from row 2
(MBartLearnedPositionalEmbedding), a LayerNorm over embeddings + positions (layernorm_embedding), a random
final_logits_bias; embeddings scaled by sqrt(d_model) as mBART-50's checkpoints are (scale_embedding true), or
not (MBartConfig's default, mbart50_unscaled_tiny). reference.json and reference.safetensors hold the ids, the
teacher-forced logits, and greedy and beam-4 generations, as make_hf_m2m100_fixtures.py's.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_hf_fixtures import OUT, perturb, save_and_reload, seeded, write_reference  # noqa: E402
from make_hf_m2m100_fixtures import run_cases, summary, tiny_bpe  # noqa: E402

import torch  # noqa: E402
from transformers import MBart50Tokenizer, MBartConfig, MBartForConditionalGeneration  # noqa: E402


def config(vocab, scale):
    return MBartConfig(vocab_size=vocab, d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                       decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
                       activation_function="gelu", scale_embedding=scale, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                       decoder_start_token_id=2, forced_eos_token_id=2, init_std=0.3, dropout=0.1, max_length=40, num_beams=4)


def make(name, spm_model, scale, eos_bias):
    directory = os.path.join(OUT, name)
    os.makedirs(directory, exist_ok=True)
    tokenizer = MBart50Tokenizer(spm_model, src_lang="en_XX", tgt_lang="de_DE")
    vocab = tokenizer.vocab_size
    assert vocab == len(tokenizer), (vocab, len(tokenizer))
    model = seeded(MBartForConditionalGeneration, config(vocab, scale))
    perturb(model, 0.1)
    # final_logits_bias is a buffer, which perturb leaves at 0; </s>'s bias makes some generations end early (beam
    # search before greedy), others run to max_length.
    with torch.no_grad():
        model.final_logits_bias.normal_(0.0, 0.05)
        model.final_logits_bias[0, 2] += eos_bias
    model.eval()
    model, _ = save_and_reload(model, tokenizer, directory, MBartForConditionalGeneration, MBart50Tokenizer)
    tok = MBart50Tokenizer.from_pretrained(directory, src_lang="en_XX", tgt_lang="de_DE")
    forced = tok.lang_code_to_id["de_DE"]
    cases, tensors = run_cases(model, tok, name, forced)
    record = summary(name, "tests/reference/make_hf_mbart_fixtures.py", "MBartForConditionalGeneration", "MBart50Tokenizer", vocab,
                     "en_XX", "de_DE", forced, cases, scale_embedding=scale)
    write_reference(directory, record, tensors)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model = tiny_bpe(tmp)
        make("mbart50_tiny", model, True, 4.3)
        make("mbart50_unscaled_tiny", model, False, 4.0)


if __name__ == "__main__":
    main()
