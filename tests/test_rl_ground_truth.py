"""The estimate of the RL / preference phases against the committed ground truth (bench/rl_measurements.json:
bench/measure_rl.py, FakeTensorMode + MemTracker at full size with TRL 1.16.0, CPU kernels, so estimated for them:
Plan.device "cpu"): within 6% for the DPO step and its evaluation step, the GRPO training step and the GRPO
generation phase (the larger of HF generate and the reference's scoring pass), and GKD's training step, generation
(no cache under checkpointing) and evaluation step (its loss under no_grad at eval batch 8), on the Qwen2.5-0.5B shape and a held-out
Llama-3.2-1B one. bench/rl_accuracy.py prints them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainlint.config import Settings
from trainlint.knowledge.versions import project_pins
from trainlint.launch.discover import clear_caches
from trainlint.lint import lint_file
from dataclasses import replace

from trainlint.memory.estimate import estimate
from trainlint.memory.phases import eval_peak, generation_peak
from trainlint.planning import Overrides, plan_for

BENCH = Path(__file__).resolve().parents[1] / "bench"
MEASURED = {c["name"]: c["phases"] for c in json.loads((BENCH / "rl_measurements.json").read_text())["configs"]}


def plan(script: str):
    project_pins.cache_clear()
    clear_caches()
    path = BENCH / "rl" / script
    return replace(plan_for(lint_file(path, Settings(root=path.parent), set()).context, Overrides())[0], device="cpu")


@pytest.mark.parametrize("script,name,phase", [
    ("dpo_qwen05.py", "dpo_qwen2.5-0.5b_bf16_full_gc_b2x1024", "train"),
    ("dpo_qwen05.py", "dpo_qwen2.5-0.5b_bf16_full_gc_b2x1024", "eval"),
    ("grpo_qwen05.py", "grpo_qwen2.5-0.5b_bf16_full_gc_b4_spg2_p256_c512", "train"),
    ("grpo_qwen05.py", "grpo_qwen2.5-0.5b_bf16_full_gc_b4_spg2_p256_c512", "generation"),
    ("gkd_qwen05.py", "gkd_qwen2.5-0.5b_teacher0.5b_bf16_full_gc_b2x1024", "train"),
    ("gkd_qwen05.py", "gkd_qwen2.5-0.5b_teacher0.5b_bf16_full_gc_b2x1024", "generation"),
    ("gkd_qwen05.py", "gkd_qwen2.5-0.5b_teacher0.5b_bf16_full_gc_b2x1024", "eval"),
    # the held-out shape (another model, vocabulary, batch, length and token count)
    ("gkd_llama1b_holdout.py", "gkd_llama3.2-1b_teacher1b_bf16_full_gc_b3x700", "train"),
    ("gkd_llama1b_holdout.py", "gkd_llama3.2-1b_teacher1b_bf16_full_gc_b3x700", "generation"),
    ("gkd_llama1b_holdout.py", "gkd_llama3.2-1b_teacher1b_bf16_full_gc_b3x700", "eval"),
])
def test_estimate_within_6_percent_of_the_measured_phase(script, name, phase):
    p = plan(script)
    measured = MEASURED[name]
    if phase == "generation":
        got, want = generation_peak(p), max(measured["generation"], measured.get("scoring", 0))
    elif phase == "eval":
        got, want = eval_peak(p), measured["eval"]
    else:
        got, want = estimate(p).peak, measured["train"]
    assert abs(got - want) / want < 0.06, (got, want)


def test_jsd_tensor_counts_are_the_measured_ones_at_every_probed_shape():
    """memory.estimate JSD_TENSORS / JSD_NOGRAD_TENSORS against TRL's generalized_jsd_loss measured alone at three
    shapes (bench/measure_rl.py "jsd"): the forward's last add is the peak, the backward's is lower."""
    from trainlint.memory.estimate import JSD_KL_TENSORS, JSD_NOGRAD_TENSORS, JSD_TENSORS

    probe = json.loads((BENCH / "rl_measurements.json").read_text())["jsd_probe"]
    mixture = [r for r in probe if r["beta"] not in (0, 1)]
    assert len({(r["rows"], r["seq"], r["vocab"]) for r in mixture}) == 3
    for r in mixture:
        assert (r["grad_forward"], r["nograd_forward"]) == (JSD_TENSORS, JSD_NOGRAD_TENSORS), r
        assert r["grad_backward"] < r["grad_forward"]
    single = [r for r in probe if r["beta"] in (0, 1)]
    assert {r["beta"] for r in single} == {0, 1}
    for r in single:  # beta 0 / 1: one kl_div
        assert (r["grad_forward"], r["nograd_forward"]) == (JSD_KL_TENSORS, JSD_KL_TENSORS), r
