#!/usr/bin/env python3
"""Ground truth for a SigLIP family (issue 28 item 1): Gemma-3-4B-it with LoRA at full size, one 896 px image (4,096
patches through the SigLIP tower, pooled 4 x 4 into 256 image tokens, between <start_of_image> and <end_of_image>) and
512 text tokens, two training steps under FakeTensorMode and the project's MemTracker
(trainlint.verify.measure.StepMemTracker), with the installed transformers (5.25.0) and peft (0.21.2).

The model is `Gemma3ForConditionalGeneration` built from google/gemma-3-4b-it's config.json (knowledge/models.json
entry and its `vision` source: text hidden 2560, 34 layers, 8 heads, 4 KV heads, head_dim 256, intermediate 10240,
vocab 262208, tied; vision_config SigLIP at 896 px: 27 layers, hidden 1152, intermediate 4304, 16 heads, patch 14,
no head; mm_tokens_per_image 256) in bf16, SDPA. The input carries token_type_ids (1 on the image tokens) as
Gemma3Processor returns them, so the image attends to itself bidirectionally as in training. `--check-fake` runs a
tiny Gemma 3 real and fake, and their peaks must agree to the byte.

The LoRA targets: q_proj / k_proj / v_proj / o_proj, which also name SigLIP's q/k/v_proj (so the tower is adapted:
knowledge/vision_towers.py), and a regex over the text decoder only. Run from the repository root:

    python bench/measure_vlm_gemma3.py              # writes bench/vlm_measurements_gemma3.json
    python bench/measure_vlm_gemma3.py --check-fake
    python bench/vlm_accuracy.py --gemma3           # the estimate vs the measurements
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import _vlm_harness as H

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "vlm_measurements_gemma3.json"

# google/gemma-3-4b-it config.json text_config (the catalog entry's geometry; unstated fields: Gemma3TextConfig's
# defaults, transformers 5.25.0)
TEXT_4B = dict(model_type="gemma3_text", vocab_size=262208, hidden_size=2560, num_hidden_layers=34,
               num_attention_heads=8, num_key_value_heads=4, head_dim=256, intermediate_size=10240,
               query_pre_attn_scalar=256, sliding_window=1024)
VISION_SO400M = dict(model_type="siglip_vision_model", hidden_size=1152, image_size=896, intermediate_size=4304,
                     num_attention_heads=16, num_hidden_layers=27, patch_size=14, vision_use_head=False)
TOP = dict(mm_tokens_per_image=256, boi_token_index=255999, eoi_token_index=256000, image_token_index=262144)
ATTN = ["q_proj", "k_proj", "v_proj", "o_proj"]  # SigLIP's q/k/v_proj match too: the tower is adapted
TEXT_ONLY = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj)"
# (name, text tokens, LoRA targets, gradient checkpointing)
CONFIGS = [
    ("gemma-3-4b_lora-attn_1img-256_gc", 512, ATTN, True),
    ("gemma-3-4b_lora-attn_1img-256_nogc", 512, ATTN, False),
    ("gemma-3-4b_lora-text-attn_1img-256_gc", 512, TEXT_ONLY, True),
    ("gemma-3-4b_lora-text-attn_1img-256_nogc", 512, TEXT_ONLY, False),
]


def measure(name, text, targets, gc_on, text_cfg=TEXT_4B, vision_cfg=VISION_SO400M, top=TOP, fake=True):
    import torch
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration

    t0 = time.perf_counter()
    cfg = Gemma3Config(text_config=dict(text_cfg), vision_config=dict(vision_cfg), **top)
    tokens = top["mm_tokens_per_image"]
    image = [top["boi_token_index"]] + [top["image_token_index"]] * tokens + [top["eoi_token_index"]]
    vocab = text_cfg["vocab_size"]
    ids_list = [2] + image + [10 + i % (vocab // 2 - 10) for i in range(text)]
    types = [1 if t == top["image_token_index"] else 0 for t in ids_list]
    torch.manual_seed(0)
    # SigLIP's _init_weights draws a truncated normal, whose rejection loop reads values (data-dependent under
    # FakeTensors): under fake tensors the weights' values do not matter, so it leaves them as they are
    with H.fake_tensors(fake, skip_trunc_normal=True):
        model = H.build_bf16(lambda: Gemma3ForConditionalGeneration._from_config(cfg, attn_implementation="sdpa"))
        params = sum(p.numel() for p in model.parameters())
        tower = sum(p.numel() for p in model.model.vision_tower.parameters())
        projector = sum(p.numel() for p in model.model.multi_modal_projector.parameters())
        model, trainable, lora, opt = H.lora_for_training(model, targets, ".vision_tower.", gc_on)
        ids = torch.tensor([ids_list])
        token_types = torch.tensor([types])
        size = vision_cfg["image_size"]
        pixels = torch.randn(1, 3, size, size, dtype=torch.float32)  # the processor's fp32 pixel_values

        def fwd():
            return model(input_ids=ids, pixel_values=pixels, token_type_ids=token_types, labels=ids,
                         use_cache=False).loss

        measured = H.two_steps(model, opt, fwd, ids, pixels, token_types)
        side = size // vision_cfg["patch_size"]
        rec = {"name": name, "family": "Gemma 3", "images": 1, "image_tokens_per_image": tokens,
               "tower_positions_per_image": side * side, "text_tokens": text, "seq": len(ids_list), "lora": lora,
               "gradient_checkpointing": gc_on, "use_reentrant": False if gc_on else None, "dtype": "bf16",
               "attn": "sdpa", "token_type_ids": True, "optimizer": "adamw (torch for-loop)", "params": params,
               "tower_params": tower, "projector_params": projector, **measured, **H.versions(fake, t0)}
        del opt, model, trainable
    return rec


TINY_TEXT = dict(model_type="gemma3_text", vocab_size=400, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, intermediate_size=128, sliding_window=16)
TINY_VISION = dict(model_type="siglip_vision_model", hidden_size=64, image_size=112, intermediate_size=96,
                   num_attention_heads=4, num_hidden_layers=3, patch_size=14, vision_use_head=False)
TINY_TOP = dict(mm_tokens_per_image=16, boi_token_index=390, eoi_token_index=391, image_token_index=392)


def check_fake() -> int:
    """A tiny Gemma 3, real vs fake: the peaks must agree."""
    return H.check_pairs([(f"{targets} gc={gc_on}", ("tiny", 40, targets, gc_on, TINY_TEXT, TINY_VISION, TINY_TOP))
                          for targets in (ATTN, TEXT_ONLY) for gc_on in (True, False)], measure)


def main(argv: list[str]) -> int:
    if "--check-fake" in argv:
        return check_fake()
    return H.run_configs(argv, CONFIGS, measure, OUT)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main(sys.argv[1:]))
