#!/usr/bin/env python3
"""Ground truth for the RL / preference phases (issue 27): one DPO step and one GRPO round (HF-style generation,
reference scoring, training step) of a Qwen2.5-0.5B geometry at full size, under FakeTensorMode (with a ShapeEnv:
TRL's fused LM head selects the labelled positions, a data-dependent shape) and the project's MemTracker
(trainlint.verify.measure.StepMemTracker), with the installed TRL (1.16.0): its own `add_fused_lm_head` and the
tensors its trainers build (trl 1.16.0 dpo_trainer.py `_compute_loss` :1285-1345, grpo_trainer.py
`_get_per_token_logps_and_entropies` :1419-1506, `_generate_and_score_completions`, `_compute_loss`).

The measurement itself is trainlint.verify.measure_rl.measure (what `trainlint verify --simulate` runs for a DPO or
GRPO script): its docstring says what is reproduced and what is not. DPO here: 2 pairs x 1,024 tokens, prompts of 512,
checkpointing on (DPOConfig's default from 0.22), the evaluation step at the default per_device_eval_batch_size (8
pairs). GRPO: 4 completions per micro-batch, 2 micro-batches per round, prompts of 256 and completions of 512,
beta=0.04, the reference's scoring chunked by the micro-batch.

Run from the repository root (a few minutes on two cores):

    python bench/measure_rl.py            # writes bench/rl_measurements.json
    python bench/measure_rl.py gkd_holdout jsd   # only these (the others' records are kept)
    python bench/rl_accuracy.py           # the estimate vs these measurements
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "rl_measurements.json"

# Qwen2.5-0.5B's config.json (public): 24 layers, hidden 896, 14 heads / 2 KV heads, 151,936 tied vocabulary.
QWEN05 = dict(vocab_size=151936, hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
              intermediate_size=4864, tie_word_embeddings=True, max_position_embeddings=32768, rope_theta=1000000.0,
              rms_norm_eps=1e-6, use_sliding_window=False)
# Llama-3.2-1B's config.json (public): 16 layers, hidden 2,048, 32 heads / 8 KV heads, 128,256 tied vocabulary.
LLAMA32_1B = dict(vocab_size=128256, hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
                  num_key_value_heads=8, head_dim=64, intermediate_size=8192, tie_word_embeddings=True,
                  max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
                  rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 8192})
DPO = dict(name="dpo_qwen2.5-0.5b_bf16_full_gc_b2x1024", pairs=2, seq=1024, prompt=512, beta=0.1, eval_pairs=8)
# GKD (trl 1.16.0 trl.experimental.gkd): a Qwen2.5-0.5B student and a Qwen2.5-0.5B-shaped teacher (the same
# vocabulary), 2 x 1,024 tokens with prompts of 512 (the rest is the completion the JSD reads), checkpointing on,
# GKDConfig's beta 0.5 and temperature 0.9; the evaluation step at per_device_eval_batch_size 8. `mixed`: the scripts'
# bf16=True, under which accelerate hands TRL fp32 copies of both models' logits (verify/measure_rl.py `_gkd`).
GKD = dict(name="gkd_qwen2.5-0.5b_teacher0.5b_bf16_full_gc_b2x1024", batch=2, seq=1024, prompt=512, beta=0.5,
           temperature=0.9, eval_batch=8, mixed=True)
# a held-out shape (JSD_TENSORS was read off the first): 4 x 512 tokens, prompts of 384 (128 new tokens)
GKD_B4 = dict(name="gkd_qwen2.5-0.5b_teacher0.5b_bf16_full_gc_b4x512", batch=4, seq=512, prompt=384, beta=0.5,
              temperature=0.9, eval_batch=None, mixed=True)
# the held-out shape for JSD_TENSORS / JSD_NOGRAD_TENSORS (read off the loss, then checked here): another model,
# vocabulary, batch, sequence and token count: a Llama-3.2-1B student and teacher (128,256 vocabulary), 3 x 700
# tokens, prompts of 500 (200 new tokens), the evaluation step at batch 5
GKD_HOLDOUT = dict(name="gkd_llama3.2-1b_teacher1b_bf16_full_gc_b3x700", model="llama", batch=3, seq=700, prompt=500,
                   beta=0.5, temperature=0.9, eval_batch=5, mixed=True)
# generalized_jsd_loss alone (trainlint.verify.measure_rl.jsd_tensor_counts): (rows, seq, vocab)
JSD_SHAPES = ((2, 1024, 151936), (3, 700, 128256), (5, 333, 32000))
GRPO = dict(name="grpo_qwen2.5-0.5b_bf16_full_gc_b4_spg2_p256_c512", batch=4, steps_per_generation=2, prompt=256,
            completion=512, beta=0.04)


def measure(which: str) -> dict:
    import torch
    import transformers
    import trl

    from trainlint.verify.measure_rl import measure as measure_phases

    spec = {"dpo": DPO, "grpo": GRPO, "gkd": GKD, "gkd_b4": GKD_B4, "gkd_holdout": GKD_HOLDOUT}[which]
    llama = spec.get("model") == "llama"
    config = dict(LLAMA32_1B if llama else QWEN05)
    got = measure_phases(which.split("_")[0], "llama" if llama else "qwen2", config,
                         {k: v for k, v in spec.items() if k not in ("name", "model")})
    label = "Llama-3.2-1B (config.json values)" if llama else "Qwen2.5-0.5B (config.json values)"
    return {"name": spec["name"], "spec": spec, "model": {"config": label, **config, "params": got["params"]},
            "trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
            "phases": got["phases"], "tracker": "trainlint.verify.measure.StepMemTracker under FakeTensorMode+ShapeEnv",
            "seconds": got["seconds"]}


def main(argv: list[str]) -> int:
    which = [w for w in ("dpo", "grpo", "gkd", "gkd_b4", "gkd_holdout") if not argv or w in argv]
    probe = None
    if not argv or "jsd" in argv:
        from trainlint.verify.measure_rl import jsd_tensor_counts

        # beta 0 / 1: one kl_div (memory.estimate JSD_KL_TENSORS), at the smallest shape
        probe = jsd_tensor_counts(JSD_SHAPES) + [r for b in (0.0, 1.0)
                                                 for r in jsd_tensor_counts(JSD_SHAPES[-1:], beta=b)]
        print("jsd", probe, flush=True)
    records = []
    for w in which:
        rec = measure(w)
        records.append(rec)
        print(w, {k: f"{v / 2**30:.2f} GiB" for k, v in rec["phases"].items()}, f"({rec['seconds']} s)", flush=True)
    old = json.loads(OUT.read_text()) if OUT.exists() else {}
    kept = old.get("configs", [])
    names = {r["name"] for r in records}
    data = {"configs": [r for r in kept if r["name"] not in names] + records}
    if probe is not None or "jsd_probe" in old:
        # vocabulary-sized tensors N above the two models' logits at the loss's peaks (jsd_tensor_counts)
        data["jsd_probe"] = probe if probe is not None else old["jsd_probe"]
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main(sys.argv[1:]))
