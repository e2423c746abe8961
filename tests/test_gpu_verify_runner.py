"""bench/gpu_cases.py, the runner `bench/gpu_verify.sh` uses for the shared GPU configurations: its CPU dry run
(`--tiny`) on real tiny models. Truth used: none measured (the CPU cannot show CUDA peaks); the tests check that the
runner reads cases.json, builds and trains each case at a tiny geometry, runs `trainlint estimate` on the case's script
and writes the side-by-side table in GiB and its JSON. The CUDA run itself has not been done (bench/README.md)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
_spec = importlib.util.spec_from_file_location("gpu_cases", BENCH / "gpu_cases.py")
gpu_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_cases)

# A small Llama-geometry config.json (GQA: 8 heads, 2 KV heads), written into a gpu-truth-shaped folder.
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "intermediate_size": 688,
          "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32,
          "vocab_size": 32000, "max_position_embeddings": 4096, "tie_word_embeddings": False,
          "torch_dtype": "bfloat16"}
SCRIPT = textwrap.dedent("""\
    import torch
    from datasets import load_dataset
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    model = AutoModelForCausalLM.from_pretrained("models/mini", attn_implementation="{attn}", dtype=torch.{dtype})
    {lora}
    args = TrainingArguments(output_dir="out", per_device_train_batch_size={batch}, gradient_checkpointing={gc},
                             optim="adamw_torch", max_steps=2)
    trainer = Trainer(model=model, args=args, train_dataset=load_dataset("json", data_files="d.json")["train"])
    trainer.train()
    """)


def case(name, dtype="bf16", attn="sdpa", gc=False, lora=False, batch=2, seq=512, **extra):
    training = ({"mode": "lora", "r": 8, "alpha": 16, "dropout": 0.05, "target_modules": ["q_proj", "v_proj"]}
                if lora else {"mode": "full"})
    return {"name": name, "model_dir": "models/mini", "dtype": dtype, "attn_implementation": attn,
            "gradient_checkpointing": gc, "training": training, "optimizer": {"name": "adamw"}, "batch": batch,
            "seq": seq, **extra}


@pytest.fixture
def truth(tmp_path):
    root = tmp_path / "gpu-truth"
    (root / "models" / "mini").mkdir(parents=True)
    (root / "scripts").mkdir()
    (root / "models" / "mini" / "config.json").write_text(json.dumps(CONFIG))
    cases = [case("mini_lora_bf16_sdpa_mask", lora=True, attention_mask=True),
             case("mini_full_fp32_eager_gc", dtype="fp32", attn="eager", gc=True, batch=1)]
    (root / "cases.json").write_text(json.dumps(cases))
    for c in cases:
        lora = ('model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))'
                if c["training"]["mode"] == "lora" else "")
        dtype = {"bf16": "bfloat16", "fp32": "float32"}[c["dtype"]]
        (root / "scripts" / f"{c['name']}.py").write_text(SCRIPT.format(
            attn=c["attn_implementation"], dtype=dtype, lora=lora, batch=c["batch"], gc=c["gradient_checkpointing"]))
    (root / "peaks-h200.json").write_text(json.dumps({"results": [{"name": "mini_lora_bf16_sdpa_mask",
                                                                   "peak_bytes": 3 * 2**30}]}))
    return root


def run(*args, timeout=600):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, str(BENCH / "gpu_cases.py"), *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=ROOT, check=False)


def test_the_dry_run_trains_every_case_and_writes_the_table_in_gib_and_its_json(truth, tmp_path):
    out = tmp_path / "cases.md"
    r = run("--truth", str(truth), "--tiny", "--out", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert ("| case | measured GiB | estimated GiB | error % | within ±5% | H200 recorded GiB | note |" in text)
    rows = [line for line in text.splitlines() if line.startswith("| mini_")]
    assert [row.split(" | ")[0][2:] for row in rows] == ["mini_lora_bf16_sdpa_mask", "mini_full_fp32_eager_gc"]
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] == "-" and cells[3] == "-" and cells[4] == "dry run"  # nothing measured on a CPU
        assert re.fullmatch(r"\d+\.\d\d", cells[2])  # the estimate of the full-size case, in GiB
        assert cells[6].startswith("tiny model trained on CPU")
    assert rows[0].split(" | ")[5] == "3.00"  # the recorded H200 peak beside it
    data = json.loads(out.with_suffix(".json").read_text())
    assert data["tiny"] is True and [r["case"] for r in data["rows"]] == ["mini_lora_bf16_sdpa_mask",
                                                                           "mini_full_fp32_eager_gc"]
    for row in data["rows"]:
        assert row["measured_bytes"] is None and isinstance(row["estimated_bytes"], int) and row["estimated_bytes"] > 0
        assert len(row["run"]["losses"]) == 2 and all(math.isfinite(x) for x in row["run"]["losses"])
    # the LoRA case's estimate is the one trainlint prints for its script, not a number the runner made up
    (truth / "scripts" / "models").symlink_to(truth / "models", target_is_directory=True)
    est = subprocess.run([sys.executable, "-m", "trainlint", "estimate", "--format", "json",
                          "mini_lora_bf16_sdpa_mask.py"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, cwd=truth / "scripts", check=False)
    assert json.loads(est.stdout)["peak"] == data["rows"][0]["estimated_bytes"]


def test_one_case_is_built_as_the_method_says(truth):
    cases = {c["name"]: c for c in gpu_cases.load_cases(truth)}
    lora = gpu_cases.measure_one(truth, cases["mini_lora_bf16_sdpa_mask"], tiny=True)
    assert lora["device"] == "cpu" and lora["measured_bytes"] is None and (lora["batch"], lora["seq"]) == (2, 64)
    model_type, cfg = gpu_cases.model_config(truth, cases["mini_lora_bf16_sdpa_mask"], tiny=True)
    assert model_type == "llama" and cfg["hidden_size"] == 64 and cfg["num_key_value_heads"] == 2  # GQA kept
    assert gpu_cases.model_config(truth, cases["mini_lora_bf16_sdpa_mask"], tiny=False)[1]["hidden_size"] == 256


def test_bad_input_is_a_message_not_a_traceback(truth, tmp_path):
    r = run("--truth", str(truth), "--tiny", "--cases", "no_such_case", "--out", str(tmp_path / "x.md"))
    assert r.returncode == 2 and "unknown case(s): no_such_case" in r.stderr and "Traceback" not in r.stderr
    (truth / "cases.json").write_text(json.dumps([{"name": "broken"}]))
    r = run("--truth", str(truth), "--tiny", "--out", str(tmp_path / "x.md"))
    assert r.returncode == 2 and "cannot read the cases" in r.stderr and "no model_dir" in r.stderr
    assert "Traceback" not in r.stderr


def test_without_a_gpu_the_cuda_run_says_so_in_its_row(truth, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the run would measure")
    out = tmp_path / "cuda.md"
    r = run("--truth", str(truth), "--cases", "mini_full_fp32_eager_gc", "--out", str(out))
    assert r.returncode == 0, r.stderr
    row = next(line for line in out.read_text().splitlines() if line.startswith("| mini_full"))
    assert "no CUDA device (use --tiny for the CPU dry run)" in row and "| - |" in row


SHARED = gpu_cases.DEFAULT_TRUTH


@pytest.mark.skipif(not (SHARED / "cases.json").exists(), reason=f"no shared GPU cases here ({SHARED})")
def test_every_shared_case_parses_and_builds_at_a_tiny_geometry():
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cases = gpu_cases.load_cases(SHARED)
    assert len(cases) == 14
    for c in cases:
        model_type, cfg = gpu_cases.model_config(SHARED, c, tiny=True)
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **cfg),
                                                 attn_implementation=c["attn_implementation"], dtype=torch.float32)
        assert sum(p.numel() for p in model.parameters()) < 2_000_000, c["name"]  # tiny, whatever the original
        assert (SHARED / "scripts" / f"{c['name']}.py").exists()  # the script the estimate runs on
