"""lsp: diagnostics and fixes as Language Server Protocol objects, for `trainlint server`.

The objects are plain dicts in the protocol's JSON shape (the server turns them into lsprotocol types), so
this module needs nothing beyond the standard library and is tested like every other format. LSP lines and
characters are 0-based, and a character counts in the position encoding the client and server agreed on
(UTF-16 code units unless the client offers another, LSP 3.17 `general.positionEncodings`); trainlint's spans
are 1-based lines and 1-based code-point columns, so each column is converted by reading the line it is on.
A notebook diagnostic's rows count within its cell: published on that cell's document they convert as any
other; published on the .ipynb file's JSON text (a client without notebook support) they cannot point at a
line of the JSON, so they sit at the top of the file and the message says where (the github and rdjson
formats do the same)."""

from __future__ import annotations

from typing import Callable

from trainlint.diagnostics import Diagnostic
from trainlint.report._common import _NEWLINE, in_cell, is_meta

ERROR, WARNING = 1, 2  # DiagnosticSeverity
SOURCE = "trainlint"


def lines_of(text: str) -> list[str]:
    """The lines LSP counts: it ends a line at \\n, \\r\\n or \\r, as Python's tokenizer (and every span) does."""
    return _NEWLINE.split(text)


def character(line: str | None, col: int, encoding: str = "utf-16") -> int:
    """The 0-based LSP character of 1-based code-point column `col`, in `encoding` units; the column itself
    (0-based) where the line is unknown. A column past the line's end counts one unit per column."""
    if line is None or col < 1:
        return max(col - 1, 0)
    prefix = line[: col - 1]
    past = max(0, col - 1 - len(line))
    if encoding == "utf-8":
        return len(prefix.encode("utf-8", "surrogatepass")) + past
    if encoding == "utf-32":
        return len(prefix) + past
    return len(prefix.encode("utf-16-le", "surrogatepass")) // 2 + past


def position(lines: list[str] | None, row: int, col: int, encoding: str = "utf-16") -> dict:
    line = lines[row - 1] if lines is not None and 1 <= row <= len(lines) else None
    return {"line": max(row - 1, 0), "character": character(line, col, encoding)}


def range_of(lines: list[str] | None, start: tuple[int, int], end: tuple[int, int], encoding: str = "utf-16") -> dict:
    return {"start": position(lines, *start, encoding), "end": position(lines, *end, encoding)}


_TOP = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}

# where a related location is: its display path -> (uri, its lines) or None when it cannot be named
Locate = Callable[[str], "tuple[str, list[str] | None] | None"]


def diagnostic(d: Diagnostic, lines: list[str] | None, encoding: str = "utf-16", locate: Locate | None = None,
               file_level: bool = False) -> dict:
    """One LSP Diagnostic. `lines` are those the diagnostic's rows count in (the file's, or its cell's);
    `file_level`: the rows cannot be placed in the document it is published on (a notebook's JSON text)."""
    s = d.span
    out: dict = {
        "range": _TOP if file_level else range_of(lines, (s.line, s.col), (s.end_line, s.end_col), encoding),
        "severity": WARNING if is_meta(d.code) else ERROR,
        "code": d.code,
        "source": SOURCE,
        "message": (in_cell(d) if file_level else "") + d.message,
    }
    if d.url:
        out["codeDescription"] = {"href": d.url}
    related = []
    for file, span, what in d.related:
        where = locate(file) if locate is not None else None
        if where is not None:
            uri, their_lines = where
            related.append({"location": {"uri": uri, "range": range_of(their_lines, (span.line, span.col),
                                                                       (span.end_line, span.end_col), encoding)},
                            "message": what})
    if related:
        out["relatedInformation"] = related
    if d.fix and not file_level:
        out["data"] = {"fix": d.fix.applicability}  # what the code action request will find (see server)
    if d.assumptions:  # the launcher defaults the finding rests on
        out.setdefault("data", {})["assumptions"] = list(d.assumptions)
    if d.versions:  # the library releases it was judged on, when not the newest unpinned ones
        out.setdefault("data", {})["versions"] = list(d.versions)
    return out


def text_edits(edits, lines: list[str] | None, encoding: str = "utf-16") -> list[dict]:
    """A fix's edits (diagnostics.Edit: 1-based rows and columns, exclusive end) as LSP TextEdits."""
    return [{"range": range_of(lines, e.start, e.end, encoding), "newText": e.content} for e in edits]


def offset_position(text: str, offset: int, encoding: str = "utf-16") -> dict:
    """The LSP position of a character offset into `text` (never inside a CRLF)."""
    head = text[:offset]
    breaks = list(_NEWLINE.finditer(head))
    start = breaks[-1].end() if breaks else 0
    line = _NEWLINE.split(text[start:], 1)[0]
    return {"line": len(breaks), "character": character(line, offset - start + 1, encoding)}


def minimal_edit(old: str, new: str, encoding: str = "utf-16") -> dict | None:
    """One TextEdit turning `old` into `new`: the part between their common prefix and suffix (None when they
    are equal). Used where a fix is applied to a whole text and only the result is known (a notebook's cells
    after `fix.plan_fixes`), so the edit is right by construction."""
    if old == new:
        return None
    prefix = 0
    limit = min(len(old), len(new))
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]:
        suffix += 1
    if 0 < prefix < len(old) and old[prefix - 1] == "\r" and old[prefix] == "\n":
        prefix -= 1  # never split a \r\n: both ends of the range sit on a line boundary or inside a line
    cut = len(old) - suffix
    if 0 < cut < len(old) and old[cut - 1] == "\r" and old[cut] == "\n":
        suffix -= 1
    return {"range": {"start": offset_position(old, prefix, encoding),
                      "end": offset_position(old, len(old) - suffix, encoding)},
            "newText": new[prefix:len(new) - suffix]}
