"""A file's result, and what the settings keep of it: `per-file-ignores`, `# noqa` / `# trainlint: ignore[...]`
comments on the reported line, `certain-only`. Every front end's findings end here (lint.py for scripts,
notebooks and launchers, framework_lint.py for framework configs), below both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from fnmatch import fnmatch
from pathlib import Path

from trainlint.config import Settings
from trainlint.context import FileContext
from trainlint.diagnostics import Diagnostic, Span
from trainlint.discovery import relative
from trainlint.source import source_lines

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)
_IGNORE = re.compile(r"#\s*trainlint:\s*ignore\[(?P<codes>[^\]]*)\]")


@dataclass
class FileResult:
    path: Path
    display: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    skipped: str | None = None  # why the file was not analysed (verbose)
    context: FileContext | None = None  # the first launch's (or the defaults')
    contexts: list[FileContext] = field(default_factory=list)  # one per launch the script was checked under
    reached: list[Path] = field(default_factory=list)  # repository modules followed (facts/inline.py)
    notes: list[str] = field(default_factory=list)  # said under --verbose (what was not checked, and why)

    def verbose_lines(self) -> list[str]:
        lines: list[str] = list(self.notes)
        for ctx in self.contexts:
            lines.extend(line for line in ctx.verbose_lines() if line not in lines or line.startswith("  "))
        return lines


def finish(result: FileResult, settings: Settings, codes: set[str], text: str | None) -> FileResult:
    ignored = _per_file_ignores(result.path, settings)
    lines = source_lines(text) if text is not None else []
    kept = []
    for diag in result.diagnostics:
        if diag.code not in codes or any(diag.code.startswith(p) for p in ignored):
            continue
        if diag.filename == result.display and 0 < diag.span.line <= len(lines) and \
                _suppressed(lines[diag.span.line - 1], diag.code):
            continue
        if settings.certain_only and diag.assumptions:
            result.notes.append(f"not reported (certain-only): {diag.location}: {diag.code} {diag.message}")
            continue
        kept.append(_in_cells(diag, settings) if diag.filename != result.display else diag)
    result.diagnostics = sorted(kept, key=lambda d: d.sort_key)
    return result


def _in_cells(diag: Diagnostic, settings: Settings) -> Diagnostic:
    """A finding placed in a notebook other than the file checked (a value its `!torchrun` line or a config its
    `%%writefile` cell writes decided it) is given in cells, as the notebook's own findings are: rows of the
    combined source -> the cell and the row in it. No fix there (it would have to rewrite the cell's JSON)."""
    if diag.cell is not None or not diag.filename.endswith(".ipynb"):
        return diag
    from trainlint.notebook import cached_notebook

    nb = cached_notebook(str(settings.root / diag.filename)) or cached_notebook(diag.filename)
    if nb is None:
        return diag
    cell, row = nb.locate(diag.span.line)
    _, end_row = nb.locate(diag.span.end_line)
    if cell is None:
        return diag
    return replace(diag, span=Span(row, diag.span.col, end_row, diag.span.end_col), cell=cell, fix=None)


def _per_file_ignores(path: Path, settings: Settings) -> list[str]:
    rel = relative(path, settings.root)
    out: list[str] = []
    for pattern, codes in settings.per_file_ignores:
        if fnmatch(rel, pattern) or fnmatch(path.name, pattern):
            out.extend(codes)
    return out


def _suppressed(line: str, code: str) -> bool:
    if "#" not in line:
        return False
    m = _NOQA.search(line)
    if m:
        codes = m.group("codes")
        if codes is None or code in re.split(r"[\s,]+", codes.upper()):
            return True
    m = _IGNORE.search(line)
    if m:
        listed = [c.strip().upper() for c in m.group("codes").split(",")]
        return code in listed or "" in listed
    return False
