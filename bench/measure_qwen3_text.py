#!/usr/bin/env python3
"""Ground truth for Qwen3's per-head q_norm / k_norm (Qwen3RMSNorm over head_dim, computing in fp32:
memory/estimate.py qk_norm_bytes_per_token, knowledge/libraries.py QK_NORMS_FP32 "qwen3"): Qwen3 at full size,
one sequence of 2,048 tokens, two steps under FakeTensorMode and the project's MemTracker, the model's own
full-logits loss, for-loop AdamW, transformers 5.25.0, bf16, SDPA.

Rows: Qwen3-8B with LoRA r=16 (alpha 32, dropout 0.05) on q/k/v/o_proj, without and with gradient checkpointing
(non-reentrant, enabled after get_peft_model as bench/measure_vlm_qwen3.py does), and Qwen3-4B (tied embeddings)
full fine-tuning without checkpointing (the q/k norm weights trained: their 16-bit normalised output kept too).
Qwen3Config from the catalog entries (knowledge/models.json Qwen/Qwen3-8B, Qwen/Qwen3-4B).

    python bench/measure_qwen3_text.py     # writes bench/qwen3_text_measurements.json
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import _vlm_harness as H

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "qwen3_text_measurements.json"
QWEN3_8B = dict(vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                num_attention_heads=32, num_key_value_heads=8, head_dim=128, tie_word_embeddings=False,
                max_position_embeddings=40960)
QWEN3_4B = dict(vocab_size=151936, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                num_attention_heads=32, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True,
                max_position_embeddings=40960)
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]
# (name, model id, config, LoRA r or None, gradient checkpointing)
CONFIGS = [("qwen3-8b_lora-attn_b1_s2048_nogc", "Qwen/Qwen3-8B", QWEN3_8B, 16, False),
           ("qwen3-8b_lora-attn_b1_s2048_gc", "Qwen/Qwen3-8B", QWEN3_8B, 16, True),
           ("qwen3-4b_full_b1_s2048_nogc", "Qwen/Qwen3-4B", QWEN3_4B, None, False)]
BATCH, SEQ = 1, 2048


def measure(name, model_id, config, r, gc_on):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    import trainlint.verify.measure as M

    t0 = time.perf_counter()
    with H.fake_tensors():
        model = H.build_bf16(lambda: Qwen3ForCausalLM._from_config(Qwen3Config(**config), attn_implementation="sdpa"))
        if r:
            model, _, _ = H.add_lora(model, TARGETS, r=r)
        if gc_on:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        params = sum(p.numel() for p in model.parameters())
        trainable = [p for p in model.parameters() if p.requires_grad]
        model.train()
        opt = M._make_optimizer("adamw", trainable)
        ids = torch.randint(0, 1000, (BATCH, SEQ))

        def fwd():
            return model(input_ids=ids, labels=ids, use_cache=False).loss

        measured = H.two_steps(model, opt, fwd, ids)
        del measured["step2_phases"]  # not kept in these rows
        rec = {"name": name, "model_id": model_id, "config": config, "batch": BATCH, "seq": SEQ, "lora_r": r,
               "target_modules": TARGETS if r else None, "gradient_checkpointing": gc_on,
               "use_reentrant": False if gc_on else None, "dtype": "bf16", "attn": "sdpa",
               "optimizer": "adamw (torch for-loop)", "params": params,
               "trainable_params": sum(p.numel() for p in trainable), **measured, **H.versions(True, t0)}
        del opt, model, trainable
    return rec


def main(argv: list[str]) -> int:
    return H.run_configs(argv, CONFIGS, measure, OUT, sort=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main(sys.argv[1:]))
