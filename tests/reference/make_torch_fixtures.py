#!/usr/bin/python3
"""Writes the PyTorch checkpoints (torch.save's zip archives, pickle protocol 2) that tfm's reader of
pytorch_model.bin is tested on, with PyTorch's own torch.save: Debian's interpreter and its torch 1.13,
offline:
    /usr/bin/python3 tests/reference/make_torch_fixtures.py
Outputs go to tests/fixtures/torch/ (committed, so that CI needs no torch) and fuzz/corpus/torch/:

- state_dict.bin: a state dict (an OrderedDict with _metadata, as Module.state_dict() gives) of every
  dtype tfm reads (f32, f16, bf16, f64, i64, i32, i8, u8, bool), a transposed view, two views at
  different offsets of one storage, one tensor under two names (tied weights), an expanded buffer
  (position_ids, stride 0), a 0-d tensor, an empty one and an nn.Parameter; expected.safetensors holds
  each one's values as contiguous float32 (tests/reference/safetensors_io.py).
- compressed.bin: state_dict.bin's entries deflated (torch never writes them so; refused).
- legacy.bin: torch.save's format before PyTorch 1.6 (_use_new_zipfile_serialization=False; refused).
- evil_system.bin, evil_eval.bin: torch.save of objects whose pickles call os.system and builtins.eval
  (never loaded here, nor anywhere: refused by name).
- marian_multi_target_tiny/pytorch_model.bin and gpt2_layer_scaled_tiny/pytorch_model-0000{1,2}-of-00002.bin
  with pytorch_model.bin.index.json: the weights of tests/fixtures/hf's directories of those names as
  transformers' save_pretrained(safe_serialization=False) writes them (tied weights under each of their
  names, one storage; the GPT-2's in two shards and an index).
"""
import collections
import json
import os
import sys
import zipfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402

OUT = os.path.join(HERE, "..", "fixtures", "torch")
HF = os.path.join(HERE, "..", "fixtures", "hf")
CORPUS = os.path.join(HERE, "..", "..", "fuzz", "corpus", "torch")


def state_dict():
    sd = collections.OrderedDict()
    sd["f32"] = torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.25 - 0.5
    sd["f16"] = torch.tensor([1.0, -2.5, 65504.0, 2.0 ** -24, -0.0], dtype=torch.float16)
    sd["bf16"] = torch.tensor([1.0, -2.5, 3.140625], dtype=torch.bfloat16)
    sd["f64"] = torch.tensor([0.1, -1e-3, 12345.678], dtype=torch.float64)
    sd["i64"] = torch.tensor([0, 1, -1, 2 ** 40, -2 ** 62], dtype=torch.int64)
    sd["i32"] = torch.tensor([[7, -8]], dtype=torch.int32)
    sd["i8"] = torch.tensor([-128, 127], dtype=torch.int8)
    sd["u8"] = torch.tensor([0, 255, 7], dtype=torch.uint8)
    sd["bool"] = torch.tensor([True, False, True])
    sd["transposed"] = (torch.arange(12, dtype=torch.float32).reshape(3, 4) / 8).t()  # [4, 3], strides (1, 4)
    whole = torch.arange(10, dtype=torch.float32) - 4.5
    sd["shared_head"] = whole[:4]  # offset 0
    sd["shared_tail"] = whole[6:].view(2, 2)  # offset 6
    tied = torch.linspace(-1, 1, 8).reshape(2, 4)
    sd["tied_a"] = tied
    sd["tied_b"] = tied
    sd["position_ids"] = torch.arange(5).expand((1, -1))  # strides (0, 1), as transformers registers it
    sd["scalar"] = torch.tensor(3.5)
    sd["param"] = torch.nn.Parameter(torch.tensor([0.5, -0.5]))
    sd["empty"] = torch.zeros(0, 3)  # last: tfm's safetensors reader wants no other tensor's data where its (empty) data is
    sd._metadata = collections.OrderedDict([("", {"version": 1}), ("layer", {"version": 2})])
    assert not sd["transposed"].is_contiguous() and sd["shared_tail"].storage_offset() == 6
    return sd


class Call:
    """An object whose pickle calls fn(*args) when loaded (what a malicious checkpoint holds)."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def deflated(src, dst):
    with zipfile.ZipFile(src) as i, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as o:
        for name in i.namelist():
            o.writestr(name, i.read(name))


def hf_state_dict(name, aliases):
    """A fixture directory's weights as transformers' torch.save writes them: each tied alias one more
    name for the same tensor (one storage)."""
    arrays, _ = safetensors_io.load(os.path.join(HF, name, "model.safetensors"))
    sd = collections.OrderedDict((k, torch.from_numpy(v.copy())) for k, v in arrays.items())
    for source, copies in aliases.items():
        for c in copies:
            sd[c] = sd[source]
    return sd


def main():
    os.makedirs(OUT, exist_ok=True)
    os.makedirs(CORPUS, exist_ok=True)
    sd = state_dict()
    torch.save(sd, os.path.join(OUT, "state_dict.bin"))
    safetensors_io.save(os.path.join(OUT, "expected.safetensors"),
                        collections.OrderedDict((k, v.detach().double()) for k, v in sd.items()))
    deflated(os.path.join(OUT, "state_dict.bin"), os.path.join(OUT, "compressed.bin"))
    torch.save(collections.OrderedDict([("w", torch.ones(2))]), os.path.join(OUT, "legacy.bin"),
               _use_new_zipfile_serialization=False)
    torch.save({"w": Call(os.system, ("echo pwned",))}, os.path.join(OUT, "evil_system.bin"))
    torch.save({"w": Call(eval, ("1 + 1",))}, os.path.join(OUT, "evil_eval.bin"))

    marian = hf_state_dict("marian_multi_target_tiny", {"model.shared.weight": [
        "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"]})
    os.makedirs(os.path.join(OUT, "marian_multi_target_tiny"), exist_ok=True)
    torch.save(marian, os.path.join(OUT, "marian_multi_target_tiny", "pytorch_model.bin"))

    wte = "transformer.wte.weight"
    gpt2 = hf_state_dict("gpt2_layer_scaled_tiny", {wte: ["lm_head.weight"]})
    names = [n for n in gpt2 if n != "lm_head.weight"]
    shards = [names[:len(names) // 2], names[len(names) // 2:]]
    for shard in shards:  # the tied head beside its embedding, in one storage
        shard += ["lm_head.weight"] if wte in shard else []
    out = os.path.join(OUT, "gpt2_layer_scaled_tiny")
    os.makedirs(out, exist_ok=True)
    weight_map = {}
    for i, shard in enumerate(shards):
        file = "pytorch_model-%05d-of-%05d.bin" % (i + 1, len(shards))
        torch.save(collections.OrderedDict((n, gpt2[n]) for n in shard), os.path.join(out, file))
        weight_map.update({n: file for n in shard})
    size = sum(t.numel() * t.element_size() for t in gpt2.values())
    with open(os.path.join(out, "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": size}, "weight_map": weight_map}, f, indent=2, sort_keys=True)

    for name in ("state_dict.bin", "legacy.bin", "evil_system.bin"):
        with open(os.path.join(OUT, name), "rb") as i, open(os.path.join(CORPUS, name), "wb") as o:
            o.write(i.read())
    with zipfile.ZipFile(os.path.join(OUT, "state_dict.bin")) as z:  # the pickle alone, for the fuzzer's second reader
        with open(os.path.join(CORPUS, "state_dict.pkl"), "wb") as o:
            o.write(z.read(next(n for n in z.namelist() if n.endswith("/data.pkl"))))


if __name__ == "__main__":
    main()
