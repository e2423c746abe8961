"""rdjson: the Reviewdog Diagnostic Format's DiagnosticResult as JSON (reviewdog -f=rdjson).

Field names follow reviewdog's proto/rdf/reviewdog.proto. Its positions are 1-based lines and 1-based
*UTF-8 byte* columns with an exclusive end; trainlint's spans use character columns, so each column is
converted by reading the line it is on (kept as is when the file can no longer be read). A notebook's
rows count within a cell, not the .ipynb file: such a diagnostic has no range (nor suggestions) and
its message starts with the cell, line and column."""

from __future__ import annotations

import json

from trainlint.diagnostics import Diagnostic
from trainlint.report._common import PROJECT_URL, Sources, cell_of, in_cell, is_meta


def _position(sources: Sources, filename: str, row: int, col: int) -> dict:
    return {"line": row, "column": sources.byte_column(filename, row, col)}


def _range(sources: Sources, filename: str, start: tuple[int, int], end: tuple[int, int]) -> dict:
    return {"start": _position(sources, filename, *start), "end": _position(sources, filename, *end)}


def diagnostic(d: Diagnostic, sources: Sources) -> dict:
    s = d.span
    notebook = cell_of(d) is not None  # rows count within a cell: point at the file, say where in the message
    location: dict = {"path": d.filename}
    if not notebook:
        location["range"] = _range(sources, d.filename, (s.line, s.col), (s.end_line, s.end_col))
    out: dict = {
        "message": in_cell(d) + d.message,
        "location": location,
        "severity": "WARNING" if is_meta(d.code) else "ERROR",
        "code": {"value": d.code, **({"url": d.url} if d.url else {})},
    }
    if d.fix and d.fix.get("edits") and not notebook:
        out["suggestions"] = [
            {"range": _range(sources, d.filename, (e["location"]["row"], e["location"]["column"]),
                             (e["end_location"]["row"], e["end_location"]["column"])),
             "text": e["content"]}
            for e in d.fix["edits"]
        ]
    return out


def render(diagnostics: list[Diagnostic], files: int, quiet: bool = False) -> str:
    sources = Sources()
    result = {
        "source": {"name": "trainlint", "url": PROJECT_URL},
        "severity": "ERROR",
        "diagnostics": [diagnostic(d, sources) for d in diagnostics],
    }
    return json.dumps(result, indent=2)
