"""Review suggestions (`--output-format rdjson`) land on the right lines: checked against the rdjson schema
written from reviewdog's proto (tests/data/report/rdjson.schema.json; reviewdog itself does not install from
pip, npm or apt), and by applying each suggestion the way reviewdog's github-pr-review reporter and GitHub do
(service/github/github.go: every suggestion of a comment covers the comment's lines, a suggestion with
columns is completed with the rest of its first and last lines, and GitHub replaces those whole lines).
The result must be the file `trainlint check --fix --unsafe-fixes` writes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data" / "report"

LORA = '''from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation="sdpa")
model = get_peft_model(model, LoraConfig(r=8))
args = TrainingArguments(
    output_dir="o",
    per_device_train_batch_size=4,
    run_name="modèle-é"
)
Trainer(model=model, args=args).train()
'''
SFT = '''from transformers import AutoModelForCausalLM
from trl import SFTConfig, TrlParser

(config,) = TrlParser((SFTConfig,)).parse_args_and_config()
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation="eager")
'''
TRAIN_SH = "accelerate launch sft.py \\\n    --output_dir out \\\n    --max_length 8192\n"
ARGS_PY = '''from transformers import HfArgumentParser, TrainingArguments
(args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
'''
RUN_SH = "torchrun --nproc_per_node 8 hf.py \\\n    --per_device_train_batch_size 8 \\\n    --gradient_accumulation_steps 2\n"


def notebook(code: str) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": code.splitlines(keepends=True)}]}, indent=1) + "\n"


def trainlint(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", *args], cwd=cwd,
                          capture_output=True, text=True, encoding="utf-8", env=env, timeout=300)


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=cwd, check=True,
                   capture_output=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    root.mkdir()
    files = {"lora.py": LORA, "sft.py": SFT, "train.sh": TRAIN_SH, "hf.py": ARGS_PY, "run.sh": RUN_SH,
             "nb.ipynb": notebook("from transformers import AutoModelForCausalLM\nMAX_SEQ_LENGTH = 8192\n"
                                  "m = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.1-8B', "
                                  "attn_implementation='eager')\n")}
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    (root / "run.sh").write_text(RUN_SH.replace("batch_size 8", "batch_size 4"), encoding="utf-8")  # TL401
    return root


@pytest.fixture
def rdjson(project: Path) -> dict:
    r = trainlint(project, "--output-format", "rdjson", ".")
    assert r.returncode == 1, r.stdout + r.stderr
    return json.loads(r.stdout)


def by_code(result: dict, code: str, path: str) -> dict:
    (d,) = [d for d in result["diagnostics"] if d["code"]["value"] == code and d["location"]["path"] == path]
    return d


def github_applies(text: str, d: dict) -> str:
    """What accepting the diagnostic's suggestion on GitHub does to `text`, as reviewdog builds it."""
    lines = [line.encode("utf-8") for line in text.split("\n")]
    first_s, *others = d["suggestions"]
    start, end = first_s["range"]["start"], first_s["range"].get("end", first_s["range"]["start"])
    comment = (start["line"], end.get("line") or start["line"])  # githubCommentLineRange: the first suggestion's
    assert d["location"]["path"]
    blocks = []
    for s in [first_s, *others]:
        s_start, s_end = s["range"]["start"], s["range"].get("end", s["range"]["start"])
        # buildSingleSuggestion: "GitHub comment range and suggestion line range must be same"
        assert (s_start["line"], s_end.get("line") or s_start["line"]) == comment, "reviewdog would reject it"
        body = s["text"].encode("utf-8")
        if s_start.get("column") or s_end.get("column"):  # buildNonLineBasedSuggestion: byte columns
            body = lines[s_start["line"] - 1][:max(s_start.get("column", 0) - 1, 0)] + body + \
                lines[s_end["line"] - 1][max(s_end.get("column", 0) - 1, 0):]
        blocks.append(body)
    assert len(blocks) == 1, "several suggestions on one comment are alternatives on GitHub, not one change"
    first, last = comment
    new = lines[:first - 1] + blocks[0].split(b"\n") + lines[last:]
    return b"\n".join(new).decode("utf-8")


def fixed_copy(project: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "fixed"
    shutil.copytree(project, copy)
    trainlint(copy, "--fix", "--unsafe-fixes", ".")
    return copy


def test_rdjson_output_validates_against_the_schema_from_reviewdogs_proto(rdjson):
    import jsonschema

    schema = json.loads((DATA / "rdjson.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    errors = list(jsonschema.Draft7Validator(schema).iter_errors(rdjson))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]
    assert {(d["code"]["value"], d["location"]["path"]) for d in rdjson["diagnostics"]} == {
        ("TL301", "lora.py"), ("TL101", "train.sh"), ("TL101", "sft.py"), ("TL401", "run.sh"), ("TL101", "nb.ipynb")}


def test_a_fix_of_several_edits_is_one_suggestion_github_applies_as_fix_does(project, rdjson, tmp_path):
    d = by_code(rdjson, "TL301", "lora.py")
    (s,) = d["suggestions"]
    # the comma after the last argument (line 9) and the new keyword line before ')' (line 10): lines 9-10
    assert s["range"]["start"] == {"line": 9, "column": 1}
    assert s["range"]["end"] == {"line": 10, "column": 2}
    assert s["text"] == '    run_name="modèle-é",\n    use_liger_kernel=True\n)'
    after = github_applies(LORA, d)
    assert after == (fixed_copy(project, tmp_path) / "lora.py").read_text(encoding="utf-8")
    assert after != LORA


def test_a_launch_value_fix_lands_on_the_line_it_edits(project, rdjson, tmp_path):
    d = by_code(rdjson, "TL401", "run.sh")
    assert d["location"]["range"]["start"]["line"] == 2  # the batch that shrank ...
    (s,) = d["suggestions"]
    assert s["range"]["start"]["line"] == s["range"]["end"]["line"] == 3  # ... the accumulation it raises
    text = (project / "run.sh").read_text(encoding="utf-8")
    assert github_applies(text, d) == (fixed_copy(project, tmp_path) / "run.sh").read_text(encoding="utf-8")


def test_a_fix_in_another_file_is_suggested_in_that_file(project, rdjson, tmp_path):
    finding = by_code(rdjson, "TL101", "train.sh")
    assert "suggestions" not in finding
    assert finding["message"].endswith("(the fix edits sft.py: suggested there)")
    assert finding["location"]["range"]["start"] == {"line": 3, "column": 18}  # where 8192 is written
    there = by_code(rdjson, "TL101", "sft.py")
    assert there["message"] == 'TL101 fix for train.sh:3:18: Set attn_implementation="sdpa"'
    assert there["location"]["range"] == there["suggestions"][0]["range"]
    assert github_applies(SFT, there) == (fixed_copy(project, tmp_path) / "sft.py").read_text(encoding="utf-8")


def test_a_notebook_fix_is_a_comment_that_says_why_it_has_no_suggestion(rdjson):
    d = by_code(rdjson, "TL101", "nb.ipynb")
    assert d["location"] == {"path": "nb.ipynb"} and "suggestions" not in d
    assert d["message"].startswith("cell 1, line 3, column ")
    assert "fix not suggested: a notebook's lines are its cells' and a suggestion would have to edit the .ipynb " \
           "JSON; `trainlint check --fix nb.ipynb` applies it" in d["message"]
