"""Every rule has a page with the standard sections, and the page's examples are executed:
each `Example` block must trigger the rule, each `Use instead` block must not (Fixit-style)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainlint.pages import page
from trainlint.rules import REGISTRY

SECTIONS = ["What it does", "Why is this bad?", "Example", "Use instead", "Fix safety", "When it does not fire",
            "References"]
ROOT = Path(__file__).resolve().parents[1]


def _blocks(text: str, section: str) -> list[str]:
    m = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"missing section {section}"
    return re.findall(r"```python\n(.*?)```", m.group(1), re.S)


@pytest.mark.parametrize("code", sorted(REGISTRY))
def test_rule_page_has_every_section(code):
    text = page(code)
    assert text is not None, f"rules/{code}.md is missing"
    assert text.startswith(f"# {code} {REGISTRY[code].name}\n")
    for section in SECTIONS:
        assert re.search(rf"^## {re.escape(section)}$", text, re.M), f"{code}: no '## {section}'"


def _settings(text: str) -> dict | None:
    """`<!-- settings: gpu = "24GB" -->` on a page: the [tool.trainlint] its examples are linted under (a rule
    that judges the fit needs a GPU)."""
    from trainlint.config import tomllib  # (tomli on 3.10)

    m = re.search(r"^<!-- settings: (.*?) -->$", text, re.M)
    return tomllib.loads(m.group(1).replace("; ", "\n")) if m else None


def _examples():
    for code in sorted(REGISTRY):
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
    assert pages == set(REGISTRY)
