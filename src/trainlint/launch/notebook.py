"""Notebooks as launchers: a `%%writefile train.py` cell is a script of its own, and the notebook's
`!python train.py ...` / `!accelerate launch train.py ...` lines, `%%bash` cells and `%run train.py ...`
launch it.

Shell lines are read from a text shaped like the notebook's combined source (same rows and columns,
everything else blank), so every span a launch carries maps back to its cell like any other diagnostic."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from trainlint.diagnostics import Span
from trainlint.launch.model import Invocation, Word
from trainlint.notebook import Notebook, _cell_text

_WRITEFILE = re.compile(r"^%%writefile(?:\s+-a)?\s+(\S+)\s*$")
_SHELL_CELL = re.compile(r"^%%(?:bash|sh|script\s+(?:ba)?sh)\s*$")
_INTERPOLATED = re.compile(r"\{[^{}]*\}|\$[A-Za-z_]")


@dataclass(frozen=True)
class WrittenScript:
    name: str  # the file name after %%writefile, relative to the notebook's folder
    text: str  # the cell's body
    offset: int  # combined-source row just before the body's first line


def _first_rows(nb: Notebook) -> dict[int, int]:
    """cell index -> combined 1-based row of its first line."""
    out: dict[int, int] = {}
    for row, (cell, line) in enumerate(nb.line_map, start=1):
        if cell >= 0 and line == 1:
            out.setdefault(cell, row)
    return out


def written_scripts(nb: Notebook) -> list[WrittenScript]:
    rows = _first_rows(nb)
    out = []
    for index in nb.code_cells:
        text = _cell_text(nb.data["cells"][index])
        first, _, body = text.partition("\n")
        m = _WRITEFILE.match(first.strip())
        if m and index in rows and m.group(1).endswith(".py"):
            out.append(WrittenScript(m.group(1).strip("'\""), body, rows[index]))
    return out


def written_configs(path: Path) -> dict[str, tuple[str, int]]:
    """`%%writefile recipe.yaml` cells of the notebook at `path`: absolute path of the file the cell writes ->
    (its text, the combined-source row just before the body), for the notebook's own launches to read
    (`!torchrun train.py --config recipe.yaml`) although the file exists only once the cell has run. A later
    cell writing the same name replaces an earlier one, as running top to bottom does (`-a` cells are left out:
    their text is not the whole file)."""
    from trainlint.notebook import NotebookError, read_notebook

    try:
        nb = read_notebook(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, NotebookError):
        return {}
    rows = _first_rows(nb)
    out: dict[str, tuple[str, int]] = {}
    for index in nb.code_cells:
        first, _, body = _cell_text(nb.data["cells"][index]).partition("\n")
        m = re.match(r"^%%writefile\s+(\S+)\s*$", first.strip())
        name = m.group(1).strip("'\"") if m else ""
        if name.endswith((".yaml", ".yml", ".json")) and not _INTERPOLATED.search(name) and index in rows:
            out[str((path.parent / name).resolve())] = (body, rows[index])
    return out


def launch_text(nb: Notebook) -> str:
    """The notebook's shell lines at their combined-source rows and columns (the `!` blanked), other rows empty."""
    rows = _first_rows(nb)
    lines = [""] * (len(nb.line_map) + 1)
    for index in nb.code_cells:
        text = _cell_text(nb.data["cells"][index])
        cell_lines = text.split("\n")
        shell_cell = bool(cell_lines) and _SHELL_CELL.match(cell_lines[0].strip()) is not None
        continued = False
        for n, line in enumerate(cell_lines):
            row = rows.get(index, 0) + n
            if not 0 < row < len(lines):
                continue
            stripped = line.lstrip()
            if shell_cell and n > 0:
                lines[row - 1] = line
            elif stripped.startswith("!") and not stripped.startswith("!!"):
                at = len(line) - len(stripped)
                lines[row - 1] = line[:at] + " " + line[at + 1:]
            elif continued:
                lines[row - 1] = line
            else:
                continued = False
                continue
            continued = line.rstrip().endswith("\\")
    return "\n".join(lines)


_RUN = re.compile(r"^(\s*)%run\s+(?!-m\b)(\S+\.py\b.*)$")


def invocations(nb: Notebook, path: Path) -> list[Invocation]:
    from trainlint.launch.shell import read_shell

    text = launch_text(nb)
    out = [_uninterpolated(inv) for inv in read_shell(text, path).invocations] if text.strip() else []
    return out + _run_lines(nb, path)


def _run_lines(nb: Notebook, path: Path) -> list[Invocation]:
    """`%run train.py --lr 1e-4`: IPython runs the script with those arguments, as `python train.py ...` would.
    Each line is read as `python <rest>` on its own and its spans moved back onto the `%run` line."""
    from trainlint.launch.shell import read_shell

    rows = _first_rows(nb)
    out: list[Invocation] = []
    for index in nb.code_cells:
        for n, line in enumerate(_cell_text(nb.data["cells"][index]).split("\n")):
            m = _RUN.match(line)
            row = rows.get(index, 0) + n
            if m is None or row <= 0:
                continue
            start = len(line) - len(m.group(2))  # 0-based column of the script word
            shift = start - len("python ")
            text = "\n" * (row - 1) + "python " + m.group(2) + "\n"
            for inv in read_shell(text, path).invocations:
                out.append(_uninterpolated(_shifted(inv, shift)))
    return out


def _shifted(inv: Invocation, cols: int) -> Invocation:
    def span(s: Span) -> Span:
        return Span(s.line, s.col + cols, s.end_line, s.end_col + cols)

    def word(w: Word) -> Word:
        return replace(w, span=span(w.span), origin=span(w.origin) if w.origin is not None else None)

    return replace(inv, span=span(inv.span), script=word(inv.script) if inv.script else None,
                   args=tuple(word(w) for w in inv.args), launcher="%run")


def _uninterpolated(inv: Invocation) -> Invocation:
    """`!python train.py --lr {lr}`: IPython substitutes Python values into `{...}` and `$name`; unknown here."""
    def word(w: Word) -> Word:
        if w.text is not None and _INTERPOLATED.search(w.raw or w.text):
            return replace(w, text=None, note="an IPython {…} / $name substitution")
        return w

    return replace(inv, args=tuple(word(w) for w in inv.args),
                   script=word(inv.script) if inv.script is not None else None)
