"""full: text's line for each diagnostic followed by the source it points at, underlined, with the
rule's name (Ruff's `full` style), and `help:` with the fix's message when the rule offers one; then
text's summary line.

    train.py:2:30: TL101 eager attention at sequence length 4,096 ...
      |
    2 | model = from_pretrained("m", attn_implementation="eager")
      |                              ^^^^^^^^^^^^^^^^^^^^^^^^^^^ eager-attention-at-long-context
      |
      = help: Set attn_implementation="sdpa"
"""

from __future__ import annotations

import unicodedata

from trainlint.diagnostics import Diagnostic
from trainlint.report._common import Sources, cell_of
from trainlint.report.formats import header, summary

TAB = "    "
MAX_LINES = 6  # longer spans show their first and last lines around a "..." row


def _width(text: str) -> int:
    """Terminal columns: wide (CJK) characters take two, combining marks none."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in text)


def _rows(d: Diagnostic, sources: Sources) -> list[tuple[int, str, int, int]] | None:
    """(row, line, first char, end char) for each line of the span; None when the source is unavailable."""
    s = d.span
    end_line, end_col = s.end_line, s.end_col
    if end_line > s.line and end_col <= 1:  # a span ending at the start of a line ends with the one before
        end_line -= 1
        end_col = None
    rows = []
    for row in range(s.line, max(end_line, s.line) + 1):
        line = sources.line(d.filename, row, cell_of(d))
        if line is None:
            return None
        if row == s.line:
            first = s.col - 1
        else:
            first = len(line) - len(line.lstrip())
        if row == end_line and end_col is not None:
            last = end_col - 1
        else:
            last = len(line)
        rows.append((row, line, min(first, len(line)), max(last, first)))
    return rows


def excerpt(d: Diagnostic, sources: Sources) -> list[str]:
    gutter = len(str(d.span.end_line))
    pad = " " * gutter
    rows = _rows(d, sources)
    if rows is None:
        return [f"{pad} = rule: {d.name} (source not available)"]
    if len(rows) > MAX_LINES:
        rows = rows[:MAX_LINES // 2] + [None] + rows[-(MAX_LINES // 2):]
    out = [f"{pad} |"]
    marked = [r for r in rows if r is not None]
    for entry in rows:
        if entry is None:
            out.append(f"{'.' * min(gutter, 3):>{gutter}} |")
            continue
        row, line, first, last = entry
        shown = line.replace("\t", TAB)
        out.append(f"{row:>{gutter}} | {shown}".rstrip())
        before = _width(line[:first].replace("\t", TAB))
        marks = max(1, _width(line[first:last].replace("\t", TAB)))
        label = f" {d.name}" if entry is marked[-1] else ""
        out.append(f"{pad} | {' ' * before}{'^' * marks}{label}")
    out.append(f"{pad} |")
    return out


def render(diagnostics: list[Diagnostic], files: int, quiet: bool = False) -> str:
    sources = Sources()
    blocks = []
    for d in diagnostics:
        lines = [header(d), *excerpt(d, sources)]
        if d.fix and d.fix.message:
            lines.append(f"{' ' * len(str(d.span.end_line))} = help: {d.fix.message}")
        blocks.append("\n".join(lines))
    if not quiet:
        blocks.append(summary(len(diagnostics), files))
    return "\n\n".join(blocks)
