"""Sharding from what launches the run (issue 28, part 3): what an accelerate config or the trainer's DeepSpeed /
FSDP arguments move to the CPU, and FSDP's own activation checkpointing, per launch config shape. The layout is the
TRL recipe one (README `accelerate launch --config_file ... sft.py --config recipe.yaml`), full fine-tuning of
Llama-3.1-8B over 8 processes, so the optimizer state is large enough to see."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from test_launch import run

LAYOUT = Path(__file__).parent / "fixtures" / "launch" / "layouts" / "trl_recipe"
GIB = 1024 ** 3

FSDP = """\
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_offload_params: {offload}
  fsdp_activation_checkpointing: {checkpointing}
  fsdp_sharding_strategy: FULL_SHARD
  fsdp_version: 1
machine_rank: 0
mixed_precision: bf16
num_machines: 1
num_processes: 8
"""


def repo(tmp_path: Path, accelerate: str | None = None, recipe_extra: str = "") -> Path:
    root = tmp_path / "r"
    shutil.copytree(LAYOUT, root)
    recipe = root / "recipes" / "llama3" / "sft_eager.yaml"
    text = recipe.read_text().replace("use_peft: true", "use_peft: false").replace("attn_implementation: eager",
                                                                                    "attn_implementation: sdpa")
    recipe.write_text(text + recipe_extra)
    if accelerate is not None:
        (root / "recipes" / "accelerate" / "zero3.yaml").write_text(accelerate)
    return root


def estimate(root: Path) -> dict:
    r = run("estimate", "README.md", "--format", "json", cwd=root)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_zero3_without_offload_keeps_the_optimizer_state_sharded_on_the_gpu(tmp_path):
    data = estimate(repo(tmp_path))
    assert data["consumers"]["optimizer"] > 3 * GIB  # 8.03 B x 2 bf16 AdamW states / 8 processes ~ 3.7 GiB
    assert "offloaded" not in data["plan"]


def test_accelerate_deepspeed_optimizer_offload(tmp_path):
    base = (LAYOUT / "recipes" / "accelerate" / "zero3.yaml").read_text()
    data = estimate(repo(tmp_path, base.replace("offload_optimizer_device: none", "offload_optimizer_device: cpu")))
    assert data["consumers"]["optimizer"] == 0
    assert data["consumers"]["gradients"] > 0  # DeepSpeed's reduce buckets stay on the GPU: still counted
    assert data["plan"].endswith("zero3 over 8 GPU(s), optimizer offloaded to the CPU")
    assert "offloaded to the CPU: optimizer (accelerate DEEPSPEED config (recipes/accelerate/zero3.yaml:5))" \
        in data["assumptions"]


def test_accelerate_deepspeed_param_offload_keeps_two_layers_of_weights(tmp_path):
    base = (LAYOUT / "recipes" / "accelerate" / "zero3.yaml").read_text()
    plain = estimate(repo(tmp_path / "a", base))["consumers"]["weights"]
    data = estimate(repo(tmp_path / "b", base.replace("offload_param_device: none", "offload_param_device: nvme")))
    weights = data["consumers"]["weights"]
    # 16 GB of bf16 weights over 32 layers: two gathered layers ~ 0.9 GiB, below the 8-way shard (~1.9 GiB)
    assert 0.8 * GIB < weights < plain


def test_accelerate_fsdp_cpu_offload_and_its_own_activation_checkpointing(tmp_path):
    root = repo(tmp_path, FSDP.format(offload="true", checkpointing="true"),
                recipe_extra="")
    recipe = root / "recipes" / "llama3" / "sft_eager.yaml"
    recipe.write_text(recipe.read_text().replace("gradient_checkpointing: true\n", ""))
    data = estimate(root)
    assert "checkpointing on" in data["plan"]  # the FSDP plugin checkpoints each layer itself
    assert data["consumers"]["optimizer"] == 0 and data["consumers"]["gradients"] == 0
    assert "params, gradients, optimizer offloaded to the CPU" in data["plan"]


def test_accelerate_fsdp_without_offload_or_checkpointing(tmp_path):
    root = repo(tmp_path, FSDP.format(offload="false", checkpointing="false"))
    recipe = root / "recipes" / "llama3" / "sft_eager.yaml"
    recipe.write_text(recipe.read_text().replace("gradient_checkpointing: true", "gradient_checkpointing: false"))
    data = estimate(root)
    assert "checkpointing off" in data["plan"] and "offloaded" not in data["plan"]
    assert data["consumers"]["optimizer"] > 3 * GIB


def test_trainer_deepspeed_json_with_offload(tmp_path):
    root = repo(tmp_path, recipe_extra="deepspeed: ds_offload.json\n")
    (root / "ds_offload.json").write_text(json.dumps({"zero_optimization": {
        "stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True}}, "bf16": {"enabled": "auto"}}))
    data = estimate(root)
    assert data["consumers"]["optimizer"] == 0
    assert "offloaded to the CPU: optimizer (the trainer's arguments)" in data["assumptions"]


def test_deprecated_cpu_offload_boolean(tmp_path):
    root = repo(tmp_path, recipe_extra="deepspeed: ds_old.json\n")
    (root / "ds_old.json").write_text(json.dumps({"zero_optimization": {"stage": 2, "cpu_offload": True}}))
    assert estimate(root)["consumers"]["optimizer"] == 0


FSDP2 = """\
distributed_type: FSDP
fsdp_config:
  fsdp_version: 2
  fsdp_reshard_after_forward: true
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
mixed_precision: bf16
num_processes: 8
"""


def test_fsdp2_with_mixed_precision_upcasts_a_lora_runs_base_before_accelerate_1_13(tmp_path):
    """huggingface/accelerate#3844: accelerate 1.6-1.12 `model.to(torch.float32)` in fsdp2_prepare_model; 1.13 upcasts
    only the parameters that train (the adapters, already fp32 under PEFT)."""
    weights = {}
    for pin in ("1.12.0", "1.13.0"):
        root = repo(tmp_path / pin, FSDP2)
        recipe = root / "recipes" / "llama3" / "sft_eager.yaml"
        recipe.write_text(recipe.read_text().replace("use_peft: false", "use_peft: true"))
        (root / "requirements.txt").write_text(f"accelerate=={pin}\ntrl\n")
        data = estimate(root)
        weights[pin] = data["consumers"]["weights"]
        upcast = [a for a in data["assumptions"] if "upcasts" in a]
        assert len(upcast) == 1, data["assumptions"]
        assert ("the whole model, the frozen base included," in upcast[0]) == (pin == "1.12.0")
    assert 1.9 < weights["1.12.0"] / weights["1.13.0"] < 2.0  # the frozen base in fp32 (adapters were already)


def test_fsdp2_full_fine_tuning_trains_fp32_parameters_in_every_release(tmp_path):
    data = estimate(repo(tmp_path, FSDP2))  # no accelerate pin: the newest known
    assert "fp32 weights" in data["plan"]
    assert any("upcasts the trained parameters to fp32" in a for a in data["assumptions"])


def test_fsdp2_without_mixed_precision_keeps_the_loaded_dtype(tmp_path):
    data = estimate(repo(tmp_path, FSDP2.replace("mixed_precision: bf16", "mixed_precision: 'no'")))
    assert "16-bit weights" in data["plan"]


def test_fsdp_no_wrap_gathers_the_whole_model(tmp_path):
    """One FSDP unit (auto_wrap_policy NO_WRAP): all parameters gathered on every GPU while it computes, the full
    gradient before the reduce-scatter; only the optimizer state stays sharded."""
    wrapped = estimate(repo(tmp_path / "a", FSDP.format(offload="false", checkpointing="false")))
    whole = estimate(repo(tmp_path / "b", FSDP.format(offload="false", checkpointing="false").replace(
        "TRANSFORMER_BASED_WRAP", "NO_WRAP")))
    assert whole["consumers"]["weights"] == 8 * wrapped["consumers"]["weights"]
    assert whole["consumers"]["gradients"] == 8 * wrapped["consumers"]["gradients"]
    assert whole["consumers"]["optimizer"] == wrapped["consumers"]["optimizer"]
    assert "zero1 over 8 GPU(s)" in whole["plan"]
