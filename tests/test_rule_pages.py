"""Every rule has a page with the standard sections, and the page's examples are executed:
each `Example` block must trigger the rule, each `Use instead` block must not (Fixit-style). The pages' headers
and the README's table are generated from the rules' declarations (scripts/gen_rule_docs.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainlint.pages import page
from trainlint.rules import META_RULES, REGISTRY

DECLARED = {**REGISTRY, **META_RULES}

SECTIONS = ["What it does", "Why is this bad?", "Example", "Use instead", "Fix safety", "When it does not fire",
            "References"]
ROOT = Path(__file__).resolve().parents[1]


def _blocks(text: str, section: str) -> list[str]:
    m = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"missing section {section}"
    return re.findall(r"```python\n(.*?)```", m.group(1), re.S)


@pytest.mark.parametrize("code", sorted(DECLARED))
def test_rule_page_has_every_section(code):
    text = page(code)
    assert text is not None, f"rules/{code}.md is missing"
    assert text.startswith(f"# {code} {DECLARED[code].name}\n")
    for section in SECTIONS:
        assert re.search(rf"^## {re.escape(section)}$", text, re.M), f"{code}: no '## {section}'"


def _settings(text: str) -> dict | None:
    """`<!-- settings: gpu = "24GB" -->` on a page: the [tool.trainlint] its examples are linted under (a rule
    that judges the fit needs a GPU)."""
    from trainlint.config import tomllib  # (tomli on 3.10)

    m = re.search(r"^<!-- settings: (.*?) -->$", text, re.M)
    return tomllib.loads(m.group(1).replace("; ", "\n")) if m else None


def _examples():
    for code in sorted(DECLARED):
        text = page(code) or ""
        settings = _settings(text)
        for i, block in enumerate(_blocks(text, "Example")):
            yield pytest.param(code, block, True, settings, id=f"{code}-example-{i}")
        for i, block in enumerate(_blocks(text, "Use instead")):
            yield pytest.param(code, block, False, settings, id=f"{code}-use-instead-{i}")


@pytest.mark.parametrize(("code", "block", "fires", "settings"), list(_examples()))
def test_rule_page_examples_run(lint, code, block, fires, settings):
    found = [c for c, _, _ in lint(block, settings=settings)]
    assert (code in found) is fires, f"{code} {'should' if fires else 'should not'} fire on:\n{block}\nfound {found}"


def test_every_page_belongs_to_a_rule():
    pages = {p.stem for p in (ROOT / "rules").glob("TL*.md")}
    assert pages == set(DECLARED)


def _gen(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_rule_docs.py"), *args], capture_output=True,
                          text=True, timeout=120)


def test_readme_table_and_page_headers_are_generated_from_the_declarations():
    done = _gen("--check")
    assert done.returncode == 0, done.stderr


def test_the_generator_check_catches_a_drifted_page_and_table(tmp_path):
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "rules", tmp_path / "rules")
    page_301 = tmp_path / "rules" / "TL301.md"
    page_301.write_text(page_301.read_text().replace("Fix: *unsafe*", "Fix: none"))
    readme = tmp_path / "README.md"
    readme.write_text(readme.read_text().replace("| TL102 | sdpa-falls-back-to-math-kernel |", "| TL102 | old-name |"))
    done = _gen("--check", "--root", str(tmp_path))
    assert done.returncode == 1 and "README.md, rules/TL301.md" in done.stderr
    assert _gen("--root", str(tmp_path)).returncode == 0  # rewrites them
    assert _gen("--check", "--root", str(tmp_path)).returncode == 0
    assert page_301.read_text() == (ROOT / "rules" / "TL301.md").read_text()
    assert readme.read_text() == (ROOT / "README.md").read_text()


@pytest.mark.parametrize("code", sorted(DECLARED))
def test_a_page_header_says_what_the_declaration_says(code):
    info = DECLARED[code]
    head = page(code).split("\n## ", 1)[0]
    assert info.summary.rstrip(".")[1:] in head
    if not code.startswith("TL0"):
        assert f"Consumer: **{info.consumer}**. Family {code[:3]}xx." in head
