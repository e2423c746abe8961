"""Issue 19: what the fixes' version checks change on a corpus of real scripts.

Runs `trainlint check --output-format json` and `--fix --unsafe-fixes --diff` over CORPUS twice: with the versions
each file resolves to (settings, pins, `pip install` lines, installed, API-usage bounds), and with a
`[tool.trainlint] versions = {...}` table naming the newest releases read (no version check bites), written to
CORPUS/pyproject.toml for the second run and removed after. Prints, per rule, the fixes offered in each run and
every finding whose fix differs (file, line, before / after).

Usage: PYTHONPATH=src python bench/fix_versions.py CORPUS [BASE]
BASE, optional, replaces "as resolved" by fixed versions for the first run, e.g.
'{ transformers = "4.40.2", trl = "0.9.6", peft = "0.10.0" }' (what a file pinned to those would get).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

NEWEST = '[tool.trainlint]\nversions = { transformers = "5.24.0", trl = "1.16.0", peft = "0.21.2" }\n'


def run(corpus: Path, *args: str) -> str:
    cmd = [sys.executable, "-m", "trainlint", "check", "--no-cache", "--exit-zero", *args, str(corpus)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=os.environ).stdout


def findings(corpus: Path) -> tuple[dict[tuple, dict], int]:
    """(finding key -> diagnostic, number of files the --diff would change)."""
    data = json.loads(run(corpus, "--output-format", "json") or "[]")
    diff = run(corpus, "--diff", "--unsafe-fixes")
    changed = sum(1 for line in diff.splitlines() if line.startswith("+++ "))
    return {(d["filename"], d.get("cell"), d["location"]["row"], d["code"]): d for d in data}, changed


def describe(fix: dict | None) -> str:
    if fix is None:
        return "no fix"
    return f"{fix['applicability']}: {fix['message']}"


def main(corpus: Path, base: str | None) -> None:
    marker = corpus / "pyproject.toml"
    if marker.exists():
        sys.exit(f"{marker} exists: run on a corpus without a root pyproject.toml")
    if base:
        marker.write_text(f"[tool.trainlint]\nversions = {base}\n")
    try:
        resolved, changed_resolved = findings(corpus)
    finally:
        marker.unlink(missing_ok=True)
    marker.write_text(NEWEST)
    try:
        newest, changed_newest = findings(corpus)
    finally:
        marker.unlink()
    files = sum(1 for p in corpus.rglob("*") if p.suffix in (".py", ".ipynb"))
    print(f"corpus: {corpus} ({files} .py/.ipynb files); first run: {base or 'versions as each file resolves'}")
    print(f"files --fix --unsafe-fixes would change: resolved {changed_resolved}, newest {changed_newest}\n")
    rows: Counter = Counter()
    for name, found in (("resolved", resolved), ("newest", newest)):
        for d in found.values():
            rows[(d["code"], name, "findings")] += 1
            if d["fix"] is not None:
                rows[(d["code"], name, d["fix"]["applicability"])] += 1
    codes = sorted({code for code, _, _ in rows})
    print("| rule | findings (resolved / newest) | safe fixes | unsafe fixes | fixes that differ |")
    print("|---|---|---|---|---|")
    differ = [(k, resolved.get(k), newest.get(k)) for k in sorted(set(resolved) | set(newest), key=str)
              if describe((resolved.get(k) or {}).get("fix")) != describe((newest.get(k) or {}).get("fix"))
              or (k in resolved) != (k in newest)]
    for code in codes:
        n = sum(1 for k, _, _ in differ if k[3] == code)
        print(f"| {code} | {rows[(code, 'resolved', 'findings')]} / {rows[(code, 'newest', 'findings')]} | "
              f"{rows[(code, 'resolved', 'safe')]} / {rows[(code, 'newest', 'safe')]} | "
              f"{rows[(code, 'resolved', 'unsafe')]} / {rows[(code, 'newest', 'unsafe')]} | {n} |")
    print("\nfindings whose fix differs (resolved -> newest):")
    for (filename, cell, row, code), before, after in differ:
        where = f"{filename}:{row}" + (f" (cell {cell})" if cell is not None else "")
        b = describe(before["fix"]) if before else "not reported"
        a = describe(after["fix"]) if after else "not reported"
        print(f"- {code} {where}: {b} -> {a}")
        for d in (before, after):
            if d is not None and d["fix"] is None and "no fix" in d["message"]:
                print(f"    resolved message: ...{d['message'][-220:]}")
                break


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), sys.argv[2] if len(sys.argv) > 2 else None)
