"""One finding, said as the file it lands in writes a setting: a Python keyword in a script, the framework's own key
in an axolotl or LLaMA-Factory config, a flag on `llamafactory-cli train`'s command line. The front end makes the
Spelling (trainlint/spelling.py) and the rules word their advice through it; nothing rewrites a message afterwards."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from trainlint.config import Settings
from trainlint.knowledge.versions import project_pins
from trainlint.lint import enabled_codes, lint_file
from trainlint.spelling import PYTHON, Spelling

from test_launch import findings, run


def test_a_spelling_writes_a_setting_three_ways():
    lf = (("attn_implementation", "flash_attn"),)
    values = ((("attn_implementation", "eager"), "disabled"),)
    assert PYTHON.setting("attn_implementation", "eager") == 'attn_implementation="eager"'
    assert PYTHON.advise("use_liger_kernel", True, "why") == "set use_liger_kernel=True (why)"
    assert Spelling("yaml", lf, values).setting("attn_implementation", "eager") == "flash_attn: disabled"
    assert Spelling("flag", lf, values).advise("attn_implementation", "eager") == "pass --flash_attn disabled"
    assert Spelling("yaml").advise("gradient_accumulation_steps", 8) == "set gradient_accumulation_steps: 8"
    assert Spelling("yaml", unsettable=("use_liger_kernel",)).can_set("use_liger_kernel") is False
    with pytest.raises(ValueError):
        Spelling("toml")


SCRIPT = """\
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B-Instruct", dtype="bfloat16")
    args = TrainingArguments(output_dir="out", per_device_train_batch_size=2, bf16=True, auto_find_batch_size=True)
    batch = tokenizer(texts, max_length=4096, truncation=True)
    Trainer(model=model, args=args, train_dataset=data).train()
"""
LF = """\
    model_name_or_path: Qwen/Qwen2.5-7B-Instruct
    stage: sft
    do_train: true
    finetuning_type: lora
    template: qwen
    cutoff_len: 4096
    per_device_train_batch_size: 2
    auto_find_batch_size: true
    bf16: true
"""
AXOLOTL = """\
    base_model: Qwen/Qwen2.5-7B-Instruct
    adapter: lora
    lora_r: 16
    sequence_len: 4096
    micro_batch_size: 2
    auto_find_batch_size: true
    bf16: true
"""
LAUNCHER = """\
    #!/bin/bash
    llamafactory-cli train \\
        --model_name_or_path Qwen/Qwen2.5-7B-Instruct \\
        --stage sft \\
        --do_train \\
        --finetuning_type lora \\
        --template qwen \\
        --cutoff_len 4096 \\
        --per_device_train_batch_size 2 \\
        --auto_find_batch_size true \\
        --bf16
"""


def _messages(tmp_path: Path, name: str, text: str) -> dict[str, str]:
    project_pins.cache_clear()
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    s = Settings(root=tmp_path)
    return {d.code: d.message for d in lint_file(path, s, enabled_codes(s)).diagnostics}


def test_the_fused_loss_advice_in_each_front_ends_spelling(tmp_path):
    script = _messages(tmp_path, "train.py", SCRIPT)["TL301"]
    assert script.startswith("Trainer computes an unfused cross-entropy")
    assert script.endswith("; set use_liger_kernel=True (needs the liger-kernel package and a CUDA GPU)")
    lf = _messages(tmp_path, "lf.yaml", LF)["TL301"]
    assert lf.startswith("LLaMA-Factory's trainer (a Seq2SeqTrainer) computes an unfused cross-entropy")
    assert lf.endswith("; set enable_liger_kernel: true (LLaMA-Factory then fuses the loss for stage pt/sft; needs "
                       "the liger-kernel package and a CUDA GPU)")
    ax = _messages(tmp_path, "ax.yml", AXOLOTL)["TL301"]
    assert ax.startswith("axolotl's trainer (a transformers Trainer) computes an unfused cross-entropy")
    assert ax.endswith("; list axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin in plugins: (or "
                       "axolotl.integrations.liger.LigerPlugin with liger_fused_linear_cross_entropy: true; either "
                       "needs its package and a CUDA GPU)")
    (tmp_path / "train_lora.sh").write_text(textwrap.dedent(LAUNCHER))
    flags = {d["code"]: d["message"] for d in findings(run("check", "--output-format", "json", "--no-cache",
                                                           "train_lora.sh", cwd=tmp_path))}
    assert flags["TL301"].endswith("; pass --enable_liger_kernel true (LLaMA-Factory then fuses the loss for stage "
                                   "pt/sft; needs the liger-kernel package and a CUDA GPU)")
    # the same figures in every front end: only the wording of the setting differs
    figures = "the [2 x 4,096 x 152,064] logits are ~2.3 GiB in bf16"
    assert all(figures in m for m in (script, lf, ax, flags["TL301"]))


def test_auto_find_batch_size_is_named_as_it_was_written(tmp_path):
    tail = ("on each out-of-memory retry the Trainer multiplies the batch by 0.9 and never rescales "
            "gradient_accumulation_steps, so the effective batch (and the learning-rate schedule) changes silently; ")
    assert _messages(tmp_path, "train.py", SCRIPT)["TL401"] == (
        f"auto_find_batch_size=True: {tail}set per_device_train_batch_size and raise gradient_accumulation_steps instead")
    assert _messages(tmp_path, "ax.yml", AXOLOTL)["TL401"] == (
        f"auto_find_batch_size: true: {tail}set micro_batch_size and raise gradient_accumulation_steps instead")
    assert _messages(tmp_path, "lf.yaml", LF)["TL401"] == (
        f"auto_find_batch_size: true: {tail}set per_device_train_batch_size and raise gradient_accumulation_steps "
        f"instead")
    (tmp_path / "train_lora.sh").write_text(textwrap.dedent(LAUNCHER))
    flags = {d["code"]: d["message"] for d in findings(run("check", "--output-format", "json", "--no-cache",
                                                           "train_lora.sh", cwd=tmp_path))}
    assert flags["TL401"].startswith("--auto_find_batch_size true: on each out-of-memory retry")


DPO = """\
    base_model: meta-llama/Llama-3.2-1B
    rl: dpo
    adapter: lora
    lora_r: 16
    sequence_len: 4096
    micro_batch_size: 2
    bf16: true
    attn_implementation: sdpa
"""


def test_axolotl_dpo_liger_is_its_own_key_from_0_18(tmp_path):
    # axolotl 0.19.0 core/trainers/dpo/__init__.py passes dpo_use_liger_kernel as DPOConfig.use_liger_kernel
    (tmp_path / "requirements.txt").write_text("axolotl==0.19.0\n")
    message = _messages(tmp_path, "ax.yml", DPO)["TL301"]
    assert "set dpo_use_liger_kernel: true (needs the liger-kernel package and a CUDA GPU)" in message
    assert "TL301" not in _messages(tmp_path, "ax.yml", DPO + "    dpo_use_liger_kernel: true\n")
    # axolotl 0.12.0 has no such key (and drops unknown keys): no key is advised
    (tmp_path / "requirements.txt").write_text("axolotl==0.12.0\n")
    message = _messages(tmp_path, "ax.yml", DPO)["TL301"]
    assert "liger_kernel" not in message.split("; ")[-1]
