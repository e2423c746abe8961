"""Jupyter notebooks: their code cells as one Python source (later cells see earlier cells' facts),
IPython magics and shell lines blanked out without moving any line, and the way back from the
combined source to each cell, for diagnostics and for fixes that rewrite only the cells they touch."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

SEPARATOR = "# trainlint: cell {index}"
_SEPARATOR_RE = re.compile(r"^# trainlint: cell (\d+)$")
_MAGIC_RE = re.compile(r"^(\s*)([%!].*)$")
_PLACEHOLDER = "# trainlint-magic: "


class NotebookError(Exception):
    """The file is not a notebook trainlint can read; the message says why."""


@dataclass(frozen=True)
class Notebook:
    data: dict
    raw: str
    code_cells: tuple[int, ...]  # indices (0-based) into data["cells"] of the code cells
    source: str  # the combined Python source
    line_map: tuple[tuple[int, int], ...]  # combined line (0-based) -> (cell index 0-based, line in cell 1-based)

    def locate(self, row: int) -> tuple[int | None, int]:
        """Combined 1-based row -> (1-based cell number, 1-based row in that cell)."""
        if 0 < row <= len(self.line_map):
            cell, line = self.line_map[row - 1]
            if cell >= 0:
                return cell + 1, line
        return None, row


def _cell_text(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _blank_magics(text: str) -> str:
    """IPython-only lines become comments that keep their text (so `!pip install x==1` still pins)."""
    lines = text.split("\n")
    if lines and lines[0].lstrip().startswith("%%"):
        return "\n".join(_PLACEHOLDER + line for line in lines)
    out = []
    continued = False
    for line in lines:
        m = _MAGIC_RE.match(line)
        if continued or m:
            out.append((m.group(1) if m else "") + _PLACEHOLDER + (m.group(2) if m else line))
            continued = line.rstrip().endswith("\\")
        else:
            out.append(line)
    return "\n".join(out)


def read_notebook(raw: str) -> Notebook:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise NotebookError(f"notebook is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise NotebookError("notebook is not a JSON object")
    major = data.get("nbformat")
    if major != 4 or not isinstance(data.get("cells"), list):
        if major == 3 or "worksheets" in data:
            raise NotebookError("nbformat 3 notebooks are not supported; convert it with "
                                "`jupyter nbconvert --to notebook --nbformat 4`")
        raise NotebookError(f"not an nbformat 4 notebook (nbformat={major!r})")
    code = tuple(i for i, c in enumerate(data["cells"]) if isinstance(c, dict) and c.get("cell_type") == "code")
    parts: list[str] = []
    line_map: list[tuple[int, int]] = []
    for i in code:
        parts.append(SEPARATOR.format(index=i + 1))
        line_map.append((-1, 0))
        text = _blank_magics(_cell_text(data["cells"][i]))
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for n, line in enumerate(lines, start=1):
            parts.append(line)
            line_map.append((i, n))
    return Notebook(data, raw, code, "\n".join(parts) + "\n", tuple(line_map))


def _restore(text: str) -> str:
    return "\n".join(
        (line[: line.index(_PLACEHOLDER)] + line[line.index(_PLACEHOLDER) + len(_PLACEHOLDER):])
        if _PLACEHOLDER in line and line.lstrip().startswith(_PLACEHOLDER) else line
        for line in text.split("\n"))


def _dump_styles():
    for indent in (1, 2, 4, None):
        for sort_keys in (True, False):
            for ensure_ascii in (False, True):
                yield dict(indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii)


def _find_style(data: dict, raw: str) -> tuple[dict, str] | None:
    """The json.dumps settings (and trailing text) that reproduce the file exactly, if any."""
    for style in _dump_styles():
        dumped = json.dumps(data, **style)
        if raw.startswith(dumped) and raw[len(dumped):] in ("", "\n", "\r\n"):
            return style, raw[len(dumped):]
    return None


def write_back(nb: Notebook, new_source: str) -> str:
    """The notebook text with each code cell replaced by its part of `new_source`; every other byte
    is reproduced exactly, or NotebookError is raised and nothing should be written."""
    found = _find_style(nb.data, nb.raw)
    if found is None:
        raise NotebookError("the notebook's JSON layout cannot be reproduced exactly, so it is not rewritten")
    style, tail = found
    cells: dict[int, list[str]] = {}
    current: int | None = None
    for line in new_source.split("\n"):
        m = _SEPARATOR_RE.match(line)
        if m:
            current = int(m.group(1)) - 1
            cells[current] = []
        elif current is not None:
            cells[current].append(line)
    data = json.loads(nb.raw)
    for index, lines in cells.items():
        while lines and lines[-1] == "" and len(lines) > 0:
            lines.pop()
        cell = data["cells"][index]
        original = _cell_text(cell)
        text = _restore("\n".join(lines))
        if original.endswith("\n"):
            text += "\n"
        if text == original:
            continue
        if isinstance(cell.get("source"), list):
            cell["source"] = text.splitlines(keepends=True)
        else:
            cell["source"] = text
    return json.dumps(data, **style) + tail
