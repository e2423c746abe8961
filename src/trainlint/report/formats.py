"""text (Ruff's concise form) and json (Ruff's JSON field names) live here; every other format has its
own module in this package, imported only when that format is asked for (start-up stays fast)."""

from __future__ import annotations

import importlib
import json
from collections import Counter
from typing import Callable

from trainlint.diagnostics import Diagnostic


def text(diagnostics: list[Diagnostic], files: int, quiet: bool = False) -> str:
    lines = [header(d) for d in diagnostics]
    if not quiet:
        lines.append(summary(len(diagnostics), files))
    return "\n".join(lines)


def header(d: Diagnostic) -> str:
    """The one-line form of a diagnostic (text's line, and the first line of each of full's blocks)."""
    return f"{d.location}: {d.code} {d.message}"


def summary(n: int, files: int) -> str:
    if n:
        return f"Found {n} error{'s' if n != 1 else ''} in {files} file{'s' if files != 1 else ''} checked."
    return f"All checks passed! ({files} file{'s' if files != 1 else ''} checked)"


def as_json(diagnostics: list[Diagnostic], files: int, quiet: bool = False) -> str:
    return json.dumps([to_json(d) for d in diagnostics], indent=2)


def to_json(d: Diagnostic) -> dict:
    out = {
        "code": d.code,
        "message": d.message,
        "filename": d.filename,
        "location": {"row": d.span.line, "column": d.span.col},
        "end_location": {"row": d.span.end_line, "column": d.span.end_col},
        "fix": d.fix.to_json() if d.fix is not None else None,
        "url": d.url,
        "noqa_row": d.span.line,
        "cell": d.cell,
    }
    if d.related:  # launch-decided and repeated findings carry it; every other record keeps Ruff's exact shape
        out["related"] = [{"filename": file, "location": {"row": r.line, "column": r.col},
                           "end_location": {"row": r.end_line, "column": r.end_col}, "message": what}
                          for file, r, what in d.related]
    if d.assumptions:  # a finding resting on a launcher's defaults the caller could override
        out["assumptions"] = list(d.assumptions)
    if d.versions:  # the library releases it was judged on, when not the newest unpinned ones
        out["versions"] = list(d.versions)
    return out


def statistics(diagnostics: list[Diagnostic]) -> str:
    counts = Counter((d.code, d.name) for d in diagnostics)
    width = max((len(str(n)) for n in counts.values()), default=1)
    return "\n".join(f"{n:>{width}}\t{code}\t{name}" for (code, name), n in sorted(counts.items(),
                                                                                   key=lambda kv: (-kv[1], kv[0])))


def _lazy(module: str) -> Callable[..., str]:
    """A formatter living in trainlint.report.<module> (its `render`), imported on first use."""

    def call(diagnostics: list[Diagnostic], files: int, quiet: bool = False) -> str:
        return importlib.import_module(f"trainlint.report.{module}").render(diagnostics, files, quiet)

    call.__name__ = call.__qualname__ = f"{module}_render"
    return call


# Keys are exactly report.names.FORMAT_NAMES (a test checks it).
FORMATS: dict[str, Callable[..., str]] = {
    "text": text,
    "concise": text,
    "full": _lazy("full"),
    "json": as_json,
    "json-lines": _lazy("jsonlines"),
    "junit": _lazy("junit"),
    "github": _lazy("github"),
    "gitlab": _lazy("gitlab"),
    "rdjson": _lazy("rdjson"),
    "sarif": _lazy("sarif"),
}


def render(fmt: str, diagnostics: list[Diagnostic], files: int, quiet: bool = False) -> str:
    return FORMATS[fmt](diagnostics, files, quiet)
