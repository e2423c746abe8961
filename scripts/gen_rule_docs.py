"""Write the README's rules table and each rule page's header (title, summary, consumer, family, fix, what
`trainlint verify` checks of the fix) from the rules' declarations (`@rule(...)` in rules/tlNNN_*.py, the TL0xx in
codes.py).

    python scripts/gen_rule_docs.py          # rewrite README.md and rules/TL*.md in place
    python scripts/gen_rule_docs.py --check  # exit 1, naming the files, when they differ from the declarations
    python scripts/gen_rule_docs.py --check --root DIR  # the README.md and rules/ under DIR instead

A page's header is everything before its first `## ` section (or its `<!-- settings: ... -->` line); the rest of the
page is written by hand. Every declared code must have a page, and every page a declared code."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # this tree's declarations, whichever trainlint is installed
_FIX = {
    "none": "none",
    "safe": "*safe* (`--fix` applies it)",
    "unsafe": "*unsafe* (`--fix --unsafe-fixes` applies it)",
    "safe or unsafe": "*safe* or *unsafe*, by case (see Fix safety)",
}
_TABLE_FIX = {"none": "-", "safe": "safe", "unsafe": "unsafe", "safe or unsafe": "safe or unsafe"}


def _verify_kinds() -> dict:
    from trainlint.codes import VERIFY_KINDS

    return VERIFY_KINDS


def declared() -> dict:
    from trainlint.rules import META_RULES, REGISTRY

    return {**REGISTRY, **META_RULES}


def _sentence(text: str) -> str:
    text = text[:1].upper() + text[1:]
    return text if text.endswith(".") else text + "."


def header(info) -> str:
    if info.code.startswith("TL0"):
        where = ("Family TL0xx: trainlint itself (a file it could not check, not a finding about memory; a `warning` "
                 "in SARIF). Fix: none.")
    else:
        where = f"Consumer: **{info.consumer}**. Family {info.family}. Fix: {_FIX[info.fix]}."
        if info.verifies is not None and info.fix != "none":
            where += f" `trainlint verify` checks that {_verify_kinds()[info.verifies]}."
    return f"# {info.code} {info.name}\n\n{_sentence(info.summary)}\n\n{where}\n\n"


def page_text(info, current: str | None) -> str:
    body = ""
    if current is not None:
        m = re.search(r"^(## |<!-- settings:)", current, re.M)
        body = current[m.start():] if m else ""
    return header(info) + body


def table(rules: dict) -> str:
    rows = ["| code | name | consumer | what to do | fix |", "|---|---|---|---|---|"]
    order = sorted(rules, key=lambda c: (c.startswith("TL0"), c))  # the memory rules first
    for code in order:
        r = rules[code]
        rows.append(f"| {code} | {r.name} | {r.consumer} | {r.fix_hint} | {_TABLE_FIX[r.fix]} |")
    return "\n".join(rows) + "\n"


def readme_text(current: str, rules: dict) -> str:
    m = re.search(r"^## Rules\n\n((?:\|.*\n)+)", current, re.M)
    if m is None:
        raise SystemExit("README.md: no table under '## Rules'")
    return current[:m.start(1)] + table(rules) + current[m.end(1):]


def expected(root: Path) -> dict[Path, str]:
    """Every generated file -> the text it should have."""
    rules = declared()
    out: dict[Path, str] = {}
    readme = root / "README.md"
    out[readme] = readme_text(readme.read_text(encoding="utf-8"), rules)
    for code, info in rules.items():
        path = root / "rules" / f"{code}.md"
        out[path] = page_text(info, path.read_text(encoding="utf-8") if path.is_file() else None)
    return out


def main(argv: list[str]) -> int:
    check = "--check" in argv
    root = Path(argv[argv.index("--root") + 1]) if "--root" in argv else ROOT
    stray = sorted(p.name for p in (root / "rules").glob("TL*.md") if p.stem not in declared())
    drifted = []
    for path, text in expected(root).items():
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == text:
            continue
        drifted.append(path.relative_to(root).as_posix())
        if not check:
            path.write_text(text, encoding="utf-8")
    if stray:
        print(f"pages of no declared rule: {', '.join(stray)}", file=sys.stderr)
    if check and drifted:
        print("out of date with the rules' declarations (run scripts/gen_rule_docs.py): " + ", ".join(drifted),
              file=sys.stderr)
    elif drifted:
        print("rewrote " + ", ".join(drifted))
    return 1 if (check and drifted) or stray else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
