"""What the CI / code-review formats share: the source lines a diagnostic points at, UTF-8 byte
columns, severities, and fingerprints that survive line shifts. Standard library only."""

from __future__ import annotations

import hashlib
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


class Sources:
    """The lines of the files diagnostics name (relative to the cwd, as the CLI reports them), read on
    first use the way the linter reads them (BOM, PEP 263 cookie). None where a file is gone or unreadable."""

    def __init__(self) -> None:
        self._lines: dict[str, list[str] | None] = {}

    def lines(self, filename: str) -> list[str] | None:
        if filename not in self._lines:
            from trainlint.source import Source, read_source

            source = read_source(Path(filename))
            self._lines[filename] = _NEWLINE.split(source.text) if isinstance(source, Source) else None
        return self._lines[filename]

    def line(self, filename: str, row: int) -> str | None:
        lines = self.lines(filename)
        if lines is None or not 1 <= row <= len(lines):
            return None
        return lines[row - 1]

    def byte_column(self, filename: str, row: int, col: int) -> int:
        """The 1-based UTF-8 byte column of 1-based character column `col` on line `row`; the character
        column itself when the line cannot be read (file deleted since, or row past its end)."""
        return byte_column(self.line(filename, row), col)


def byte_column(line: str | None, col: int) -> int:
    if line is None or col < 1:
        return col
    chars = col - 1
    prefix = line[:chars]
    past_end = max(0, chars - len(line))  # a column just past the line's end (an exclusive end) counts 1 each
    return len(prefix.encode("utf-8", "surrogatepass")) + past_end + 1


def fingerprints(diagnostics: list[Diagnostic], sources: Sources, algorithm: str = "sha256") -> list[str]:
    """One stable hash per diagnostic: rule code + file + the whitespace-normalised source line it starts
    on + how many earlier diagnostics had those same three. No line or column number goes in, so a
    finding keeps its fingerprint when lines are added above it or the line is re-indented; when the
    file cannot be read the message stands in for the line."""
    seen: Counter = Counter()
    out = []
    for d in diagnostics:
        line = sources.line(d.filename, d.span.line)
        anchor = " ".join(line.split()) if line is not None else d.message
        key = (d.code, d.filename, anchor)
        occurrence = seen[key]
        seen[key] += 1
        payload = "\0".join((d.code, d.filename, anchor, str(occurrence))).encode("utf-8", "surrogatepass")
        out.append(hashlib.new(algorithm, payload).hexdigest())
    return out
