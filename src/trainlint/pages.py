"""The rule pages (rules/TLxxx.md): shipped in the wheel as trainlint/_rule_pages, read from the
source tree in a development checkout."""

from __future__ import annotations

from pathlib import Path


def pages_dir() -> Path | None:
    here = Path(__file__).resolve().parent
    for candidate in (here / "_rule_pages", here.parent.parent / "rules"):
        if candidate.is_dir():
            return candidate
    return None


def page(code: str) -> str | None:
    folder = pages_dir()
    if folder is None:
        return None
    path = folder / f"{code.upper()}.md"
    return path.read_text(encoding="utf-8") if path.is_file() else None
