"""Every rule has a page with the standard sections, and the page's examples are executed:
each `Example` block must trigger the rule, each `Use instead` block must not (Fixit-style); an Example states where
the finding is and the text its fix makes (`<!-- expect: L:C CODE -->`, a `python fixed` block), and a fix's
safety must be the one the rule declares. The pages' headers and the README's table are generated from the rules'
declarations (scripts/gen_rule_docs.py)."""

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


# An Example block may be followed by what it must produce (Fixit's `Invalid(range=..., expected_replacement=...)`):
#   <!-- expect: 7:1 TL201 -->      the rule's findings on the block, line:column, one comment each
#   ```python fixed ... ```         the block after `--fix` (with `--unsafe-fixes` for an unsafe fix) of this rule
# and preceded by the file's committed version, for a rule that compares with the git base (TL401):
#   ```python base ... ```
_ITEM = re.compile(r"```python\n(?P<block>.*?)```|<!-- expect: (?P<line>\d+):(?P<col>\d+) (?P<code>TL\d{3}) -->"
                   r"|```python fixed\n(?P<fixed>.*?)```|```python base\n(?P<base>.*?)```", re.S)
_APPLICABLE = {"none": set(), "safe": {"safe"}, "unsafe": {"unsafe"}, "safe or unsafe": {"safe", "unsafe"}}


def _section(text: str, section: str) -> str:
    m = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"missing section {section}"
    return m.group(1)


def _items(text: str, section: str) -> list[dict]:
    """The section's python blocks, each with the positions and fixed text stated after it."""
    out: list[dict] = []
    base = None
    for m in _ITEM.finditer(_section(text, section)):
        if m.group("base") is not None:
            base = m.group("base")
        elif m.group("block") is not None:
            out.append({"block": m.group("block"), "expect": [], "fixed": None, "base": base})
            base = None
        elif m.group("fixed") is not None:
            out[-1]["fixed"] = m.group("fixed")
        else:
            out[-1]["expect"].append((m.group("code"), int(m.group("line")), int(m.group("col"))))
    return out


def _examples():
    for code in sorted(DECLARED):
        text = page(code) or ""
        settings = _settings(text)
        for i, item in enumerate(_items(text, "Example")):
            yield pytest.param(code, item, True, settings, id=f"{code}-example-{i}")
        for i, item in enumerate(_items(text, "Use instead")):
            yield pytest.param(code, item, False, settings, id=f"{code}-use-instead-{i}")


@pytest.fixture
def lint_block(tmp_path, monkeypatch):
    """lint_block(block, settings, code, base) -> (the block's diagnostics, the text `--fix --unsafe-fixes` of one
    code makes); `base`: the file's version committed in a git repository first (the block is then staged)."""
    from trainlint.config import Settings, from_table
    from trainlint.fix import plan_fixes
    from trainlint.knowledge.versions import project_pins
    from trainlint.launch.discover import clear_caches
    from trainlint.lint import enabled_codes, lint_file

    monkeypatch.chdir(tmp_path)

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, timeout=60)

    def run(block: str, settings: dict | None, code: str, base: str | None = None):
        script = tmp_path / "train.py"
        if base is not None:
            git("init", "-q", "-b", "main")
            git("config", "user.email", "t@example.com")
            git("config", "user.name", "t")
            script.write_text(base)
            git("add", "train.py")
            git("commit", "-q", "-m", "base")
        script.write_text(block)
        if base is not None:
            git("add", "train.py")
        project_pins.cache_clear()
        clear_caches()
        s = from_table(settings, tmp_path, "test") if settings else Settings(root=tmp_path)
        found = lint_file(script, s, enabled_codes(s)).diagnostics
        fixed = plan_fixes(script, s, enabled_codes(s), True, only=lambda d: d.code == code).new_text
        return found, fixed

    return run


@pytest.mark.parametrize(("code", "item", "fires", "settings"), list(_examples()))
def test_rule_page_examples_run(lint_block, code, item, fires, settings):
    block = item["block"]
    found, fixed = lint_block(block, settings, code, item["base"])
    mine = [d for d in found if d.code == code]
    assert bool(mine) is fires, f"{code} {'should' if fires else 'should not'} fire on:\n{block}\nfound {found}"
    if item["expect"]:
        assert sorted((d.code, d.span.line, d.span.col) for d in mine) == sorted(item["expect"])
    kinds = {d.fix.applicability for d in mine if d.fix}
    assert kinds <= _APPLICABLE[DECLARED[code].fix], f"{code} declares fix={DECLARED[code].fix!r}, offered {kinds}"
    if item["fixed"] is not None:
        assert fixed == item["fixed"]
    elif fires:
        assert fixed is None, f"{code}: the page should show the fixed text of:\n{block}"


@pytest.mark.parametrize("code", sorted(c for c, r in REGISTRY.items() if r.fix != "none"))
def test_a_rule_with_a_fix_shows_it_on_its_page(code):
    items = _items(page(code), "Example")
    assert any(i["fixed"] is not None for i in items), f"rules/{code}.md: no `python fixed` block"
    assert all(i["expect"] for i in items), f"rules/{code}.md: an example without its expected position"


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
