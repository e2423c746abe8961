#!/usr/bin/env python3
"""Ground truth for a vision-language family beyond Qwen-VL (issue 28 item 2): LLaVA-1.5-7B with LoRA at full size,
one 336 px image (576 image tokens) and 512 text tokens, two training steps under FakeTensorMode and the project's
MemTracker (trainlint.verify.measure.StepMemTracker), with the installed transformers (5.25.0) and peft (0.21.2).

The model is `LlavaForConditionalGeneration` built from llava-hf/llava-1.5-7b-hf's config.json (knowledge/models.json
entry and its source: text_config Llama 7B, vocab 32064; vision_config CLIP ViT-L/14 at 336 px: 24 layers, hidden
1024, intermediate 4096, 16 heads, patch 14; vision_feature_layer -2, strategy "default", projector GELU) in bf16,
SDPA. LLaVA needs no change to run on FakeTensors (no data-dependent split in its tower, unlike Qwen2.5-VL's:
bench/measure_vlm.py); `--check-fake` runs a tiny LLaVA real and fake, and their peaks must agree to the byte.

The LoRA targets: q_proj / k_proj / v_proj / o_proj, which also name CLIP's attention Linears (so the tower is
adapted: knowledge/vision_towers.py), and a regex over the text decoder only. Run from the repository root:

    python bench/measure_vlm_llava.py              # writes bench/vlm_measurements_llava.json
    python bench/measure_vlm_llava.py --check-fake
    python bench/vlm_accuracy.py --llava           # the estimate vs the measurements
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import _vlm_harness as H

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "vlm_measurements_llava.json"

# llava-hf/llava-1.5-7b-hf config.json (the text_config's omitted fields are LlamaConfig's defaults: hidden 4096,
# 32 layers, 32 heads, intermediate 11008)
TEXT_7B = dict(model_type="llama", vocab_size=32064, hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=32, intermediate_size=11008, max_position_embeddings=4096, rms_norm_eps=1e-5,
               tie_word_embeddings=False)
VISION_L14 = dict(model_type="clip_vision_model", hidden_size=1024, image_size=336, intermediate_size=4096,
                  num_attention_heads=16, num_hidden_layers=24, patch_size=14, projection_dim=768, vocab_size=32000)
TOP = dict(image_token_index=32000, pad_token_id=32001, projector_hidden_act="gelu", vision_feature_layer=-2,
           vision_feature_select_strategy="default", tie_word_embeddings=False)
ATTN = ["q_proj", "k_proj", "v_proj", "o_proj"]  # CLIP's q/k/v_proj match too: the tower is adapted
TEXT_ONLY = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj)"
# (name, text tokens, LoRA targets, gradient checkpointing)
CONFIGS = [
    ("llava-1.5-7b_lora-attn_1img-576_gc", 512, ATTN, True),
    ("llava-1.5-7b_lora-attn_1img-576_nogc", 512, ATTN, False),
    ("llava-1.5-7b_lora-text-attn_1img-576_gc", 512, TEXT_ONLY, True),
    ("llava-1.5-7b_lora-text-attn_1img-576_nogc", 512, TEXT_ONLY, False),
]


def measure(name, text, targets, gc_on, text_cfg=TEXT_7B, vision_cfg=VISION_L14, fake=True):
    import torch
    from transformers import LlavaConfig, LlavaForConditionalGeneration

    t0 = time.perf_counter()
    cfg = LlavaConfig(text_config=dict(text_cfg), vision_config=dict(vision_cfg), **TOP)
    side = vision_cfg["image_size"] // vision_cfg["patch_size"]
    tokens = side * side  # the CLS dropped ("default")
    ids_list = [1] + [TOP["image_token_index"]] * tokens + [1000 + i % 30000 for i in range(text)]
    torch.manual_seed(0)
    with H.fake_tensors(fake):
        model = H.build_bf16(lambda: LlavaForConditionalGeneration._from_config(cfg, attn_implementation="sdpa"))
        params = sum(p.numel() for p in model.parameters())
        tower = sum(p.numel() for p in model.model.vision_tower.parameters())
        projector = sum(p.numel() for p in model.model.multi_modal_projector.parameters())
        model, trainable, lora, opt = H.lora_for_training(model, targets, ".vision_tower.", gc_on)
        ids = torch.tensor([ids_list])
        size = vision_cfg["image_size"]
        pixels = torch.randn(1, 3, size, size, dtype=torch.float32)  # the processor's fp32 pixel_values

        def fwd():
            return model(input_ids=ids, pixel_values=pixels, labels=ids, use_cache=False).loss

        measured = H.two_steps(model, opt, fwd, ids, pixels)
        rec = {"name": name, "family": "LLaVA-1.5", "images": 1, "image_tokens_per_image": tokens,
               "tower_positions_per_image": tokens + 1, "text_tokens": text, "seq": len(ids_list), "lora": lora,
               "gradient_checkpointing": gc_on, "use_reentrant": False if gc_on else None, "dtype": "bf16",
               "attn": "sdpa", "optimizer": "adamw (torch for-loop)", "params": params, "tower_params": tower,
               "projector_params": projector, **measured, **H.versions(fake, t0)}
        del opt, model, trainable
    return rec


TINY_TEXT = dict(model_type="llama", vocab_size=2048, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, intermediate_size=256, tie_word_embeddings=False)
TINY_VISION = dict(model_type="clip_vision_model", hidden_size=64, image_size=56, intermediate_size=96,
                   num_attention_heads=4, num_hidden_layers=3, patch_size=14, projection_dim=32)


def check_fake() -> int:
    """A tiny LLaVA (image token inside its vocabulary), real vs fake: the peaks must agree."""
    saved = dict(TOP)
    TOP["image_token_index"], TOP["pad_token_id"] = 2000, 2001
    try:
        return H.check_pairs([(f"{targets} gc={gc_on}", ("tiny", 40, targets, gc_on, TINY_TEXT, TINY_VISION))
                              for targets in (ATTN, TEXT_ONLY) for gc_on in (True, False)], measure)
    finally:
        TOP.update(saved)


def main(argv: list[str]) -> int:
    if "--check-fake" in argv:
        return check_fake()
    return H.run_configs(argv, CONFIGS, measure, OUT)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main(sys.argv[1:]))
