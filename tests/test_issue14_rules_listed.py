"""The five rules of issue 14 are everywhere a rule is listed: `rule --all`, `rule CODE`, SARIF's rule metadata,
`--statistics`."""

import json
import subprocess
import sys

import pytest

NEW = {"TL202": "checkpointing-off-over-budget", "TL203": "loss-kept-with-graph", "TL302": "eval-logits-accumulated",
       "TL501": "frozen-weights-in-fp32", "TL701": "run-does-not-fit"}


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "trainlint", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def test_rule_all_lists_them():
    out = _cli("rule", "--all").stdout
    for code, name in NEW.items():
        assert f"{code}\t{name}\t" in out


@pytest.mark.parametrize("code", sorted(NEW))
def test_rule_code_prints_the_page(code):
    done = _cli("rule", code)
    assert done.returncode == 0 and done.stdout.startswith(f"# {code} {NEW[code]}\n")


def test_sarif_describes_them_and_statistics_counts_them(tmp_path):
    (tmp_path / "train.py").write_text('''
import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("gpt2")


def evaluate(loader):
    total = 0.0
    for batch in loader:
        total += model(**batch, labels=batch["input_ids"]).loss
    for batch in loader:
        total += model(**batch, labels=batch["input_ids"]).loss
''')
    sarif = json.loads(_cli("check", "--no-cache", "--output-format", "sarif", "train.py", cwd=tmp_path).stdout)
    rules = {r["id"]: r for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    for code, name in NEW.items():
        assert rules[code]["name"] == name
        assert rules[code]["helpUri"].endswith(f"rules/{code}.md")
        assert rules[code]["help"]["text"]
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["TL203", "TL203"]
    stats = _cli("check", "--no-cache", "--statistics", "train.py", cwd=tmp_path).stdout
    assert stats.strip() == "2\tTL203\tloss-kept-with-graph"
