"""A TL0xx finding that is the same fact met again (issue 25, "noise held down"): the same missing script run on two
lines of a launcher, one stale key copied into several framework configs, are one finding each, at the first place,
naming the others and carrying them as `related`; a rule's finding on each file stays its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def repo_with(tmp_path: Path, files: dict[str, str]) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for name, content in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content)
    return tmp_path

AXOLOTL = """\
base_model: NousResearch/Llama-2-7b-hf
datasets:
  - path: mhenrichsen/alpaca_2k_test
    type: alpaca
sequence_len: 2048
micro_batch_size: 1
gradient_accumulation_steps: 4
num_epochs: 1
learning_rate: 0.0002
flash_attention: true
{extra}
"""


def check_json(repo: Path, *args: str) -> list[dict]:
    r = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--output-format", "json", *args],
                       cwd=repo, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)


def test_a_missing_script_run_twice_by_one_launcher_is_one_finding(tmp_path):
    launcher = ("python tools/old/diff.py --a x --b y\n"
                "python tools/old/diff.py --a y --b z\n"
                "python tools/old/merge.py\n")
    repo = repo_with(tmp_path, {"run.sh": launcher, "tools/diff.py": "print(1)\n", "tools/merge.py": "print(2)\n"})
    found = [d for d in check_json(repo, ".") if d["code"] == "TL006"]
    assert [(d["filename"], d["location"]["row"]) for d in found] == [("run.sh", 1), ("run.sh", 3)]
    assert found[0]["message"].endswith("tools/diff.py has that name (moved?) (the same in line 2)")
    assert [(r["filename"], r["location"]["row"]) for r in found[0]["related"]] == [("run.sh", 2)]
    assert "related" not in found[1] and "(the same in" not in found[1]["message"]


def test_one_stale_key_in_many_configs_is_one_finding_naming_them(tmp_path):
    files = {f"examples/m{i}/lora.yml": AXOLOTL.format(extra="gptq_groupsize: 128") for i in range(5)}
    files["examples/own/lora.yml"] = AXOLOTL.format(extra="gptq_groupsize: 128\ncontext_parapllel_size: 2")
    repo = repo_with(tmp_path, files)
    found = [d for d in check_json(repo, ".") if d["code"] == "TL007"]
    assert [(d["filename"], d["message"].split(" ")[0]) for d in found] == [
        ("examples/m0/lora.yml", "gptq_groupsize"), ("examples/own/lora.yml", "context_parapllel_size")]
    assert found[0]["message"].endswith("(the same in examples/m1/lora.yml, examples/m2/lora.yml, "
                                        "examples/m3/lora.yml and 2 more)")
    assert [r["filename"] for r in found[0]["related"]] == [
        "examples/m1/lora.yml", "examples/m2/lora.yml", "examples/m3/lora.yml", "examples/m4/lora.yml",
        "examples/own/lora.yml"]
    # linted alone, each config still says it
    alone = check_json(repo, "examples/m3/lora.yml")
    assert [d["message"].split(" ")[0] for d in alone if d["code"] == "TL007"] == ["gptq_groupsize"]


def test_a_rules_finding_in_two_files_is_not_merged(tmp_path):
    script = ("from transformers import AutoModelForCausalLM\n"
              "model = AutoModelForCausalLM.from_pretrained('meta-llama/Meta-Llama-3-8B', attn_implementation='eager')\n"
              "from transformers import Trainer, TrainingArguments\n"
              "Trainer(model=model, args=TrainingArguments('o', per_device_train_batch_size=1)).train()\n")
    repo = repo_with(tmp_path, {"a.py": script, "b.py": script})
    found = check_json(repo, ".")
    assert sorted({d["filename"] for d in found if not d["code"].startswith("TL0")}) == ["a.py", "b.py"]
    assert not any("(the same in" in d["message"] for d in found)
