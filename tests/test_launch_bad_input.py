"""Launchers and configs that cannot be read: a TL005 / TL006 on that file, never a traceback, and every
other file (the script they launch included) still linted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments
(training_args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation="sdpa")
Trainer(model=model, args=training_args).train()
"""


def check(repo: Path, *args: str) -> list[tuple[str, str, int, int, str]]:
    r = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--output-format", "json", *args],
                       cwd=repo, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr
    return [(d["code"], d["filename"], d["location"]["row"], d["location"]["column"], d["message"])
            for d in json.loads(r.stdout)]


def repo_with(tmp_path: Path, files: dict[str, bytes | str]) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "train.py").write_text(SCRIPT)
    for name, content in files.items():
        path = tmp_path / name
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    return tmp_path


def test_unterminated_quote_is_reported_and_the_rest_of_the_line_is_read(tmp_path):
    repo = repo_with(tmp_path, {"quote.sh": 'python train.py --use_liger_kernel True --run_name "oops\n'})
    found = check(repo, ".")
    assert [f[:4] for f in found] == [("TL005", "quote.sh", 1, 52)]
    assert "unterminated \"" in found[0][4]


def test_circular_source_is_reported_on_both_files(tmp_path):
    repo = repo_with(tmp_path, {"a.sh": "source b.sh\npython train.py --use_liger_kernel True\n",
                                "b.sh": "source a.sh\n"})
    found = check(repo, ".")
    assert [f[:2] for f in found] == [("TL005", "a.sh"), ("TL005", "b.sh")]
    assert "circular source: a.sh -> b.sh -> a.sh" in found[0][4]


def test_binary_launcher_is_reported_not_read(tmp_path):
    repo = repo_with(tmp_path, {"bin.sh": b"\x00\x01\x02binary", "ok.sh": "python train.py --use_liger_kernel True\n"})
    assert [f[:2] for f in check(repo, ".")] == [("TL005", "bin.sh")]


def test_a_launched_script_that_does_not_exist(tmp_path):
    repo = repo_with(tmp_path, {"run.sh": "cd src\npython missing.py --x 1\n"})
    found = check(repo, ".")
    assert [f[:4] for f in found[:1]] == [("TL006", "run.sh", 2, 8)]
    assert "missing.py, which does not exist (looked in the launcher's folder after its cd" in found[0][4]


def test_configs_a_launch_passes_that_do_not_load_are_reported_in_the_config(tmp_path):
    repo = repo_with(tmp_path, {"cfg.sh": "python train.py --use_liger_kernel True --deepspeed ds.json\n"
                                          "python train.py --use_liger_kernel True --deepspeed gone.json\n",
                                "ds.json": '{"zero_optimization": {"stage": 3,}}\n'})
    found = check(repo, ".")
    assert [f[:4] for f in found] == [("TL005", "cfg.sh", 2, 53), ("TL005", "ds.json", 1, 34)]
    assert "passes gone.json, which does not exist" in found[0][4]
    assert "trailing comma" in found[1][4] and "(cfg.sh passes it)" in found[1][4]


def test_a_recipe_that_is_not_yaml(tmp_path):
    (tmp_path / "sft.py").write_text(
        "from trl import ModelConfig, ScriptArguments, SFTConfig, SFTTrainer, TrlParser\n"
        "script_args, training_args, model_args = TrlParser((ScriptArguments, SFTConfig, ModelConfig))"
        ".parse_args_and_config()\n"
        "SFTTrainer(model=model_args.model_name_or_path, args=training_args).train()\n")
    repo = repo_with(tmp_path, {"run.sh": "accelerate launch sft.py --config recipe.yaml\n",
                                "recipe.yaml": "model_name_or_path: [Qwen/Qwen2-7B\n"})
    found = check(repo, ".")
    # train.py, launched by nothing, is still checked (under its defaults: unfused loss on Llama 3's vocabulary)
    assert [f[:2] for f in found] == [("TL005", "recipe.yaml"), ("TL301", "train.py")]
    assert "YAML error" in found[0][4]
