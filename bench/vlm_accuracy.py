#!/usr/bin/env python3
"""The estimate against bench/vlm_measurements.json (bench/measure_vlm.py: Qwen2.5-VL-7B LoRA under FakeTensorMode +
MemTracker, transformers 5.25.0): bench/vlm/qwen25vl_lora.py is linted and planned as `trainlint estimate` does
(catalog geometry, the tower from the catalog's vision_config, LoRA targets, checkpointing), then each measured row's
own shape is put on that plan: its sequence (text + image tokens), its patches, its LoRA targets (the tower adapted
or not: run/vision.py adapt), checkpointing on or off. As the measurement ran them: HF's full-logits loss (the
model's own ForCausalLMLoss, no TRL chunking), for-loop AdamW (no foreach temporary), CPU kernels.

    python bench/vlm_accuracy.py
    python bench/vlm_accuracy.py --llava   # LLaVA-1.5-7B (bench/measure_vlm_llava.py, bench/vlm/llava15_lora.py)
    python bench/vlm_accuracy.py --gemma3  # Gemma-3-4B-it (bench/measure_vlm_gemma3.py, bench/vlm/gemma3_lora.py)
    python bench/vlm_accuracy.py --qwen3   # Qwen3-VL-8B (bench/measure_vlm_qwen3.py, bench/vlm/qwen3vl_lora.py)
    python bench/vlm_accuracy.py --idefics3   # Idefics3-8B (bench/measure_vlm_idefics3.py, vlm/idefics3_lora.py)
    python bench/vlm_accuracy.py --paligemma  # PaliGemma-3B (bench/measure_vlm_paligemma.py, vlm/paligemma_lora.py)
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "vlm" / "qwen25vl_lora.py"
MEASUREMENTS = ROOT / "bench" / "vlm_measurements.json"
LLAVA_SCRIPT = ROOT / "bench" / "vlm" / "llava15_lora.py"
LLAVA_MEASUREMENTS = ROOT / "bench" / "vlm_measurements_llava.json"
GEMMA3_SCRIPT = ROOT / "bench" / "vlm" / "gemma3_lora.py"
GEMMA3_MEASUREMENTS = ROOT / "bench" / "vlm_measurements_gemma3.json"
QWEN3_SCRIPT = ROOT / "bench" / "vlm" / "qwen3vl_lora.py"
QWEN3_MEASUREMENTS = ROOT / "bench" / "vlm_measurements_qwen3.json"
IDEFICS3_SCRIPT = ROOT / "bench" / "vlm" / "idefics3_lora.py"
IDEFICS3_MEASUREMENTS = ROOT / "bench" / "vlm_measurements_idefics3.json"
PALIGEMMA_SCRIPT = ROOT / "bench" / "vlm" / "paligemma_lora.py"
PALIGEMMA_MEASUREMENTS = ROOT / "bench" / "vlm_measurements_paligemma.json"
TEXT_ATTN = ("q_proj", "k_proj", "v_proj", "o_proj")


def base_plan(script: Path = SCRIPT):
    from trainlint.config import Settings
    from trainlint.lint import lint_file
    from trainlint.planning import Overrides, plan_for

    ctx = lint_file(script, Settings(root=script.parent), set()).context
    return plan_for(ctx, Overrides())[0]


def plan_for_record(base, rec: dict, family: str = "Qwen2.5-VL"):
    """The base plan with the measured row's shape."""
    from trainlint.knowledge import vision_towers
    from trainlint.run.vision import adapt

    fam = next(f for f in vision_towers.FAMILIES if f.name == family)
    targets = rec["lora"]["target_modules"]
    tower = adapt(replace(base.vision, patches=rec["patches"], hooked=False), fam, targets)
    # transformers 5.25.0's gradient_checkpointing_enable hooks the frozen tower's input (run/vision.py tower_plan),
    # Qwen2-VL's and Qwen2.5-VL's, not Qwen3-VL's (knowledge/vision_towers.py vision_input_hooked)
    tower = replace(tower, hooked=rec["gradient_checkpointing"] and tower.trained == "frozen" and fam.hooked_in_5)
    return replace(base, seq=rec["seq"], checkpointing=rec["gradient_checkpointing"], lora_r=rec["lora"]["r"],
                   lora_targets=("all-linear",) if targets == "all-linear" else tuple(targets), vision=tower,
                   loss="full", optimizer="adamw_torch_fused", device="cpu")


