"""Building fixes: text edits (Ruff's JSON shape, 1-based character columns) that keep the user's
formatting. Rules call these; fix.py applies them."""

from __future__ import annotations

import re

from dataclasses import replace as _replace

from trainlint.diagnostics import Edit, Fix, Span
from trainlint.facts import Call
from trainlint.source import line_starts, newline_of, source_lines  # noqa: F401  (re-exported)


def edit(start: tuple[int, int], end: tuple[int, int], content: str) -> Edit:
    return Edit(tuple(start), tuple(end), content)


def make_fix(applicability: str, message: str, *edits: Edit) -> Fix:
    assert applicability in ("safe", "unsafe")
    return Fix(applicability, message, tuple(edits))


def replace(span: Span, content: str) -> Edit:
    return edit((span.line, span.col), (span.end_line, span.end_col), content)


def quote_of(text: str, span: Span | None = None) -> str:
    """The quote a string literal written at `span` uses; else the file's prevailing one (Ruff's
    convention: a fix follows the code it edits). Double quotes when there is no string at all."""
    if span is not None:
        lines = source_lines(text)
        if 0 < span.line <= len(lines):
            segment = lines[span.line - 1][span.col - 1:] if span.line == span.end_line else lines[span.line - 1]
            m = re.search(r"(?<![\w])[rRbBuUfF]?(['\"])", segment[: span.end_col - span.col] if span.line == span.end_line
                          else segment)
            if m:
                return m.group(1)
    singles, doubles = len(re.findall(r"'[^'\n]*'", text)), len(re.findall(r'"[^"\n]*"', text))
    return "'" if singles > doubles else '"'


def non_reentrant_kwargs(text: str) -> str:
    """`{"use_reentrant": False}` in the file's prevailing quotes (the dict a TL201/TL202 fix writes)."""
    q = quote_of(text)
    return f"{{{q}use_reentrant{q}: False}}"


def literal_in(text: str, span: Span) -> Span | None:
    """The one string literal written inside `span` on one line (`attn_implementation="eager"` -> `"eager"`)."""
    lines = source_lines(text)
    if span.line != span.end_line or not 0 < span.line <= len(lines):
        return None
    segment = lines[span.line - 1][span.col - 1: span.end_col - 1]
    found = list(re.finditer(r"""(?<![\w'"])(['"])[^'"\\\n]*\1""", segment))
    if len(found) != 1:
        return None
    m = found[0]
    return Span(span.line, span.col + m.start(), span.line, span.col + m.end())


def launch_value_fix(applicability: str, message: str, origin: Span, value: str) -> Fix | None:
    """A fix that rewrites a value where a launch writes it: a launcher's word, a YAML or JSON value (`origin`
    carries that file). The value keeps its quoting; a value in a notebook's launch line is not edited here."""
    from pathlib import Path

    if origin.file is None or origin.file.endswith(".ipynb"):
        return None
    try:
        lines = source_lines(Path(origin.file).read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError):
        return None
    if origin.line != origin.end_line or not 0 < origin.line <= len(lines):
        return None
    old = lines[origin.line - 1][origin.col - 1:origin.end_col - 1]
    quote = old[0] if len(old) >= 2 and old[0] in "'\"" and old[-1] == old[0] else ""
    if not old or (not quote and not re.fullmatch(r"[\w./:-]+", old)):
        return None  # an expansion, a flow mapping...: not a plain value to swap
    fix = make_fix(applicability, f"{message} in {origin.file}", replace(origin.local(), f"{quote}{value}{quote}"))
    return _replace(fix, file=origin.file)  # the file the edits apply to, when it is not the finding's


def _line(text: str, row: int) -> str:
    lines = source_lines(text)
    return lines[row - 1] if 0 < row <= len(lines) else ""


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def set_keyword(call: Call, name: str, value_src: str, text: str) -> list[Edit]:
    """Edits that set `name=value_src` in `call`: replace an existing keyword, or add it in the call's
    own style (one argument per line with or without a trailing comma, or inline). Comments stay put."""
    existing = call.kw_span(name)
    if existing is not None:
        return [replace(existing, f"{name}={value_src}")]
    if call.close_paren is None:
        return []
    new = f"{name}={value_src}"
    paren = call.close_paren
    if call.last_arg is None:
        return [edit((paren.line, paren.col), (paren.line, paren.col), new)]
    last = call.last_arg
    if paren.line > last.end_line:
        indent = _indent(_line(text, last.line))
        nl = newline_of(text)
        out = [] if call.trailing_comma else [edit((last.end_line, last.end_col), (last.end_line, last.end_col), ",")]
        tail = "," if call.trailing_comma else ""
        out.append(edit((last.end_line + 1, 1), (last.end_line + 1, 1), f"{indent}{new}{tail}{nl}"))
        return out
    if call.trailing_comma:
        return [edit((paren.line, paren.col), (paren.line, paren.col), f" {new}")]
    return [edit((last.end_line, last.end_col), (last.end_line, last.end_col), f", {new}")]


def insert_line_after(row: int, content: str, text: str) -> Edit:
    """A new statement on the line after `row`, indented like that line."""
    indent = _indent(_line(text, row))
    nl = newline_of(text)
    lines = source_lines(text)
    has_newline = len(lines) > 1 and lines[-1] == ""
    if has_newline:
        lines = lines[:-1]
    if row < len(lines):
        return edit((row + 1, 1), (row + 1, 1), f"{indent}{content}{nl}")
    last = _line(text, row)
    col = len(last) + 1
    prefix = "" if has_newline else nl
    target_row = row + 1 if has_newline else row
    target_col = 1 if has_newline else col
    return edit((target_row, target_col), (target_row, target_col), f"{prefix}{indent}{content}{nl if has_newline else ''}")
