"""rdjson: the Reviewdog Diagnostic Format's DiagnosticResult as JSON (reviewdog -f=rdjson).

Field names follow reviewdog's proto/rdf/reviewdog.proto. Its positions are 1-based lines and 1-based
*UTF-8 byte* columns with an exclusive end; trainlint's spans use character columns, so each column is
converted by reading the line it is on (kept as is when the file can no longer be read).

Suggestions are shaped for the way reviewdog posts them (service/github/github.go, buildSingleSuggestion):
a GitHub suggestion replaces whole lines, every suggestion of a diagnostic must cover the same lines as the
comment, and a suggestion with columns is completed with the rest of its first and last lines. So a fix of
one edit is one suggestion, as written (reviewdog completes its lines); a fix of several edits (a comma at
the end of one line and a new line after it) is one suggestion over the lines they span, whose text is
those lines with every edit applied. A fix that edits another file than the one the finding is reported in
(a finding in a launcher whose fix is in the script) cannot be a suggestion on that comment: the finding is
posted without one and a second diagnostic, in the edited file, carries it. A notebook's rows count within
a cell, not the .ipynb file, and a suggestion would have to edit the notebook's JSON: such a diagnostic has
no range and no suggestion, and its message says where it is and how to apply the fix."""

from __future__ import annotations

import json

from trainlint.diagnostics import Diagnostic, Edit, Fix
from trainlint.report._common import PROJECT_URL, Sources, byte_column, cell_of, in_cell, is_meta


def _position(sources: Sources, filename: str, row: int, col: int) -> dict:
    return {"line": row, "column": sources.byte_column(filename, row, col)}


def _range(sources: Sources, filename: str, start: tuple[int, int], end: tuple[int, int]) -> dict:
    return {"start": _position(sources, filename, *start), "end": _position(sources, filename, *end)}


def _edit_range(e: Edit) -> tuple[tuple[int, int], tuple[int, int]]:
    return e.start, e.end


def suggestions(fix: Fix, filename: str, sources: Sources) -> list[dict]:
    """The fix's edits as reviewdog suggestions in `filename` (see the module docstring); [] when several
    edits cannot be joined because the file cannot be read."""
    edits = fix.edits
    if len(edits) == 1:
        (e,) = edits
        return [{"range": _range(sources, filename, *_edit_range(e)), "text": e.content}]
    lines = sources.lines(filename)
    if not edits or lines is None:
        return []
    first = min(_edit_range(e)[0][0] for e in edits)
    last = min(max(_edit_range(e)[1][0] for e in edits), len(lines))
    window = lines[first - 1:last]
    if not window:
        return []  # edits past the end of the file as it is now: no lines to suggest on
    starts = [0]
    for line in window:
        starts.append(starts[-1] + len(line) + 1)  # the window's lines, joined with "\n"
    text = "\n".join(window)

    def offset(row: int, col: int) -> int:
        if row - first >= len(window):
            return len(text)
        return min(starts[row - first] + col - 1, starts[row - first] + len(window[row - first]), len(text))

    spans = sorted((offset(*a), offset(*b), e.content) for e in edits for a, b in [_edit_range(e)])
    if any(nxt[0] < prev[1] for prev, nxt in zip(spans, spans[1:])):
        return []  # overlapping edits: not one text
    for a, b, content in reversed(spans):
        text = text[:a] + content + text[b:]
    end = {"line": last, "column": byte_column(window[-1], len(window[-1]) + 1)}
    return [{"range": {"start": {"line": first, "column": 1}, "end": end}, "text": text}]


def diagnostic(d: Diagnostic, sources: Sources) -> list[dict]:
    """The diagnostic, and a second one carrying its suggestion when its fix edits another file."""
    s = d.span
    notebook = cell_of(d) is not None  # rows count within a cell: point at the file, say where in the message
    location: dict = {"path": d.filename}
    if not notebook:
        location["range"] = _range(sources, d.filename, (s.line, s.col), (s.end_line, s.end_col))
    message = in_cell(d) + d.message
    fix = d.fix if d.fix is not None and d.fix.edits else None
    target = (fix.file if fix.file is not None else d.filename) if fix else d.filename
    extra: list[dict] = []
    if fix and notebook:
        message += (f" (fix not suggested: a notebook's lines are its cells' and a suggestion would have to edit "
                    f"the .ipynb JSON; `trainlint check --fix {d.filename}` applies it: {fix.message})")
    elif fix and target != d.filename:
        message += f" (the fix edits {target}: suggested there)"
        found = suggestions(fix, target, sources)
        if found:
            extra.append({"message": f"{d.code} fix for {d.location}: {fix.message}",
                          "location": {"path": target, "range": found[0]["range"]},
                          "severity": "WARNING" if is_meta(d.code) else "ERROR",
                          "code": {"value": d.code, **({"url": d.url} if d.url else {})},
                          "suggestions": found})
    out: dict = {
        "message": message,
        "location": location,
        "severity": "WARNING" if is_meta(d.code) else "ERROR",
        "code": {"value": d.code, **({"url": d.url} if d.url else {})},
    }
    if fix and not notebook and target == d.filename:
        found = suggestions(fix, d.filename, sources)
        if found:
            out["suggestions"] = found
    return [out, *extra]


def render(diagnostics: list[Diagnostic], files: int, quiet: bool = False) -> str:
    sources = Sources()
    result = {
        "source": {"name": "trainlint", "url": PROJECT_URL},
        "severity": "ERROR",
        "diagnostics": [item for d in diagnostics for item in diagnostic(d, sources)],
    }
    return json.dumps(result, indent=2)
