"""`llamafactory-cli train --key value ...` written in a shell launcher, with no config file: LLaMA-Factory hands
the flags to HfArgumentParser (llamafactory/hparams/parser.py read_args), so the launcher is the run's config and
the same rules apply to it, found at its flags and advised in its own spelling."""

from __future__ import annotations

from pathlib import Path

from test_launch import findings, run

LAUNCHER = """\
#!/bin/bash
set -x

MODEL_PATH=Qwen/Qwen2.5-7B-Instruct

llamafactory-cli train \\
    --model_name_or_path ${MODEL_PATH} \\
    --stage sft \\
    --do_train \\
    --finetuning_type lora \\
    --lora_target all \\
    --template qwen \\
    --cutoff_len 4096 \\
    --output_dir saves/lora/sft \\
    --per_device_train_batch_size 2 \\
    --gradient_accumulation_steps 8 \\
    --bf16 %s
"""


def check(tmp_path: Path, text: str, name: str = "train_lora.sh") -> list[dict]:
    (tmp_path / name).write_text(text)
    return findings(run("check", "--output-format", "json", "--no-cache", name, cwd=tmp_path))


def test_flags_are_the_config_the_rules_read(tmp_path):
    (d,) = check(tmp_path, LAUNCHER % "")
    assert d["code"] == "TL301" and d["filename"] == "train_lora.sh"
    assert d["location"]["row"] == 7  # the model's flag: `${MODEL_PATH}` is the Qwen2.5 default set above it
    assert "152,064-token vocabulary" in d["message"] and "[2 x 4,096 x 152,064]" in d["message"]
    # advised as a flag, not as the YAML key the same finding would name in a config file; no YAML edit offered
    assert "pass --enable_liger_kernel true" in d["message"] and "enable_liger_kernel:" not in d["message"]
    assert d["fix"] is None


def test_the_fused_loss_flag_is_read(tmp_path):
    assert check(tmp_path, LAUNCHER % "\\\n    --enable_liger_kernel true") == []
    # `--enable_liger_kernel` alone is True too (HfArgumentParser's bool fields take an optional value)
    assert check(tmp_path, LAUNCHER % "\\\n    --enable_liger_kernel") == []
    # and false means false
    assert [d["code"] for d in check(tmp_path, LAUNCHER % "\\\n    --enable_liger_kernel false")] == ["TL301"]


def test_the_lmf_alias_runs_the_same(tmp_path):
    assert [d["code"] for d in check(tmp_path, (LAUNCHER % "").replace("llamafactory-cli", "lmf"))] == ["TL301"]


def test_a_flag_whose_value_the_caller_gives_says_less(tmp_path):
    text = (LAUNCHER % "").replace("${MODEL_PATH}", "$1")
    assert check(tmp_path, text) == []  # the model is `$1`: unknown, no vocabulary, no finding


def test_a_config_file_launch_is_checked_as_that_file_not_twice(tmp_path):
    (tmp_path / "sft.yaml").write_text("model_name_or_path: Qwen/Qwen2.5-7B-Instruct\nstage: sft\ndo_train: true\n"
                                       "finetuning_type: lora\ntemplate: qwen\ncutoff_len: 4096\n"
                                       "output_dir: out\nper_device_train_batch_size: 2\nbf16: true\n")
    (tmp_path / "run.sh").write_text("llamafactory-cli train sft.yaml\n")
    data = findings(run("check", "--output-format", "json", "--no-cache", ".", cwd=tmp_path))
    assert [(d["code"], d["filename"]) for d in data] == [("TL301", "sft.yaml")]
