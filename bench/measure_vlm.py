#!/usr/bin/env python3
"""Ground truth for vision-language fine-tuning (issue 28 item 1): Qwen2.5-VL-7B with LoRA at full size, real image
token counts, two training steps under FakeTensorMode and the project's MemTracker
(trainlint.verify.measure.StepMemTracker), with the installed transformers (5.25.0) and peft (0.21.2).

The model is `Qwen2_5_VLForConditionalGeneration` built from the checkpoint's config.json values (text decoder as in
knowledge/models.json; vision_config depth 32, hidden 1280, intermediate 3420, 16 heads, patch 14, window 112,
fullatt_block_indexes [7, 15, 23, 31], out_hidden_size 3584) in bf16 (`from_pretrained(dtype=torch.bfloat16)`), SDPA.
One sample per step: `images` images of `grid` patches each (what `smart_resize` gives for an image at that
max_pixels: tokens = patches / 4), the image tokens wrapped in <|vision_start|>/<|vision_end|>, plus `text` text
tokens; `labels = input_ids` (the loss over the whole sequence, as TRL's SFT without a completion mask).

What is changed so the step runs on FakeTensors (`--check-fake` runs a tiny model real and fake: the peaks differ
by the precomputed int64 index tensors only, which the real run counts: 12,400 bytes, 16 per patch): the index tensors the vision tower derives from `image_grid_thw` (rotary position ids,
`cu_seqlens`, the window index; transformers 5.25.0 vision_utils.py lets a caller pass them precomputed, `kwargs`)
are computed on real tensors before the step, the per-window split sizes of `Qwen2_5_VLVisionAttention.forward`
(`lengths.tolist()`, modeling_qwen2_5_vl.py l.316-318) and of `get_image_features` (l.1077) are given from those real
tensors, and the placeholder count check (`torch_compilable_check`, l.1109) is skipped (it compares counts this
script builds equal). The 3D rotary position ids of the text are left to the model's default (position_ids None:
the processor's `mm_token_type_ids` are not passed), which changes no tensor's size.

Run from the repository root (minutes on two cores):

    python bench/measure_vlm.py              # writes bench/vlm_measurements.json
    python bench/measure_vlm.py --check-fake # a tiny Qwen2.5-VL, real vs fake, must agree to the byte
    python bench/vlm_accuracy.py             # the estimate vs these measurements
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import _vlm_harness as H

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "vlm_measurements.json"

# Qwen/Qwen2.5-VL-7B-Instruct config.json values (knowledge/models.json entry and its sources)
TEXT_7B = dict(vocab_size=152064, hidden_size=3584, num_hidden_layers=28, num_attention_heads=28,
               num_key_value_heads=4, intermediate_size=18944, tie_word_embeddings=False,
               max_position_embeddings=128000, rms_norm_eps=1e-6, rope_theta=1000000.0,
               rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]})
VISION_7B = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=3584,
                 patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                 fullatt_block_indexes=[7, 15, 23, 31], in_channels=3)
TOKEN_IDS = dict(image_token_id=151655, video_token_id=151656, vision_start_token_id=151652,
                 vision_end_token_id=151653)
TEXT_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]  # the text attention only: no vision-tower module matches
ALL_LINEAR = "all-linear"  # every Linear but lm_head: the vision blocks' qkv/proj/MLP and the merger too

# (name, images, patch grid (h, w) per image, text tokens, LoRA targets, gradient checkpointing)
# 256 x 256 patches = 16,384 tokens: an image that reaches the checkpoints' max_pixels 12,845,056 (3584 x 3584 px);
# 64 x 80 patches = 1,280 tokens: an image at max_pixels = 1280 * 28 * 28 (the processor class default), 896 x 1120 px
CONFIGS = [
    ("qwen2.5-vl-7b_lora-attn_1img-16384_gc", 1, (256, 256), 512, TEXT_TARGETS, True),
    ("qwen2.5-vl-7b_lora-attn_1img-16384_nogc", 1, (256, 256), 512, TEXT_TARGETS, False),
    ("qwen2.5-vl-7b_lora-attn_2img-1280_gc", 2, (64, 80), 512, TEXT_TARGETS, True),
    ("qwen2.5-vl-7b_lora-attn_2img-1280_nogc", 2, (64, 80), 512, TEXT_TARGETS, False),
    ("qwen2.5-vl-7b_lora-all-linear_2img-1280_gc", 2, (64, 80), 512, ALL_LINEAR, True),
    ("qwen2.5-vl-7b_lora-all-linear_2img-1280_nogc", 2, (64, 80), 512, ALL_LINEAR, False),
]


def _patch_for_fake(torch, Q, VU):
    """The minimal changes described in the module docstring; returns the dict the per-step values go into."""
    from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

    state = {"lengths": None, "kw": {}, "splits": []}
    real_tolist, fake_tolist = torch.Tensor.tolist, FakeTensor.tolist

    def tolist(self):
        if state["lengths"] is not None and isinstance(self, FakeTensor):
            return state["lengths"]
        return fake_tolist(self) if isinstance(self, FakeTensor) else real_tolist(self)

    FakeTensor.tolist = tolist
    attn_forward = Q.Qwen2_5_VLVisionAttention.forward

    def attention(self, hidden_states, cu_seqlens, *args, **kwargs):
        if not isinstance(cu_seqlens, FakeTensor):
            with unset_fake_temporarily():
                state["lengths"] = real_tolist(cu_seqlens[1:] - cu_seqlens[:-1])
        try:
            return attn_forward(self, hidden_states, cu_seqlens, *args, **kwargs)
        finally:
            state["lengths"] = None

    def get_image_features(self, pixel_values, image_grid_thw=None, **kwargs):
        out = self.visual(pixel_values.type(self.visual.dtype), grid_thw=image_grid_thw, **kwargs, **state["kw"])
        out.pooler_output = torch.split(out.pooler_output, state["splits"])
        return out

    Q.Qwen2_5_VLVisionAttention.forward = attention
    Q.Qwen2_5_VLModel.get_image_features = get_image_features
    Q.torch_compilable_check = lambda *a, **k: None
    return state


def _precompute(torch, VU, vcfg, grid):
    """The tower's index tensors for this grid, on real tensors (vision_utils.py 5.25.0: get_vision_position_ids,
    get_vision_attention_seqlens, get_vision_window_index, get_max_seqlen)."""
    cu, mx = VU.get_vision_attention_seqlens(grid, vcfg)
    wi, cuw = VU.get_vision_window_index(grid, spatial_merge_size=vcfg.spatial_merge_size,
                                         window_size=vcfg.window_size, patch_size=vcfg.patch_size)
    return dict(position_ids=VU.get_vision_position_ids(grid, vcfg.spatial_merge_size), cu_seqlens=cu,
                max_seqlen=mx, window_index=wi, cu_window_seqlens=cuw,
                max_window_seqlen=VU.get_max_seqlen(cuw, vcfg))


def _sample(torch, images, hw, text):
    h, w = hw
    tokens = h * w // 4
    ids = []
    for _ in range(images):
        ids += [TOKEN_IDS["vision_start_token_id"]] + [TOKEN_IDS["image_token_id"]] * tokens + \
            [TOKEN_IDS["vision_end_token_id"]]
    ids += [1000 + i % 50000 for i in range(text)]
    grid = torch.tensor([[1, h, w]] * images)
    return ids, grid, tokens


def measure(name, images, hw, text, targets, gc_on, text_cfg=TEXT_7B, vision_cfg=VISION_7B, fake=True):
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    from transformers import vision_utils as VU
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as Q

    t0 = time.perf_counter()
    state = _patch_for_fake(torch, Q, VU)
    cfg = Qwen2_5_VLConfig(text_config=dict(text_cfg), vision_config=dict(vision_cfg), **TOKEN_IDS)
    ids_list, grid, tokens = _sample(torch, images, hw, text)
    state["kw"] = _precompute(torch, VU, cfg.vision_config, grid)
    state["splits"] = [tokens] * images
    patches = images * hw[0] * hw[1]
    torch.manual_seed(0)
    with H.fake_tensors(fake):
        model = H.build_bf16(lambda: Qwen2_5_VLForConditionalGeneration._from_config(cfg, attn_implementation="sdpa"))
        params = sum(p.numel() for p in model.parameters())
        tower = sum(p.numel() for p in model.model.visual.parameters())
        model, trainable, lora, opt = H.lora_for_training(model, targets, ".visual.", gc_on)
        ids = torch.tensor([ids_list])
        pixels = torch.randn(patches, 3 * 2 * 14 * 14, dtype=torch.float32)  # the processor's fp32 pixel_values

        def fwd():
            return model(input_ids=ids, pixel_values=pixels, image_grid_thw=grid, labels=ids, use_cache=False).loss

        measured = H.two_steps(model, opt, fwd, ids, pixels)
        rec = {"name": name, "images": images, "patch_grid": list(hw), "image_tokens_per_image": tokens,
               "text_tokens": text, "seq": len(ids_list), "patches": patches, "lora": lora,
               "gradient_checkpointing": gc_on, "use_reentrant": False if gc_on else None, "dtype": "bf16",
               "attn": "sdpa", "optimizer": "adamw (torch for-loop)", "params": params, "tower_params": tower,
               **measured, **H.versions(fake, t0)}
        del opt, model, trainable
    return rec


TINY_TEXT = dict(vocab_size=2048, hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=256, tie_word_embeddings=False, rope_scaling={"type": "mrope",
                                                                                   "mrope_section": [4, 6, 6]})
TINY_VISION = dict(depth=4, hidden_size=64, intermediate_size=96, num_heads=4, out_hidden_size=128, patch_size=14,
                   spatial_merge_size=2, temporal_patch_size=2, window_size=112, fullatt_block_indexes=[1, 3])


def check_fake() -> int:
    """A tiny Qwen2.5-VL (token ids inside its vocabulary), real vs fake: the peaks must agree but for the index
    tensors."""
    global TOKEN_IDS
    saved = TOKEN_IDS
    TOKEN_IDS = dict(image_token_id=2000, video_token_id=2001, vision_start_token_id=2002, vision_end_token_id=2003)
    try:
        # the real run also counts the index tensors computed before the step (int64: 16 bytes per patch of rotary
        # positions, and cu_seqlens)
        return H.check_pairs([(f"{targets} gc={gc_on}", ("tiny", 2, (16, 24), 40, targets, gc_on, TINY_TEXT,
                                                         TINY_VISION))
                              for targets in (TEXT_TARGETS, ALL_LINEAR) for gc_on in (True, False)], measure,
                             lambda real, fake: 0 <= real["peak"] - fake["peak"] <= 16 * real["patches"] + 1024)
    finally:
        TOKEN_IDS = saved


def main(argv: list[str]) -> int:
    if "--check-fake" in argv:
        return check_fake()
    return H.run_configs(argv, CONFIGS, measure, OUT, sort=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main(sys.argv[1:]))
