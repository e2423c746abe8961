#!/usr/bin/env python3
"""Ground truth for Idefics3 (issue 28 item 1): Idefics3-8B-Llama3 with LoRA at full size, one image split into 4 x 4
tiles of 364 px plus the global image (17 tiles through the SigLIP-copy tower, 26 x 26 = 676 patches each, 11,492 in
all; the connector's 2 x 2 pixel shuffle makes 169 tokens a tile) and 512 text tokens, two training steps under
FakeTensorMode and the project's MemTracker (trainlint.verify.measure.StepMemTracker), with the installed
transformers (5.25.0) and peft (0.21.2).

The model is `Idefics3ForConditionalGeneration` built from HuggingFaceM4/Idefics3-8B-Llama3's config.json (the
knowledge/models.json entry and its `vision` source: a Llama text model, hidden 4096, 32 layers, 32 heads, 8 KV
heads, intermediate 14336, vocab 128259, untied; vision_config hidden 1152, 27 layers, 16 heads, intermediate 4304,
patch 14, image 364; scale_factor 2) in bf16, SDPA. The text is laid out as Idefics3Processor lays it out
(knowledge/vision_towers.py idefics3_tokens: per tile a fake token, a <row_i_col_j> token and 169 image tokens, a
newline per row, then the global image), with ordinary token ids standing in for the special ones.

Under fake tensors, Idefics3Model.get_image_features' removal of all-zero padding images (a boolean index and a
`.tolist()`, data-dependent: 5.25.0 modeling_idefics3.py l.553-569) cannot run; `_features` below does what it does
for a batch with no padding image (every tile is real): the same tower and connector calls; and the tower's
attention mask, skipped on real tensors because no patch is masked, is skipped under fake tensors too (`measure`).
`--check-fake` runs a
tiny Idefics3 with the library's own get_image_features (real tensors) and with `_features` (fake tensors): their
peaks must agree to the byte.

    python bench/measure_vlm_idefics3.py              # writes bench/vlm_measurements_idefics3.json
    python bench/measure_vlm_idefics3.py --check-fake
    python bench/vlm_accuracy.py --idefics3           # the estimate vs the measurements
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import _vlm_harness as H

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "vlm_measurements_idefics3.json"

# HuggingFaceM4/Idefics3-8B-Llama3 config.json (the catalog entry's geometry; unstated fields: LlamaConfig's and
# Idefics3VisionConfig's defaults, transformers 5.25.0)
TEXT_8B = dict(model_type="llama", vocab_size=128259, hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=8, intermediate_size=14336, rms_norm_eps=1e-5)
VISION_8B = dict(hidden_size=1152, image_size=364, intermediate_size=4304, num_attention_heads=16,
                 num_hidden_layers=27, patch_size=14)
TOP = dict(scale_factor=2, image_token_id=128257, tie_word_embeddings=False)
ATTN = ["q_proj", "k_proj", "v_proj", "o_proj"]  # the tower's q/k/v_proj match too: the tower is adapted
# (name, text tokens, LoRA targets, gradient checkpointing)
CONFIGS = [
    ("idefics3-8b_lora-attn_1img-17tiles_gc", 512, ATTN, True),
    ("idefics3-8b_lora-attn_1img-17tiles_nogc", 512, ATTN, False),
]
GRID = 4  # rows = cols of tiles (the processor's longest edge 4 x 364 px)


def _prompt(seq: int, image: int, vocab: int) -> list[int]:
    """An image's prompt as Idefics3Processor lays it out, other ids standing in for the special tokens."""
    other = 7
    out: list[int] = []
    for _row in range(GRID):
        for _col in range(GRID):
            out += [other, other] + [image] * seq
        out.append(other)
    return out + [other] + [other, other] + [image] * seq + [other]


def _features(self, pixel_values, pixel_attention_mask=None, **kwargs):
    """Idefics3Model.get_image_features for a batch without padding images (see the module docstring)."""
    import torch

    batch, num, channels, height, width = pixel_values.shape
    pixel_values = pixel_values.to(dtype=self.dtype).view(batch * num, channels, height, width)
    mask = torch.ones((batch * num, height, width), dtype=torch.bool, device=pixel_values.device)
    size = self.config.vision_config.patch_size
    grid = mask.unfold(dimension=1, size=size, step=size).unfold(dimension=2, size=size, step=size)
    patches = (grid.sum(dim=(-1, -2)) > 0).bool()
    kwargs.pop("return_dict", None)  # the caller's (Idefics3Model.forward passes return_dict=True)
    out = self.vision_model(pixel_values=pixel_values, patch_attention_mask=patches, return_dict=True, **kwargs)
    features = self.connector(out.last_hidden_state)
    out.pooler_output = [features.reshape(-1, features.shape[-1])]
    return out


