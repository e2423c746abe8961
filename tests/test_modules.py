"""Argument dataclasses imported from the repository's own modules (FastChat's train_lora.py imports them
from fastchat/train/train.py): their fields are the script's parameters, their defaults are read where they
are written, and a finding decided by such a default is reported (and fixed) in that module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

FILES = {
    "chat/__init__.py": "",
    "chat/train/__init__.py": "",
    "chat/train/train.py": '''
        from dataclasses import dataclass, field
        from typing import Optional

        import transformers


        @dataclass
        class ModelArguments:
            model_name_or_path: Optional[str] = field(default="facebook/opt-125m")
            attn: str = field(default="eager")


        @dataclass
        class TrainingArguments(transformers.TrainingArguments):
            model_max_length: int = field(default=512)
        ''',
    "chat/train/train_lora.py": '''
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer

        from chat.train.train import ModelArguments, TrainingArguments


        def train():
            parser = HfArgumentParser((ModelArguments, TrainingArguments))
            model_args, training_args = parser.parse_args_into_dataclasses()
            model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path,
                                                         attn_implementation=model_args.attn)
            model = get_peft_model(model, LoraConfig(r=8))
            Trainer(model=model, args=training_args).train()
        ''',
    "scripts/run.sh": "deepspeed chat/train/train_lora.py --model_name_or_path meta-llama/Llama-3.1-8B \\\n"
                      "    --model_max_length 8192 --per_device_train_batch_size 1 --use_liger_kernel True\n",
}


def repo(tmp_path: Path) -> Path:
    for name, text in FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


def check(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONWARNINGS": "ignore"})


def test_imported_dataclasses_are_the_scripts_parameters_and_their_defaults_decide(tmp_path):
    root = repo(tmp_path)
    r = check(root, "--output-format", "json", "chat/train/train_lora.py")
    (d,) = json.loads(r.stdout)
    # the launch sets the model and the length (a field of the imported TrainingArguments subclass); the
    # eager default is written in chat/train/train.py, so the finding is there
    assert (d["code"], d["filename"], d["location"]) == ("TL101", "chat/train/train.py", {"row": 10, "column": 31})
    assert d["message"].startswith("chat/train/train_lora.py: eager attention at sequence length 8,192")
    r = check(root, "--fix", "chat/train/train_lora.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'attn: str = field(default="sdpa")' in (root / "chat/train/train.py").read_text()


def test_without_the_module_the_classes_stay_unknown(tmp_path):
    root = repo(tmp_path)
    (root / "chat/train/train.py").unlink()
    r = check(root, "-v", "chat/train/train_lora.py")
    assert r.returncode == 0, r.stdout
    # the classes are the repository's (unreadable here), not transformers' TrainingArguments: nothing is
    # claimed about them, and the Trainer's arguments are not read as the library defaults
    assert "model unknown" in r.stderr and "batch per device: unknown" in r.stderr


def test_an_unreadable_repository_config_class_is_not_taken_for_trls_defaults(tmp_path):
    (tmp_path / "sft.py").write_text(
        "from trl import ModelConfig, SFTTrainer, TrlParser\n"
        "from mypkg.configs import SFTConfig, ScriptArguments\n"  # the repository's own subclass, not readable here
        "script_args, training_args, model_args = TrlParser((ScriptArguments, SFTConfig, ModelConfig))"
        ".parse_args_and_config()\n"
        "SFTTrainer(model='meta-llama/Llama-3.1-8B', args=training_args).train()\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    r = check(tmp_path, "-v", "sft.py")
    assert "sequence length: unknown; batch per device: unknown" in r.stderr
    assert r.returncode == 0, r.stdout  # no SFTConfig default (1024 tokens, batch 8) is assumed for it
