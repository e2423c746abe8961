#!/usr/bin/env python3
"""The estimate of each phase against bench/rl_measurements.json (bench/measure_rl.py: FakeTensorMode + MemTracker,
TRL 1.16.0): the configurations are bench/rl/*.py, linted and planned as `trainlint estimate` does, with the CPU
measurement's optimizer (for-loop AdamW: no foreach temporary; the scripts say adamw_torch_fused, which has none
either) and its kernels (Plan.device "cpu": TRL's fused LM head folds its tiles in torch, not Triton). Prints one
line per phase and writes nothing.

    python bench/rl_accuracy.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAIRS = {"dpo_qwen2.5-0.5b_bf16_full_gc_b2x1024": "dpo_qwen05.py",
         "grpo_qwen2.5-0.5b_bf16_full_gc_b4_spg2_p256_c512": "grpo_qwen05.py",
         "gkd_qwen2.5-0.5b_teacher0.5b_bf16_full_gc_b2x1024": "gkd_qwen05.py",
         "gkd_qwen2.5-0.5b_teacher0.5b_bf16_full_gc_b4x512": "gkd_qwen05_b4.py",
         "gkd_llama3.2-1b_teacher1b_bf16_full_gc_b3x700": "gkd_llama1b_holdout.py"}


def plan_of(script: Path):
    from trainlint.config import Settings
    from trainlint.lint import lint_file
    from trainlint.planning import Overrides, plan_for

    from dataclasses import replace

    ctx = lint_file(script, Settings(root=script.parent), set()).context
    # the measurements ran CPU kernels (TRL's fused head without Triton): estimated for them, as estimate_accuracy.py
    return replace(plan_for(ctx, Overrides())[0], device="cpu")


def main() -> int:
    from trainlint.memory.phases import phase_peaks

    data = json.loads((ROOT / "bench" / "rl_measurements.json").read_text())
    print(f"{'configuration':<52} {'phase':<11} {'estimate':>10} {'measured':>10} {'error':>7}")
    for rec in data["configs"]:
        plan = plan_of(ROOT / "bench" / "rl" / PAIRS[rec["name"]])
        est = phase_peaks(plan)  # the per-phase figures `verify` prints beside its measurements
        measured = dict(rec["phases"])
        if "scoring" in measured:  # the estimate's generation phase is the larger of generate and the scoring pass
            measured["generation"] = max(measured.pop("generation"), measured.pop("scoring"))
        for phase, m in measured.items():
            e = est.get(phase)
            if e is None:
                continue
            print(f"{rec['name']:<52} {phase:<11} {e / 2**30:8.2f} G {m / 2**30:8.2f} G {100 * (e - m) / m:+6.1f}%")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main())
