"""A finding whose figures come from a geometry taken from another checkpoint's name (a fine-tune, a re-upload)
says so, carries it as an assumption in the machine formats, and `--certain-only` hides it."""

from __future__ import annotations

import json

from test_launch import run

SCRIPT = '''
from transformers import AutoModelForCausalLM
from trl import SFTConfig, SFTTrainer

model = AutoModelForCausalLM.from_pretrained("{model}", attn_implementation="eager")
trainer = SFTTrainer(model=model, args=SFTConfig(output_dir="o", max_length=8192, per_device_train_batch_size=1))
trainer.train()
'''


def check(tmp_path, model, *extra):
    (tmp_path / "train.py").write_text(SCRIPT.replace("{model}", model))
    r = run("check", "--output-format", "json", "--no-cache", "--select", "TL101", *extra, "train.py", cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def test_a_name_derived_geometry_is_stated_and_is_an_assumption(tmp_path):
    (d,) = check(tmp_path, "allenai/Llama-3.1-Tulu-3-8B-SFT")
    assert "(assumed the geometry of meta-llama/Llama-3.1-8B from the name" in d["message"]
    assert any(a.startswith("assumed the geometry of meta-llama/Llama-3.1-8B") for a in d["assumptions"])
    assert check(tmp_path, "allenai/Llama-3.1-Tulu-3-8B-SFT", "--certain-only") == []


def test_a_catalog_model_is_certain(tmp_path):
    (d,) = check(tmp_path, "meta-llama/Llama-3.1-8B")
    assert "assumed the geometry" not in d["message"] and not d.get("assumptions")
