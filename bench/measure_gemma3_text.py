#!/usr/bin/env python3
"""Ground truth for Gemma 3's text block (four fp32 RMSNorms and an fp32 q_norm / k_norm per head: memory/estimate.py
sandwich_norm_bytes_per_token, qk_norm_bytes_per_token): Gemma-3-1B-it (gemma3_text) at full size, batch 2 x 1,024
tokens, no checkpointing, full fine-tuning and LoRA r=16 on q/k/v/o_proj, two steps under FakeTensorMode and the
project's MemTracker, the model's own full-logits loss, for-loop AdamW, transformers 5.25.0.

Gemma3TextConfig from google/gemma-3-1b-it's geometry (the catalog entry: vocab 262,144, hidden 1152, 26 layers,
4 heads, 1 KV head, head_dim 256, intermediate 6912; sliding_window 512), bf16, SDPA. The weight init's truncated
normal is skipped under FakeTensors (its rejection loop reads values), as in bench/measure_vlm_gemma3.py.

    python bench/measure_gemma3_text.py     # writes bench/gemma3_text_measurements.json
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import _vlm_harness as H

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "gemma3_text_measurements.json"
CONFIG = dict(vocab_size=262144, hidden_size=1152, intermediate_size=6912, num_hidden_layers=26,
              num_attention_heads=4, num_key_value_heads=1, head_dim=256, sliding_window=512,
              query_pre_attn_scalar=256, max_position_embeddings=32768)
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]
CONFIGS = [("gemma-3-1b_full_b2_s1024_nogc", None), ("gemma-3-1b_lora-attn_b2_s1024_nogc", 16)]
BATCH, SEQ = 2, 1024


def measure(name, r):
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    import trainlint.verify.measure as M

    t0 = time.perf_counter()
    with H.fake_tensors(skip_trunc_normal=True):
        model = H.build_bf16(lambda: Gemma3ForCausalLM._from_config(Gemma3TextConfig(**CONFIG),
                                                                    attn_implementation="sdpa"))
        if r:
            model, _, _ = H.add_lora(model, TARGETS, r=r)
        params = sum(p.numel() for p in model.parameters())
        trainable = [p for p in model.parameters() if p.requires_grad]
        model.train()
        opt = M._make_optimizer("adamw", trainable)
        ids = torch.randint(0, 1000, (BATCH, SEQ))

        def fwd():
            return model(input_ids=ids, labels=ids, use_cache=False).loss

        measured = H.two_steps(model, opt, fwd, ids)
        del measured["step2_phases"]  # not kept in these rows
        rec = {"name": name, "batch": BATCH, "seq": SEQ, "lora_r": r, "target_modules": TARGETS if r else None,
               "gradient_checkpointing": False, "dtype": "bf16", "attn": "sdpa", "optimizer": "adamw (torch for-loop)",
               "params": params, "trainable_params": sum(p.numel() for p in trainable), **measured,
               **H.versions(True, t0)}
        del opt, model, trainable
    return rec


def main(argv: list[str]) -> int:
    return H.run_configs(argv, CONFIGS, measure, OUT, sort=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main(sys.argv[1:]))