def llava_plan_for_record(base, rec: dict, family: str = "LLaVA"):
    """The LLaVA (or Gemma 3, PaliGemma, Idefics3: its rows' tower_positions_per_image counts every tile) base plan
    with the measured row's shape: its sequence, its targets (a list that reaches
    the CLIP / SigLIP tower, or a regex over the text decoder alone: the text adapters are q/k/v/o_proj either way),
    checkpointing."""
    from trainlint.knowledge import vision_towers
    from trainlint.run.vision import adapt

    fam = next(f for f in vision_towers.FAMILIES if f.name == family)
    targets = rec["lora"]["target_modules"]
    tower = adapt(replace(base.vision, patches=rec["tower_positions_per_image"] * rec["images"], hooked=False), fam,
                  targets)
    tower = replace(tower, hooked=rec["gradient_checkpointing"] and tower.trained == "frozen")
    return replace(base, seq=rec["seq"], checkpointing=rec["gradient_checkpointing"], lora_r=rec["lora"]["r"],
                   lora_targets=TEXT_ATTN, vision=tower, loss="full", optimizer="adamw_torch_fused", device="cpu")


def compare(without_tower: bool = False, llava: bool = False, gemma3: bool = False,
            qwen3: bool = False, idefics3: bool = False,
            paligemma: bool = False) -> list[tuple[str, int, int, float]]:
    """(name, estimate, measured, error in %) per measured row; `without_tower`: the estimate before the tower was
    modelled (no tower activations or adapters; its weights, for Gemma 3 inside the catalog's num_parameters, stay
    counted there)."""
    from trainlint.memory.estimate import estimate

    script, measurements = (PALIGEMMA_SCRIPT, PALIGEMMA_MEASUREMENTS) if paligemma else \
        (IDEFICS3_SCRIPT, IDEFICS3_MEASUREMENTS) if idefics3 else \
        (GEMMA3_SCRIPT, GEMMA3_MEASUREMENTS) if gemma3 else (LLAVA_SCRIPT, LLAVA_MEASUREMENTS) \
        if llava else (QWEN3_SCRIPT, QWEN3_MEASUREMENTS) if qwen3 else (SCRIPT, MEASUREMENTS)
    base = base_plan(script)
    out = []
    for rec in json.loads(measurements.read_text())["configs"]:
        if gemma3 or idefics3 or paligemma:
            plan = llava_plan_for_record(base, rec, "Idefics3" if idefics3 else "PaliGemma" if paligemma else "Gemma 3")
        elif qwen3:
            plan = plan_for_record(base, rec, "Qwen3-VL")
        else:
            plan = llava_plan_for_record(base, rec) if llava else plan_for_record(base, rec)
        if without_tower:
            plan = replace(plan, vision=None)
        est = estimate(plan).peak
        out.append((rec["name"], est, rec["peak"], 100 * (est - rec["peak"]) / rec["peak"]))
    return out


def main(argv: list[str]) -> int:
    llava, gemma3, qwen3 = "--llava" in argv, "--gemma3" in argv, "--qwen3" in argv
    idefics3, paligemma = "--idefics3" in argv, "--paligemma" in argv
    print(f"{'configuration':<48} {'estimate':>10} {'measured':>10} {'error':>7} {'without the tower':>18}")
    kinds = dict(llava=llava, gemma3=gemma3, qwen3=qwen3, idefics3=idefics3, paligemma=paligemma)
    for (name, est, measured, err), (_, before, _, berr) in zip(compare(**kinds),
                                                                compare(without_tower=True, **kinds)):
        print(f"{name:<48} {est / 2**30:8.2f} G {measured / 2**30:8.2f} G {err:+6.1f}% "
              f"{before / 2**30:8.2f} G {berr:+6.1f}%")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main(sys.argv[1:]))
