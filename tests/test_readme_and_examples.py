"""The README stays true: its two quickstart commands, its sample output, its rules table; CI runs the
test command it shows."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

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


def _example_blocks() -> list[tuple[str, list[str]]]:
    """The README's output blocks of a command on the bundled examples: ("trainlint ... examples/...", lines)."""
    blocks = re.findall(r"```\n\$ (trainlint [^\n]*examples/[^\n]*)\n(.*?)```", README, re.S)
    return [(command.split("#")[0].strip(), lines.rstrip("\n").splitlines()) for command, lines in blocks]


def test_the_readme_shows_estimate_and_simulate_output_on_the_bundled_examples():
    commands = [command for command, _ in _example_blocks()]
    assert any(c.startswith("trainlint estimate examples/") for c in commands), commands
    assert any(c.startswith("trainlint verify --simulate examples/") for c in commands), commands


@pytest.mark.parametrize("command, lines", _example_blocks(), ids=lambda v: v if isinstance(v, str) else "")
def test_readme_example_output_is_the_tools_output(command, lines):
    """Each line the README shows under `$ trainlint ... examples/...` is a line of that command's real output."""
    if "--simulate" in command:
        pytest.importorskip("torch")  # (the verify extra; about a minute under FakeTensorMode)
    r = subprocess.run([sys.executable, "-m", *shlex.split(command)], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    printed = r.stdout.splitlines()
    assert [line for line in lines if line not in printed] == [], r.stdout


def test_the_readme_prints_one_figure_for_the_tl101_saving():
    """The saving the README's TL101 finding prints is the one its estimate lever and verify --simulate print."""
    finding = re.search(r"TL101 .*?~([\d.,]+ GiB) off this run's peak with SDPA", README).group(1)
    lever = re.search(r"- *([\d.,]+ GiB)  SDPA / flash attention \(TL101\)", README).group(1)
    simulated = re.search(r"TL101 line \d+: \w+  predicted saving ([\d.,]+ GiB)", README).group(1)
    assert finding == lever == simulated


def test_rules_table_lists_every_rule():
    for code, rule in REGISTRY.items():
        assert f"| {code} | {rule.name} |" in README
    for code, info in META_RULES.items():
        assert f"| {code} | {info.name} |" in README
