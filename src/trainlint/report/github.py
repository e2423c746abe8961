"""github: GitHub Actions workflow commands, one `::error` (TL0xx: `::warning`) per diagnostic, which
the runner turns into annotations on the changed lines of a pull request. (A notebook's rows count
within a cell, so its annotations are file-level and the message says where.)"""

from __future__ import annotations

from trainlint.diagnostics import Diagnostic
from trainlint.report._common import cell_of, in_cell, is_meta


def escape_data(value: str) -> str:
    """The Actions toolkit's escapeData (@actions/core, command.ts)."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """The Actions toolkit's escapeProperty: escapeData plus ':' and ','."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def command(d: Diagnostic) -> str:
    s = d.span
    where = "" if cell_of(d) is not None else f",line={s.line},col={s.col},endLine={s.end_line},endColumn={s.end_col}"
    props = f"file={escape_property(d.filename)}{where},title={escape_property(d.code)}"
    return f"::{'warning' if is_meta(d.code) else 'error'} {props}::{escape_data(in_cell(d) + d.message)}"


def render(diagnostics: list[Diagnostic], files: int, quiet: bool = False) -> str:
    return "\n".join(command(d) for d in diagnostics)
