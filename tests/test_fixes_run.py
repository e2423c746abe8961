"""The fixes are valid for the installed libraries (issue 19): a script with TL101 and TL301 is fixed with
`--fix --unsafe-fixes`, and the fixed script is then run with the real transformers / peft on CPU on a tiny
model built from a config: the edited calls are accepted and do what the fix says. And TL201's silence on the
installed transformers is checked against the real library: there, LoRA + checkpointing does train."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import save_tiny_llama

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("peft")

SCRIPT = '''
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained({tiny!r}, attn_implementation='eager')
model = get_peft_model(model, LoraConfig(r=4, target_modules=['q_proj', 'v_proj']))
model.gradient_checkpointing_enable()
args = TrainingArguments(output_dir={out!r}, per_device_train_batch_size=2, max_steps=1, report_to=[])
max_length = 4096

if __name__ == "__main__":  # (not run by the check below: liger-kernel is not installed here)
    Trainer(model=model, args=args).train()
'''

CHECK = '''
import runpy
import torch

ns = runpy.run_path({script!r})
model, args = ns["model"], ns["args"]
assert model.config._attn_implementation == "sdpa", model.config._attn_implementation
assert args.use_liger_kernel is True
model.train()
ids = torch.randint(0, 1000, (1, 16))
model(input_ids=ids, labels=ids).loss.backward()
grads = [p.grad for n, p in model.named_parameters() if "lora_" in n]
assert grads and all(g is not None for g in grads), "the adapters got no gradient"
print("ok")
'''


def _tiny(path: Path) -> None:
    save_tiny_llama(path, vocab_size=128_256, max_position_embeddings=8192)


def test_fixed_script_runs_with_the_real_libraries(tmp_path):
    tiny = tmp_path / "tiny-llama"
    _tiny(tiny)
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT).lstrip().format(tiny=str(tiny), out=str(tmp_path / "out")))
    before = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "train.py"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    codes = {line.split()[1] for line in before.stdout.splitlines() if ": TL" in line}
    assert {"TL101", "TL301"} <= codes and "TL201" not in codes, before.stdout
    fixed = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--fix", "--unsafe-fixes",
                            "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in fixed.stderr
    text = script.read_text()
    assert "attn_implementation='sdpa'" in text and "use_liger_kernel=True" in text
    run = subprocess.run([sys.executable, "-c", CHECK.format(script=str(script))], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]


def test_tl201_silence_on_the_installed_transformers_is_the_real_behaviour(tmp_path):
    """transformers >= 5 (installed here): reentrant checkpointing with LoRA still gives the adapters gradients, so
    TL201 stays quiet (see rules/TL201.md); the probe runs the unfixed script and backpropagates once."""
    tiny = tmp_path / "tiny-llama"
    _tiny(tiny)
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT).lstrip().format(tiny=str(tiny), out=str(tmp_path / "out")))
    probe = CHECK.format(script=str(script)).replace('assert model.config._attn_implementation == "sdpa", '
                                                      'model.config._attn_implementation\n', "").replace(
        "assert args.use_liger_kernel is True\n", "")
    run = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]


FROZEN_FP32 = '''
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained({tiny!r})
model = get_peft_model(model, LoraConfig(r=4, target_modules=['q_proj', 'v_proj']))

if __name__ == "__main__":  # (not run by the check below: bf16 training needs a GPU)
    args = TrainingArguments(output_dir="out", bf16=True, max_steps=1, report_to=[])
    Trainer(model=model, args=args).train()
'''


def test_tl501_fixed_load_keyword_is_accepted_by_the_installed_transformers(tmp_path):
    """The checkpoint is saved in fp32 and transformers 5 loads "auto": TL501 fires; its fix writes the keyword
    the installed release takes (`dtype=` from 4.56), and the real from_pretrained then loads bf16 weights."""
    tiny = tmp_path / "tiny-llama"
    _tiny(tiny)
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(FROZEN_FP32).lstrip().format(tiny=str(tiny)))
    fixed = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--select", "TL501", "--fix",
                            "--unsafe-fixes", "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in fixed.stderr and fixed.returncode == 0, fixed.stdout
    assert "dtype=torch.bfloat16" in script.read_text()
    check = ("import runpy, torch\nns = runpy.run_path(%r)\n"
             "assert {p.dtype for n, p in ns['model'].named_parameters() if 'lora_' not in n} == {torch.bfloat16}\n"
             "print('ok')\n" % str(script))
    run = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
