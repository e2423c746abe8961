"""What the CI / code-review formats share: the source lines a diagnostic points at, UTF-8 byte
columns, severities, and fingerprints that survive line shifts. Standard library only."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

from trainlint.diagnostics import Diagnostic

PROJECT_URL = "https://github.com/trainlint/trainlint"

# Python's tokenizer (and so every span a rule reports) counts \r\n, \r and \n as line ends.
_NEWLINE = re.compile(r"\r\n|\r|\n")


def is_meta(code: str) -> bool:
    """TL0xx say that trainlint could not check a file (unparsable, unreadable); they find no defect."""
    return code.startswith("TL0")


def cell_of(d: Diagnostic) -> int | None:
    """The notebook cell (1-based, among all the notebook's cells) a diagnostic's rows count in; None
    for a plain file."""
    return getattr(d, "cell", None)


def in_cell(d: Diagnostic) -> str:
    """For formats whose locations are lines of the file: a notebook diagnostic's rows count within its
    cell, not within the .ipynb file, so such a format points at the file and says where in the
    message instead ("cell 3, line 2, column 9: ..."). Empty for a plain file."""
    cell = cell_of(d)
    return "" if cell is None else f"cell {cell}, line {d.span.line}, column {d.span.col}: "


def position(d: Diagnostic) -> str:
    """`path:line:col`, or `path:cell N:line:col` in a notebook (the text format's location)."""
    cell = cell_of(d)
    return f"{d.filename}:{'' if cell is None else f'cell {cell}:'}{d.span.line}:{d.span.col}"


class Sources:
    """The lines of the files diagnostics name (relative to the cwd, as the CLI reports them), read on
    first use the way the linter reads them (BOM, PEP 263 cookie), or of one cell of a notebook. None
    where a file is gone or unreadable."""

    def __init__(self) -> None:
        self._lines: dict[tuple[str, int | None], list[str] | None] = {}

    def lines(self, filename: str, cell: int | None = None) -> list[str] | None:
        key = (filename, cell)
        if key not in self._lines:
            self._lines[key] = _file_lines(filename) if cell is None else _cell_lines(filename, cell)
        return self._lines[key]

    def line(self, filename: str, row: int, cell: int | None = None) -> str | None:
        lines = self.lines(filename, cell)
        if lines is None or not 1 <= row <= len(lines):
            return None
        return lines[row - 1]

    def byte_column(self, filename: str, row: int, col: int, cell: int | None = None) -> int:
        """The 1-based UTF-8 byte column of 1-based character column `col` on line `row`; the character
        column itself when the line cannot be read (file deleted since, or row past its end)."""
        return byte_column(self.line(filename, row, cell), col)


def _file_lines(filename: str) -> list[str] | None:
    from trainlint.source import Source, read_source

    source = read_source(Path(filename))
    return _NEWLINE.split(source.text) if isinstance(source, Source) else None


def _cell_lines(filename: str, cell: int) -> list[str] | None:
    try:
        data = json.loads(Path(filename).read_text(encoding="utf-8"))
        source = data["cells"][cell - 1].get("source", "") if cell >= 1 else None
    except (OSError, ValueError, LookupError, TypeError, AttributeError):
        return None
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return _NEWLINE.split("".join(source))
    return _NEWLINE.split(source) if isinstance(source, str) else None


def byte_column(line: str | None, col: int) -> int:
    if line is None or col < 1:
        return col
    chars = col - 1
    prefix = line[:chars]
    past_end = max(0, chars - len(line))  # a column just past the line's end (an exclusive end) counts 1 each
    return len(prefix.encode("utf-8", "surrogatepass")) + past_end + 1


def fingerprints(diagnostics: list[Diagnostic], sources: Sources, algorithm: str = "sha256") -> list[str]:
    """One stable hash per diagnostic: rule code + file + the whitespace-normalised source line it starts
    on (in a notebook, that line of its cell) + how many earlier diagnostics had those same three. No
    line, column or cell number goes in, so a finding keeps its fingerprint when lines (or cells) are
    added above it or the line is re-indented; when the file cannot be read the message stands in for
    the line."""
    seen: Counter = Counter()
    out = []
    for d in diagnostics:
        cell = cell_of(d)
        line = sources.line(d.filename, d.span.line, cell)
        anchor = " ".join(line.split()) if line is not None else d.message
        key = (d.code, d.filename, anchor)
        occurrence = seen[key]
        seen[key] += 1
        payload = "\0".join((d.code, d.filename, anchor, str(occurrence))).encode("utf-8", "surrogatepass")
        out.append(hashlib.new(algorithm, payload).hexdigest())
    return out
