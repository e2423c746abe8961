"""text (Ruff's concise form) and json (Ruff's JSON field names)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Callable

from trainlint.diagnostics import Diagnostic


def text(diagnostics: list[Diagnostic], files: int, quiet: bool = False) -> str:
    lines = [f"{d.filename}:{d.span.line}:{d.span.col}: {d.code} {d.message}" for d in diagnostics]
    if not quiet:
        n = len(diagnostics)
        if n:
            lines.append(f"Found {n} error{'s' if n != 1 else ''} in {files} file{'s' if files != 1 else ''} checked.")
        else:
            lines.append(f"All checks passed! ({files} file{'s' if files != 1 else ''} checked)")
    return "\n".join(lines)


def as_json(diagnostics: list[Diagnostic], files: int, quiet: bool = False) -> str:
    return json.dumps([to_json(d) for d in diagnostics], indent=2)


def to_json(d: Diagnostic) -> dict:
    return {
        "code": d.code,
        "message": d.message,
        "filename": d.filename,
        "location": {"row": d.span.line, "column": d.span.col},
        "end_location": {"row": d.span.end_line, "column": d.span.end_col},
        "fix": d.fix,
        "url": d.url,
        "noqa_row": d.span.line,
    }


def statistics(diagnostics: list[Diagnostic]) -> str:
    counts = Counter((d.code, d.name) for d in diagnostics)
    width = max((len(str(n)) for n in counts.values()), default=1)
    return "\n".join(f"{n:>{width}}\t{code}\t{name}" for (code, name), n in sorted(counts.items(),
                                                                                   key=lambda kv: (-kv[1], kv[0])))


FORMATS: dict[str, Callable[..., str]] = {"text": text, "concise": text, "json": as_json}


def render(fmt: str, diagnostics: list[Diagnostic], files: int, quiet: bool = False) -> str:
    return FORMATS[fmt](diagnostics, files, quiet)
