#!/usr/bin/python3
"""Writes tiny Hugging Face ViT and DeiT directories, with what transformers' own code computes from them: the
layouts people download that ../shared/fixtures/hf's vit_tiny (ViTForImageClassification, ViT's processor) does
not show.

Run with Debian's interpreter (and its python3-pil, Pillow 9.4) inside the offline transformers 4.39
environment that ../shared/tools/hf-reference/setup.sh builds:
    /usr/bin/python3 tests/reference/make_hf_vit_fixtures.py HFENV
Outputs go to tests/fixtures/hf/<name>/ (committed): the files save_pretrained writes (the processor's file
written as the Hub's are, where noted), two PNG images, reference.json and reference.safetensors (float32).

- vit_base_tiny: ViTModel with its pooler, no classifier (as google/vit-base-patch16-224-in21k), saved without
  the "vit." prefix; ViT's processor (bilinear resize to 32 x 32, mean and std 0.5). References: pixel_values,
  last_hidden_state, pooler_output.
- vit_deit_processor_tiny: ViTForImageClassification (5 labels) with DeiT's processor file as
  facebook/deit-*-patch16-224 have it ("feature_extractor_type": "DeiTFeatureExtractor", "size": 36 for 256,
  "crop_size": 32 for 224, resample 3, ImageNet mean and std). References: pixel_values, last_hidden_state,
  logits.
- deit_distilled_tiny: model_type deit, DeiTForImageClassificationWithTeacher (4 labels): the distillation
  token, two classifiers averaged; DeiTImageProcessor saved by save_pretrained (size {"height": 40, "width":
  36}, crop 32, bicubic, ImageNet mean and std). References: pixel_values, last_hidden_state, logits,
  cls_logits, distillation_logits.
- deit_base_tiny: DeiTModel (its pooler, no classifier, no "deit." prefix); DeiTImageProcessor with its own
  defaults but the sizes (36 x 36, crop 32: mean and std 0.5). References: pixel_values, last_hidden_state,
  pooler_output.

The images: image0 is 24 x 32 (height x width: enlarged by every resize), image1 is 48 x 44 (shrunk); smooth
gradients plus noise from numpy's seed 0, so that bicubic's overshoot is clipped somewhere.
"""
import json
import os
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "hf")

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HFENV", "/work/hfenv"))
import hfenv  # noqa: E402,F401

import numpy as np  # noqa: E402
import PIL  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402
from transformers import (AutoImageProcessor, DeiTConfig, DeiTForImageClassificationWithTeacher, DeiTImageProcessor, DeiTModel,  # noqa: E402
                          ViTConfig, ViTForImageClassification, ViTImageProcessor, ViTModel)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_hf_fixtures import write_reference  # noqa: E402  (the same reference.json and reference.safetensors)

IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
SIZES = [(24, 32), (48, 44)]  # (height, width)


def tiny(config_class, **extra):
    return config_class(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, hidden_act="gelu", layer_norm_eps=1e-12, qkv_bias=True, **extra)


def labelled(count):
    names = ["cat", "dog", "bird", "fish", "frog"][:count]
    return {"id2label": dict(enumerate(names)), "label2id": {n: i for i, n in enumerate(names)}}


def seeded(model_class, config):
    """The model with HF's own init, from seed 0, every 1-D parameter moved off 0/1 (as the shared fixtures do)."""
    torch.manual_seed(0)
    model = model_class(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
            else:
                p.add_(torch.randn_like(p) * 0.05)  # the tokens and positions start at 0 or tiny: give them some
    return model


def write_images(directory):
    rng = np.random.default_rng(0)
    paths = []
    for i, (h, w) in enumerate(SIZES):
        y, x = np.mgrid[0:h, 0:w]
        base = np.stack([255 * x / (w - 1), 255 * y / (h - 1), 128 + 100 * np.sin((x + y) / 3.0)], axis=-1)
        pixels = np.clip(base + rng.normal(0, 40, base.shape), 0, 255).astype(np.uint8)
        path = os.path.join(directory, f"image{i}.png")
        Image.fromarray(pixels, "RGB").save(path)
        paths.append(path)
    return paths


def save_and_reload(model, directory, model_class):
    model.save_pretrained(directory, safe_serialization=True)
    reloaded = model_class.from_pretrained(directory).eval()
    before, after = model.state_dict(), reloaded.state_dict()
    for name, t in before.items():
        assert torch.equal(t, after[name]), name
    return reloaded


def pixel_values(directory, paths):
    """As a pipeline computes them: AutoImageProcessor from the directory, the images read by PIL as RGB."""
    processor = AutoImageProcessor.from_pretrained(directory)
    images = [Image.open(p).convert("RGB") for p in paths]
    return type(processor).__name__, processor(images=images, return_tensors="pt")["pixel_values"]


def make(name, model, model_class, write_processor, outputs):
    directory = os.path.join(OUT, name)
    os.makedirs(directory, exist_ok=True)
    reloaded = save_and_reload(model, directory, model_class)
    write_processor(directory)
    paths = write_images(directory)
    processor, pixels = pixel_values(directory, paths)
    with torch.no_grad():
        out = reloaded(pixel_values=pixels)
        body = getattr(reloaded, "vit", None) or getattr(reloaded, "deit", None)  # a task model's base, under its prefix
        hidden = body(pixel_values=pixels).last_hidden_state if body is not None else out.last_hidden_state
    tensors = {"pixel_values": pixels, "last_hidden_state": hidden, **{k: getattr(out, k) for k in outputs if k != "last_hidden_state"}}
    stored = sorted(reloaded.state_dict().keys())
    write_reference(directory, {"model_class": model_class.__name__, "image_processor": processor, "pillow": PIL.__version__,
                                "images": [os.path.basename(p) for p in paths], "image_sizes_hw": SIZES, "stored_tensors": stored},
                    tensors)


def hub_deit_processor_file(directory):
    """facebook/deit-base-patch16-224's preprocessor_config.json, at this model's scale."""
    with open(os.path.join(directory, "preprocessor_config.json"), "w") as f:
        json.dump({"crop_size": 32, "do_center_crop": True, "do_normalize": True, "do_resize": True,
                   "feature_extractor_type": "DeiTFeatureExtractor", "image_mean": IMAGENET_MEAN, "image_std": IMAGENET_STD,
                   "resample": 3, "size": 36}, f, indent=2)


def main():
    make("vit_base_tiny", seeded(ViTModel, tiny(ViTConfig)), ViTModel,
         lambda d: ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(d),
         ["last_hidden_state", "pooler_output"])
    make("vit_deit_processor_tiny", seeded(ViTForImageClassification, tiny(ViTConfig, **labelled(5))), ViTForImageClassification,
         hub_deit_processor_file, ["logits"])
    deit = seeded(DeiTForImageClassificationWithTeacher, tiny(DeiTConfig, **labelled(4)))
    make("deit_distilled_tiny", deit, DeiTForImageClassificationWithTeacher,
         lambda d: DeiTImageProcessor(size={"height": 40, "width": 36}, crop_size={"height": 32, "width": 32}, image_mean=IMAGENET_MEAN,
                                      image_std=IMAGENET_STD).save_pretrained(d),
         ["logits", "cls_logits", "distillation_logits"])
    make("deit_base_tiny", seeded(DeiTModel, tiny(DeiTConfig)), DeiTModel,
         lambda d: DeiTImageProcessor(size={"height": 36, "width": 36}, crop_size={"height": 32, "width": 32}).save_pretrained(d),
         ["last_hidden_state", "pooler_output"])


if __name__ == "__main__":
    main()
