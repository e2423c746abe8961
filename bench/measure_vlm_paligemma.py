#!/usr/bin/env python3
"""Ground truth for PaliGemma (issue 28 item 1): PaliGemma-3B-pt-224 with LoRA at full size, one 224 px image (256
patches through the SigLIP tower, each projected to one image token by PaliGemmaMultiModalProjector's Linear), <bos>,
a 16-token prompt and a suffix (512 text tokens in all), two training steps under FakeTensorMode and the project's
MemTracker (trainlint.verify.measure.StepMemTracker), with the installed transformers (5.25.0) and peft (0.21.2).

The model is `PaliGemmaForConditionalGeneration` built from google/paligemma-3b-pt-224's config.json (the
knowledge/models.json entry and its `vision` source: a Gemma text model, hidden 2048, 18 layers, 8 heads, 1 KV head,
head_dim 256, intermediate 16384, vocab 257152, tied; vision_config SigLIP at 224 px: 27 layers, hidden 1152,
intermediate 4304, 16 heads, patch 14, no head; projection_dim 2048) in bf16, SDPA. The input carries token_type_ids
as PaliGemmaProcessor returns them with a suffix (0 on the image and prompt, 1 on the suffix), so the prefix attends
to itself bidirectionally as in training. `--check-fake` runs a tiny PaliGemma real and fake, and their peaks must
agree to the byte.

    python bench/measure_vlm_paligemma.py              # writes bench/vlm_measurements_paligemma.json
    python bench/measure_vlm_paligemma.py --check-fake
    python bench/vlm_accuracy.py --paligemma           # the estimate vs the measurements
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import _vlm_harness as H

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "vlm_measurements_paligemma.json"

# google/paligemma-3b-pt-224 config.json (the catalog entry's geometry; unstated fields: GemmaConfig's and
# SiglipVisionConfig's defaults, transformers 5.25.0)
TEXT_3B = dict(model_type="gemma", vocab_size=257152, hidden_size=2048, num_hidden_layers=18, num_attention_heads=8,
               num_key_value_heads=1, head_dim=256, intermediate_size=16384)
VISION_224 = dict(model_type="siglip_vision_model", hidden_size=1152, image_size=224, intermediate_size=4304,
                  num_attention_heads=16, num_hidden_layers=27, patch_size=14, vision_use_head=False)
TOP = dict(projection_dim=2048, image_token_index=257152 - 100)
PROMPT = 16  # prompt tokens after <bos>; the rest of the text is the suffix
ATTN = ["q_proj", "k_proj", "v_proj", "o_proj"]  # SigLIP's q/k/v_proj match too: the tower is adapted
# (name, text tokens, LoRA targets, gradient checkpointing)
CONFIGS = [
    ("paligemma-3b-224_lora-attn_1img-256_gc", 512, ATTN, True),
    ("paligemma-3b-224_lora-attn_1img-256_nogc", 512, ATTN, False),
]


def measure(name, text, targets, gc_on, text_cfg=TEXT_3B, vision_cfg=VISION_224, top=TOP, fake=True):
    import torch
    from transformers import PaliGemmaConfig, PaliGemmaForConditionalGeneration

    t0 = time.perf_counter()
    cfg = PaliGemmaConfig(text_config=dict(text_cfg), vision_config=dict(vision_cfg), **top)
    tokens = (vision_cfg["image_size"] // vision_cfg["patch_size"]) ** 2
    image = [top["image_token_index"]] * tokens
    vocab = text_cfg["vocab_size"]
    ids_list = image + [2] + [10 + i % (vocab // 2 - 10) for i in range(text)]
    types = [0] * (len(image) + 1 + PROMPT) + [1] * (text - PROMPT)
    torch.manual_seed(0)
    # SigLIP's _init_weights draws a truncated normal, whose rejection loop reads values (data-dependent under
    # FakeTensors): under fake tensors the weights' values do not matter, so it leaves them as they are
    with H.fake_tensors(fake, skip_trunc_normal=True):
        model = H.build_bf16(lambda: PaliGemmaForConditionalGeneration._from_config(cfg, attn_implementation="sdpa"))
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
        rec = {"name": name, "family": "PaliGemma", "images": 1, "image_tokens_per_image": tokens,
               "tower_positions_per_image": side * side, "text_tokens": text, "seq": len(ids_list), "lora": lora,
               "gradient_checkpointing": gc_on, "use_reentrant": False if gc_on else None, "dtype": "bf16",
               "attn": "sdpa", "token_type_ids": True, "optimizer": "adamw (torch for-loop)", "params": params,
               "tower_params": tower, "projector_params": projector, **measured, **H.versions(fake, t0)}
        del opt, model, trainable
    return rec


TINY_TEXT = dict(model_type="gemma", vocab_size=400, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=1, head_dim=16, intermediate_size=128)
TINY_VISION = dict(model_type="siglip_vision_model", hidden_size=64, image_size=56, intermediate_size=96,
                   num_attention_heads=4, num_hidden_layers=3, patch_size=14, vision_use_head=False)
TINY_TOP = dict(projection_dim=64, image_token_index=392)


def check_fake() -> int:
    """A tiny PaliGemma, real vs fake: the peaks must agree."""
    return H.check_pairs([(f"{ATTN} gc={gc_on}", ("tiny", 40, ATTN, gc_on, TINY_TEXT, TINY_VISION, TINY_TOP))
                          for gc_on in (True, False)], measure)


def main(argv: list[str]) -> int:
    if "--check-fake" in argv:
        return check_fake()
    return H.run_configs(argv, CONFIGS, measure, OUT)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main(sys.argv[1:]))
