"""What cannot be read, stated by the user in [tool.trainlint]: `launches` (the arguments a script is run with when
nothing in the repository launches it) and `world-size` (the processes its run uses), recorded as the source."""

from __future__ import annotations

import json
from pathlib import Path

from test_launch import run

SCRIPT = '''
from dataclasses import dataclass, field
from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments


@dataclass
class ModelArguments:
    model_name_or_path: str = field(default=None)


parser = HfArgumentParser((ModelArguments, TrainingArguments))
model_args, training_args = parser.parse_args_into_dataclasses()
model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
Trainer(model=model, args=training_args).train()
'''
ARGS = "--model_name_or_path meta-llama/Llama-3.1-8B --output_dir out --per_device_train_batch_size 2"


def project(tmp_path: Path, table: str) -> Path:
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "pyproject.toml").write_text("[tool.trainlint]\n" + table)
    return tmp_path


def codes(tmp_path: Path) -> list[str]:
    r = run("check", "--output-format", "json", "--no-cache", "train.py", cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    return [d["code"] for d in json.loads(r.stdout)]


def test_a_stated_launch_replaces_the_defaults(tmp_path):
    project(tmp_path, "")
    assert codes(tmp_path) == []  # the model is a parameter nobody sets: unknown, nothing claimed
    project(tmp_path, f'launches = {{ "train.py" = "{ARGS}" }}\n')
    assert codes(tmp_path) == ["TL301"]  # Llama-3.1-8B's 128,256-token vocabulary, unfused
    r = run("check", "-v", "--no-cache", "train.py", cwd=tmp_path)
    assert "launch: " in r.stderr and 'pyproject.toml launches."train.py"' in r.stderr
    assert "batch per device: 2 (launch " in r.stderr


def test_a_launch_found_in_the_repository_wins(tmp_path):
    project(tmp_path, f'launches = {{ "train.py" = "{ARGS}" }}\n')
    (tmp_path / "run.sh").write_text("python train.py --model_name_or_path HuggingFaceTB/SmolLM2-360M --output_dir o\n")
    assert codes(tmp_path) == []  # the launcher's model (a 49,152-token vocabulary), not the stated one


def test_a_stated_world_size_shards_the_estimate(tmp_path):
    project(tmp_path, f'launches = {{ "train.py" = "{ARGS} --fsdp full_shard" }}\nworld-size = {{ "*.py" = 8 }}\n')
    r = run("estimate", "train.py", cwd=tmp_path)
    assert "zero3 over 8 GPU(s)" in r.stdout, r.stdout + r.stderr
    assert 'world-size."*.py"' in r.stdout


def test_bad_values_are_a_clear_error(tmp_path):
    project(tmp_path, 'launches = { "train.py" = 3 }\n')
    r = run("check", "train.py", cwd=tmp_path)
    assert r.returncode == 2 and "`launches.train.py` must be a string of arguments, got 3" in r.stderr
    project(tmp_path, 'world-size = { "train.py" = 0 }\n')
    r = run("check", "train.py", cwd=tmp_path)
    assert r.returncode == 2 and "world-size.train.py" in r.stderr and "Traceback" not in r.stderr
