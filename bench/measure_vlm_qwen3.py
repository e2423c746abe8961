#!/usr/bin/env python3
"""Ground truth for Qwen3-VL's tower (issue 28 item 1): Qwen3-VL-8B-Instruct with LoRA at full size, one image of
1,280 tokens (a 64 x 80 patch grid: max_pixels = 1280 * 32 * 32) and 512 text tokens, two training steps under
FakeTensorMode and the project's MemTracker (trainlint.verify.measure.StepMemTracker), with the installed
transformers (5.25.0) and peft (0.21.2).

The model is `Qwen3VLForConditionalGeneration` built from Qwen/Qwen3-VL-8B-Instruct's config.json values
(knowledge/models.json entry and its sources) in bf16, SDPA. What is changed so the step runs on FakeTensors, as
bench/measure_vlm.py does for Qwen2.5-VL (`--check-fake` runs a tiny Qwen3-VL real and fake): the tower's index
tensors (rotary position ids, cu_seqlens, the position grid's interpolation indices and weights; 5.25.0
vision_utils.py lets a caller pass them) are computed on real tensors before the step; the split sizes of
`Qwen3VLVisionAttention.forward` (`lengths.tolist()`) and of `get_image_features` are given from them; the
placeholder count check is skipped; the text's 3D rotary position ids are passed (arange: the same int64 (3, 1, seq)
tensor the model would build); the deepstack features are added at the image positions through a precomputed
index (`Qwen3VLTextModel._deepstack_process` indexes with the boolean mask: the same gather and scatter).

    python bench/measure_vlm_qwen3.py              # writes bench/vlm_measurements_qwen3.json
    python bench/measure_vlm_qwen3.py --check-fake
    python bench/vlm_accuracy.py --qwen3
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import _vlm_harness as H

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "vlm_measurements_qwen3.json"

TEXT_8B = dict(vocab_size=151936, hidden_size=4096, num_hidden_layers=36, num_attention_heads=32,
               num_key_value_heads=8, head_dim=128, intermediate_size=12288, max_position_embeddings=262144,
               rms_norm_eps=1e-6, tie_word_embeddings=False)
VISION_8B = dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, out_hidden_size=4096,
                 patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=2304,
                 deepstack_visual_indexes=[8, 16, 24], hidden_act="gelu_pytorch_tanh")
TOKEN_IDS = dict(image_token_id=151655, video_token_id=151656, vision_start_token_id=151652,
                 vision_end_token_id=151653)
TEXT_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]
ALL_LINEAR = "all-linear"
CONFIGS = [
    ("qwen3-vl-8b_lora-attn_1img-1280_gc", (64, 80), 512, TEXT_TARGETS, True),
    ("qwen3-vl-8b_lora-attn_1img-1280_nogc", (64, 80), 512, TEXT_TARGETS, False),
    ("qwen3-vl-8b_lora-all-linear_1img-1280_gc", (64, 80), 512, ALL_LINEAR, True),
    ("qwen3-vl-8b_lora-all-linear_1img-1280_nogc", (64, 80), 512, ALL_LINEAR, False),
]


def _patch_for_fake(torch, Q):
    from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

    state = {"lengths": None, "kw": {}, "splits": [], "index": None}
    real_tolist, fake_tolist = torch.Tensor.tolist, FakeTensor.tolist

    def tolist(self):
        if state["lengths"] is not None and isinstance(self, FakeTensor):
            return state["lengths"]
        return fake_tolist(self) if isinstance(self, FakeTensor) else real_tolist(self)

    FakeTensor.tolist = tolist
    attn_forward = Q.Qwen3VLVisionAttention.forward

    def attention(self, hidden_states, cu_seqlens, *args, **kwargs):
        if not isinstance(cu_seqlens, FakeTensor):
            with unset_fake_temporarily():
                state["lengths"] = real_tolist(cu_seqlens[1:] - cu_seqlens[:-1])
        try:
            return attn_forward(self, hidden_states, cu_seqlens, *args, **kwargs)
        finally:
            state["lengths"] = None

    def get_image_features(self, pixel_values, image_grid_thw=None, **kwargs):
        out = self.visual(pixel_values.type(self.visual.dtype), grid_thw=image_grid_thw, return_dict=True,
                          **{k: v for k, v in kwargs.items() if k != "return_dict"}, **state["kw"])
        out.pooler_output = torch.split(out.pooler_output, state["splits"])
        out.deepstack_features = [torch.split(f, state["splits"]) for f in out.deepstack_features]
        return out

    def deepstack(self, hidden_states, visual_pos_masks, visual_embeds):
        index = state["index"]
        visual_embeds = visual_embeds.to(hidden_states.device, hidden_states.dtype)
        hidden_states = hidden_states.clone()
        local_this = hidden_states[index] + visual_embeds
        hidden_states[index] = local_this
        return hidden_states

    Q.Qwen3VLVisionAttention.forward = attention
    Q.Qwen3VLModel.get_image_features = get_image_features
    Q.Qwen3VLTextModel._deepstack_process = deepstack
    Q.torch_compilable_check = lambda *a, **k: None
    return state


def measure(name, hw, text, targets, gc_on, text_cfg=TEXT_8B, vision_cfg=VISION_8B, fake=True):
    import torch
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration
    from transformers import vision_utils as VU
    from transformers.models.qwen3_vl import modeling_qwen3_vl as Q

    t0 = time.perf_counter()
    state = _patch_for_fake(torch, Q)
    cfg = Qwen3VLConfig(text_config=dict(text_cfg), vision_config=dict(vision_cfg), tie_word_embeddings=False,
                        **TOKEN_IDS)
    vcfg = cfg.vision_config
    h, w = hw
    tokens = h * w // 4
    ids_list = [TOKEN_IDS["vision_start_token_id"]] + [TOKEN_IDS["image_token_id"]] * tokens + \
        [TOKEN_IDS["vision_end_token_id"]] + [1000 + i % (text_cfg["vocab_size"] // 2 - 1000) for i in range(text)]
    grid = torch.tensor([[1, h, w]])
    cu, mx = VU.get_vision_attention_seqlens(grid, vcfg)
    ii, iw = VU.get_vision_interpolation_indices_and_weights(
        grid, num_grid_per_side=int(vcfg.num_position_embeddings ** 0.5), mode="bilinear", align_corners=True,
        spatial_merge_size=vcfg.spatial_merge_size)
    state["kw"] = dict(position_ids=VU.get_vision_position_ids(grid, vcfg.spatial_merge_size), cu_seqlens=cu,
                       max_seqlen=mx, interp_indices=ii, interp_weights=iw)
    state["splits"] = [tokens]
    mask = torch.tensor([ids_list]) == TOKEN_IDS["image_token_id"]
    state["index"] = mask.nonzero(as_tuple=True)
    patches = h * w
    torch.manual_seed(0)
    with H.fake_tensors(fake):
        model = H.build_bf16(lambda: Qwen3VLForConditionalGeneration._from_config(cfg, attn_implementation="sdpa"))
        params = sum(p.numel() for p in model.parameters())
        tower = sum(p.numel() for p in model.model.visual.parameters())
        model, trainable, lora, opt = H.lora_for_training(model, targets, ".visual.", gc_on)
        ids = torch.tensor([ids_list])
        positions = torch.arange(len(ids_list)).view(1, 1, -1).expand(3, 1, -1).contiguous()
        pixels = torch.randn(patches, 3 * 2 * 16 * 16, dtype=torch.float32)  # the processor's fp32 pixel_values

        def fwd():
            return model(input_ids=ids, pixel_values=pixels, image_grid_thw=grid, position_ids=positions, labels=ids,
                         use_cache=False).loss

        measured = H.two_steps(model, opt, fwd, ids, pixels, positions)
        rec = {"name": name, "family": "Qwen3-VL", "images": 1, "patch_grid": list(hw),
               "image_tokens_per_image": tokens, "text_tokens": text, "seq": len(ids_list), "patches": patches,
               "lora": lora, "gradient_checkpointing": gc_on, "use_reentrant": False if gc_on else None,
               "dtype": "bf16", "attn": "sdpa", "optimizer": "adamw (torch for-loop)", "params": params,
               "tower_params": tower, **measured, **H.versions(fake, t0)}
        del opt, model, trainable
    return rec


TINY_TEXT = dict(vocab_size=2048, hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 head_dim=32, intermediate_size=256, tie_word_embeddings=False)
TINY_VISION = dict(depth=4, hidden_size=64, intermediate_size=96, num_heads=4, out_hidden_size=128, patch_size=16,
                   spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64,
                   deepstack_visual_indexes=[1, 2])


def check_fake() -> int:
    """A tiny Qwen3-VL (token ids inside its vocabulary), real vs fake: the peaks must agree but for the index
    tensors computed before the step (the real run counts them)."""
    global TOKEN_IDS
    saved = TOKEN_IDS
    TOKEN_IDS = dict(image_token_id=2000, video_token_id=2001, vision_start_token_id=2002, vision_end_token_id=2003)
    try:
        return H.check_pairs([(f"{targets} gc={gc_on}", ("tiny", (16, 24), 40, targets, gc_on, TINY_TEXT,
                                                         TINY_VISION))
                              for targets in (TEXT_TARGETS, ALL_LINEAR) for gc_on in (True, False)], measure,
                             lambda real, fake: 0 <= real["peak"] - fake["peak"] <= 64 * real["patches"] + 4096)
    finally:
        TOKEN_IDS = saved


def main(argv: list[str]) -> int:
    if "--check-fake" in argv:
        return check_fake()
    return H.run_configs(argv, CONFIGS, measure, OUT, sort=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main(sys.argv[1:]))
