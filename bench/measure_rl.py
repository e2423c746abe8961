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
DPO = dict(name="dpo_qwen2.5-0.5b_bf16_full_gc_b2x1024", pairs=2, seq=1024, prompt=512, beta=0.1, eval_pairs=8)
# GKD (trl 1.16.0 trl.experimental.gkd): a Qwen2.5-0.5B student and a Qwen2.5-0.5B-shaped teacher (the same
# vocabulary), 2 x 1,024 tokens with prompts of 512 (the rest is the completion the JSD reads), checkpointing on,
# GKDConfig's beta 0.5 and temperature 0.9; the evaluation step at per_device_eval_batch_size 8.
GKD = dict(name="gkd_qwen2.5-0.5b_teacher0.5b_bf16_full_gc_b2x1024", batch=2, seq=1024, prompt=512, beta=0.5,
           temperature=0.9, eval_batch=8)
# a held-out shape (JSD_TENSORS was read off the first): 4 x 512 tokens, prompts of 384 (128 new tokens)
GKD_B4 = dict(name="gkd_qwen2.5-0.5b_teacher0.5b_bf16_full_gc_b4x512", batch=4, seq=512, prompt=384, beta=0.5,
              temperature=0.9, eval_batch=None)
GRPO = dict(name="grpo_qwen2.5-0.5b_bf16_full_gc_b4_spg2_p256_c512", batch=4, steps_per_generation=2, prompt=256,
            completion=512, beta=0.04)


def measure(which: str) -> dict:
    import torch
    import transformers
    import trl

    from trainlint.verify.measure_rl import measure as measure_phases

    spec = {"dpo": DPO, "grpo": GRPO, "gkd": GKD, "gkd_b4": GKD_B4}[which]
    config = dict(QWEN05)
    got = measure_phases(which.split("_")[0], "qwen2", config, {k: v for k, v in spec.items() if k != "name"})
    return {"name": spec["name"], "spec": spec, "model": {"config": "Qwen2.5-0.5B (config.json values)", **QWEN05,
                                                         "params": got["params"]},
            "trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
            "phases": got["phases"], "tracker": "trainlint.verify.measure.StepMemTracker under FakeTensorMode+ShapeEnv",
            "seconds": got["seconds"]}


def main(argv: list[str]) -> int:
    which = [w for w in ("dpo", "grpo", "gkd", "gkd_b4") if not argv or w in argv]
    records = []
    for w in which:
        rec = measure(w)
        records.append(rec)
        print(w, {k: f"{v / 2**30:.2f} GiB" for k, v in rec["phases"].items()}, f"({rec['seconds']} s)", flush=True)
    kept = json.loads(OUT.read_text())["configs"] if OUT.exists() else []
    names = {r["name"] for r in records}
    OUT.write_text(json.dumps({"configs": [r for r in kept if r["name"] not in names] + records}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main(sys.argv[1:]))
