"""The README stays true: its two quickstart commands, its sample output, its rules table; CI runs the
test command it shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from trainlint.rules import META_RULES, REGISTRY

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _command(marker: str) -> str:
    m = re.search(rf"<!-- {marker} -->\n```sh\n(.*)\n```", README)
    assert m, marker
    return m.group(1)


def test_quickstart_has_exactly_two_commands_and_ci_runs_the_test_one():
    assert README.count("<!-- main-command -->") == 1 and README.count("<!-- test-command -->") == 1
    assert _command("main-command") == "pip install . && trainlint check examples/"
    assert "python -m pytest" in _command("test-command")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "<!-- test-command -->" in ci and 'bash -c "$cmd"' in ci


def test_sample_output_in_the_readme_is_what_the_examples_produce():
    r = subprocess.run([sys.executable, "-m", "trainlint", "check", "examples/"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1
    sample = re.search(r"```\n(examples/.*?)```", README, re.S).group(1).strip().splitlines()
    assert sample and all(line in r.stdout.splitlines() for line in sample), r.stdout
    assert [line.split(": ")[1].split()[0] for line in r.stdout.splitlines() if line.startswith("examples/")] == [
        "TL301", "TL201", "TL101"]


def test_rules_table_lists_every_rule():
    for code, rule in REGISTRY.items():
        assert f"| {code} | {rule.name} |" in README
    for code, (name, _) in META_RULES.items():
        assert f"| {code} | {name} |" in README