def measure(name, text, targets, gc_on, text_cfg=TEXT_8B, vision_cfg=VISION_8B, top=TOP, fake=True, patched=True):
    import types

    import torch
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration

    t0 = time.perf_counter()
    cfg = Idefics3Config(text_config=dict(text_cfg), vision_config=dict(vision_cfg), **top)
    side = vision_cfg["image_size"] // vision_cfg["patch_size"]
    seq = (side // top["scale_factor"]) ** 2
    vocab = text_cfg["vocab_size"]
    image = _prompt(seq, top["image_token_id"], vocab)
    ids_list = [1] + image + [10 + i % (vocab // 2 - 10) for i in range(text)]
    torch.manual_seed(0)
    # the tower's all-true patch mask: on real tensors SDPA's mask is skipped (5.25.0 masking_utils.py
    # _ignore_bidirectional_mask_sdpa: padding_mask.all()), on fake ones it cannot be read (is_tracing) and a
    # tiles x patches^2 mask would be built and kept; every tile here is whole, so the fake run skips it too
    import transformers.models.idefics3.modeling_idefics3 as modeling
    bidirectional = modeling.create_bidirectional_mask
    if fake:
        modeling.create_bidirectional_mask = lambda *args, **kwargs: None
    try:
        # see measure_vlm_gemma3.py: the truncated normal's rejection loop reads values
        with H.fake_tensors(fake, skip_trunc_normal=True):
            model = H.build_bf16(lambda: Idefics3ForConditionalGeneration._from_config(cfg, attn_implementation="sdpa"))
            if patched:
                model.model.get_image_features = types.MethodType(_features, model.model)
            params = sum(p.numel() for p in model.parameters())
            tower = sum(p.numel() for p in model.model.vision_model.parameters())
            projector = sum(p.numel() for p in model.model.connector.parameters())
            model, trainable, lora, opt = H.lora_for_training(model, targets, ".vision_model.", gc_on)
            ids = torch.tensor([ids_list])
            size = vision_cfg["image_size"]
            tiles = GRID * GRID + 1
            pixels = torch.randn(1, tiles, 3, size, size, dtype=torch.float32)  # the processor's fp32 pixel_values

            def fwd():
                return model(input_ids=ids, pixel_values=pixels, labels=ids, use_cache=False).loss

            measured = H.two_steps(model, opt, fwd, ids, pixels)
            rec = {"name": name, "family": "Idefics3", "images": 1, "tiles_per_image": tiles,
                   "image_tokens_per_image": len(image), "tower_positions_per_image": side * side * tiles,
                   "text_tokens": text, "seq": len(ids_list), "lora": lora,
                   "gradient_checkpointing": gc_on, "use_reentrant": False if gc_on else None, "dtype": "bf16",
                   "attn": "sdpa", "optimizer": "adamw (torch for-loop)", "params": params,
                   "tower_params": tower, "projector_params": projector, **measured, **H.versions(fake, t0)}
            del opt, model, trainable
    finally:
        modeling.create_bidirectional_mask = bidirectional
    return rec


TINY_TEXT = dict(model_type="llama", vocab_size=400, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, intermediate_size=128)
TINY_VISION = dict(hidden_size=64, image_size=56, intermediate_size=96, num_attention_heads=4, num_hidden_layers=3,
                   patch_size=14)
TINY_TOP = dict(scale_factor=2, image_token_id=392, tie_word_embeddings=False)


def check_fake() -> int:
    """A tiny Idefics3: the library's get_image_features on real tensors vs `_features` on fake ones."""
    # the real run with the library's get_image_features (patched=False), the fake one with `_features`
    return H.check_pairs([(f"gc={gc_on}", ("tiny", 40, ATTN, gc_on, TINY_TEXT, TINY_VISION, TINY_TOP))
                          for gc_on in (True, False)],
                         lambda *args, fake: measure(*args, fake=fake, patched=fake))


def main(argv: list[str]) -> int:
    if "--check-fake" in argv:
        return check_fake()
    return H.run_configs(argv, CONFIGS, measure, OUT)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main(sys.argv[1:]))
