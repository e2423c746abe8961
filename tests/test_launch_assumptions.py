"""The run as documented, with its assumptions named: a launcher's defaults (an option parser's `MODEL=...`,
`${1:-x}`, `${VAR:-x}`) are read as the documented command (no options) takes them, and a finding that rests on
one says so, in the message and as a property of JSON / SARIF / LSP; `--certain-only` hides it. Launchers are
written for the tests into a real git repository and linted with the real `trainlint` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from trainlint.diagnostics import Diagnostic, Span
from trainlint.report import lsp
from trainlint.report.formats import to_json

# The model id comes only from the launch (its dataclass default is None): with it unknown, nothing is claimed;
# with Qwen2-7B's 152,064-token vocabulary, Trainer's unfused cross-entropy is TL301.
SCRIPT = '''\
from dataclasses import dataclass, field
from typing import Optional

import torch
import transformers
from transformers import AutoModelForCausalLM, Trainer


@dataclass
class ModelArguments:
    model_name_or_path: Optional[str] = field(default=None)


@dataclass
class TrainingArguments(transformers.TrainingArguments):
    model_max_length: int = field(default=8192)


def train():
    parser = transformers.HfArgumentParser((ModelArguments, TrainingArguments))
    model_args, training_args = parser.parse_args_into_dataclasses()
    model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path, torch_dtype=torch.bfloat16)
    trainer = Trainer(model=model, args=training_args)
    trainer.train()


if __name__ == "__main__":
    train()
'''

COMMAND = '''\
torchrun --nproc_per_node 8 train.py \\
    --model_name_or_path $MODEL \\
    --bf16 True \\
    --output_dir out \\
    --per_device_train_batch_size 2
'''

WHILE_CASE = '''\
#!/bin/bash
MODEL="Qwen/Qwen2-7B"
while [[ "$1" != "" ]]; do
    case $1 in
        -m | --model )
            shift
            MODEL=$1
            ;;
    esac
    shift
done

''' + COMMAND

ASSUMED = "MODEL=Qwen/Qwen2-7B, the default at finetune.sh:2"


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


def repo(tmp_path: Path, launcher: str, name: str = "finetune.sh", pyproject: str | None = None) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "train.py").write_text(SCRIPT)
    (root / name).write_text(textwrap.dedent(launcher))
    if pyproject is not None:
        (root / "pyproject.toml").write_text(pyproject)
    git("init", "-q", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-qm", "init", cwd=root)
    return root


def check(root: Path, *args: str, fmt: str = "json"):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    r = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--output-format", fmt, *args, "."],
                       cwd=root, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout), r


def short(data: list[dict]) -> list[tuple[str, str, int]]:
    return [(d["code"], d["filename"], d["location"]["row"]) for d in data]


def test_an_option_parsers_default_model_drives_a_finding_that_names_the_assumption(tmp_path):
    data, _ = check(repo(tmp_path, WHILE_CASE))
    assert short(data) == [("TL301", "finetune.sh", 2)]  # reported where the default is written
    (d,) = data
    assert "152,064-token vocabulary" in d["message"]
    assert d["message"].endswith(f"(assuming {ASSUMED})")
    assert d["assumptions"] == [ASSUMED]


def test_certain_only_hides_a_finding_that_rests_on_a_default_and_verbose_says_so(tmp_path):
    root = repo(tmp_path, WHILE_CASE)
    data, r = check(root, "--certain-only", "--verbose")
    assert data == [] and r.returncode == 0
    assert "not reported (certain-only): finetune.sh:2:8: TL301" in r.stderr
    assert f"model_name_or_path 'Qwen/Qwen2-7B' from finetune.sh:2 (assuming {ASSUMED})" in r.stderr


def test_the_config_key_certain_only_hides_it_too(tmp_path):
    root = repo(tmp_path, WHILE_CASE, pyproject="[tool.trainlint]\ncertain-only = true\n")
    assert check(root)[0] == []


def test_a_launcher_that_sets_the_model_without_a_parser_is_certain(tmp_path):
    root = repo(tmp_path, 'MODEL="Qwen/Qwen2-7B"\n' + COMMAND)
    data, _ = check(root)
    assert short(data) == [("TL301", "finetune.sh", 1)]
    assert "assuming" not in data[0]["message"] and "assumptions" not in data[0]
    assert short(check(root, "--certain-only")[0]) == [("TL301", "finetune.sh", 1)]


def test_a_commands_own_environment_prefix_is_certain(tmp_path):
    root = repo(tmp_path, """\
        MODEL=Qwen/Qwen2-7B bash -c 'torchrun --nproc_per_node 8 train.py --model_name_or_path $MODEL --bf16 True \\
            --output_dir out --per_device_train_batch_size 2'
        """)
    data, _ = check(root, "--certain-only")
    assert short(data) == [("TL301", "finetune.sh", 1)] and "assumptions" not in data[0]


def test_a_positional_default_is_an_assumption(tmp_path):
    data, _ = check(repo(tmp_path, 'MODEL=${1:-Qwen/Qwen2-7B}\n' + COMMAND, name="train.sh"))
    assert short(data) == [("TL301", "train.sh", 1)]
    assert data[0]["assumptions"] == ["$1=Qwen/Qwen2-7B, the default at train.sh:1"]


def test_an_environment_default_is_an_assumption(tmp_path):
    data, _ = check(repo(tmp_path, 'MODEL=${MODEL:-Qwen/Qwen2-7B}\n' + COMMAND))
    assert data[0]["assumptions"] == ["MODEL=Qwen/Qwen2-7B, the default at finetune.sh:1"]


def test_getopts_keeps_the_default_as_an_assumption(tmp_path):
    data, _ = check(repo(tmp_path, """\
        MODEL=Qwen/Qwen2-7B
        while getopts "m:h" opt; do
          case $opt in
            m) MODEL=$OPTARG ;;
            h) echo "usage: $0 [-m model]"; exit 0 ;;
          esac
        done
        """ + COMMAND))
    assert short(data) == [("TL301", "finetune.sh", 1)]
    assert data[0]["assumptions"] == ["MODEL=Qwen/Qwen2-7B, the default at finetune.sh:1"]


def test_only_the_assumption_a_finding_rests_on_is_named(tmp_path):
    # the output folder is a default too, but TL301 holds whatever it is
    data, _ = check(repo(tmp_path, WHILE_CASE.replace('MODEL="Qwen/Qwen2-7B"', 'MODEL="Qwen/Qwen2-7B"\nOUT=out')
                         .replace("--output_dir out", "--output_dir $OUT")))
    assert data[0]["assumptions"] == [ASSUMED]


def test_branches_that_disagree_are_not_guessed_and_branches_that_agree_are_certain(tmp_path):
    disagree = """\
        if [ "$1" = "big" ]; then
          MODEL=Qwen/Qwen2-72B
        else
          MODEL=Qwen/Qwen2-7B
        fi
        """
    assert check(repo(tmp_path, disagree + COMMAND))[0] == []  # the model is unknown: nothing claimed
    agree = disagree.replace("Qwen2-72B", "Qwen2-7B")
    (tmp_path / "again").mkdir()
    data, _ = check(repo(tmp_path / "again", agree + COMMAND))
    assert short(data) == [("TL301", "finetune.sh", 2)] and "assumptions" not in data[0]


def test_sarif_lists_the_assumptions_as_result_properties(tmp_path):
    log, _ = check(repo(tmp_path, WHILE_CASE), fmt="sarif")
    (result,) = log["runs"][0]["results"]
    assert result["properties"] == {"assumptions": [ASSUMED]}
    assert result["message"]["text"].endswith(f"(assuming {ASSUMED})")


def test_json_keeps_ruffs_shape_for_a_certain_finding_and_lsp_carries_the_assumptions_in_data():
    span = Span(2, 8, 2, 21)
    certain = Diagnostic("TL301", "unfused-cross-entropy", "m", "finetune.sh", span)
    assumed = Diagnostic("TL301", "unfused-cross-entropy", "m", "finetune.sh", span, assumptions=(ASSUMED,))
    assert "assumptions" not in to_json(certain) and to_json(assumed)["assumptions"] == [ASSUMED]
    assert "data" not in lsp.diagnostic(certain, None)
    assert lsp.diagnostic(assumed, None)["data"] == {"assumptions": [ASSUMED]}
