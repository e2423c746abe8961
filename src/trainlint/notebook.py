"""Jupyter notebooks: their code cells as one Python source (later cells see earlier cells' facts),
IPython magics and shell lines blanked out without moving any line, and the way back from the
combined source to each cell, for diagnostics and for fixes that rewrite only the cells they touch."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SEPARATOR = "# trainlint: cell {index}"
# A skipped cell's separator row may start with `a = b = ...  `: the names it may set are unknown from there on
_SEPARATOR_RE = re.compile(r"^(?:[\w =]+= \.\.\.  )?# trainlint: cell (\d+)$")
_ASSIGNED = [re.compile(p) for p in (
    r"^\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*(?::[^=]*)?(?:[-+*/%&|^@]|//|\*\*|<<|>>)?=(?!=)",  # x = / x += / x: int =
    r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)",
    r"^\s*(?:async\s+)?for\s+([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s+in\b",
    r"\bas\s+([A-Za-z_]\w*)",
    r"^\s*import\s+([A-Za-z_]\w*)",
    r"^\s*from\s+\S+\s+import\s+([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)",
)]
_MAGIC_RE = re.compile(r"^(\s*)([%!].*)$")
# What IPython's front end also runs that is not Python: an automagic (`pip install x`, `cd data`: a line magic
# without its `%`, on by default) and help (`obj?`, `?obj`, `obj??`).
_AUTOMAGIC_RE = re.compile(r"^(\s*)((?:pip|conda|mamba|cd|load_ext|reload_ext|matplotlib|set_env|pylab|autoreload)"
                           r"\s+(?![=(\[,+*/%<>&|^:;]|\.\w).*)$")
_HELP_RE = re.compile(r"^(\s*)(\?{1,2}[\w.]+|[\w.]+\?{1,2})\s*$")
_PLACEHOLDER = "# trainlint-magic: "
# A shell line or line magic that starts a statement becomes `pass` + the placeholder comment: a block whose
# only statement it is (`if "COLAB_" not in ...:` then an indented `!pip install ...`) stays valid Python, and
# every other line keeps its row and column.
_STATEMENT = "pass  " + _PLACEHOLDER
# Cell magics whose body is Python (IPython's own list): only their first line is blanked.
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "python", "python3", "debug", "pypy"}


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
    """IPython-only lines become comments that keep their text (so `!pip install x==1` still pins); a
    Python cell magic (`%%time`) keeps its body, any other cell magic is blanked whole."""
    lines = text.split("\n")
    out = []
    if lines and lines[0].lstrip().startswith("%%"):
        name = lines[0].lstrip()[2:].split(None, 1)[0] if lines[0].strip() != "%%" else ""
        if name not in PYTHON_CELL_MAGICS:
            return "\n".join(_PLACEHOLDER + line for line in lines)
        # the body is IPython, in its own rows: its shell lines and line magics too (`%%capture` over `!pip install`)
        out.append(_PLACEHOLDER + lines[0])
        lines = lines[1:]
    continued = False
    for line in lines:
        m = _MAGIC_RE.match(line) or _AUTOMAGIC_RE.match(line) or _HELP_RE.match(line)
        if continued:
            out.append(_PLACEHOLDER + line)  # a continuation line: a comment, whatever its indentation
        elif m:
            out.append(m.group(1) + _STATEMENT + m.group(2))
        else:
            out.append(line)
        continued = (continued or m is not None) and line.rstrip().endswith("\\")
    return "\n".join(out)


def language(nb: Notebook) -> str | None:
    """The notebook's language (metadata.language_info.name, else kernelspec.language); None when it says none."""
    meta = nb.data.get("metadata") if isinstance(nb.data.get("metadata"), dict) else {}
    for holder, key in ((meta.get("language_info"), "name"), (meta.get("kernelspec"), "language")):
        if isinstance(holder, dict) and isinstance(holder.get(key), str) and holder[key].strip():
            return holder[key].strip().lower()
    return None


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


def bad_cells(nb: Notebook) -> dict[int, tuple[int, int, str]]:
    """Code cells (0-based index) that do not parse, even with their magics blanked, by `ast` or LibCST's
    newer grammar: index -> (row, column in the cell, why). Empty when the whole notebook parses."""
    import ast
    import warnings

    def parses(text: str) -> tuple[int, int, str] | None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ast.parse(text)
            return None
        except SyntaxError as exc:
            found = (exc.lineno or 1, exc.offset or 1, f"syntax error: {exc.msg}")
        except (ValueError, RecursionError, MemoryError) as exc:
            return 1, 1, type(exc).__name__
        try:
            import libcst as cst

            cst.parse_module(text)
            return None
        except Exception:  # noqa: BLE001 - not Python by any grammar read here
            return found

    if parses(nb.source) is None:
        return {}
    out = {}
    for index in nb.code_cells:
        where = parses(_blank_magics(_cell_text(nb.data["cells"][index])))
        if where is not None:
            out[index] = where
    return out


_TRAINS_RE = re.compile(r"\b\w*Trainer\s*\(|\.train\(\s*\)|\.backward\(|\boptimizer\.step\(|"
                        r"\b(?:torchrun|accelerate\s+launch|deepspeed)\s")


# What a run is made of, as a cell spells it: the model and its load (from_pretrained, a config class, dtype,
# attention, quantization, device moves), adapters, a trainer and its arguments, the loop, batch and length.
_RUN_RE = re.compile(r"\bfrom_pretrained\b|\b\w*(?:Config|Arguments|Trainer|Model\w*)\s*\(|\bget_peft_model\b|"
                     r"\bprepare_model_for_\w+|\.(?:to|cuda|half|bfloat16|float)\(|\b(?:torch_)?dtype\b|"
                     r"\battn_implementation\b|\bgradient_checkpointing\w*|\bbatch_size\b|\bmax_(?:seq_)?length\b|"
                     r"\bDataLoader\b|\.train\(|\.backward\(|\.step\(|\b(?:torchrun|accelerate|deepspeed)\b")


def bears_on_run(nb: Notebook, index: int) -> bool:
    """A cell that is not Python could hide part of the run only if it names something a run is made of
    (`_RUN_RE`), or binds a name (not an import) that a cell which does uses; a plotting or display helper that
    does not parse hides nothing the rules read."""
    text = cell_text(nb, index)
    if _RUN_RE.search(text):
        return True
    plain = "\n".join(line for line in text.split("\n") if not line.lstrip().startswith(("import ", "from ")))
    names = assigned_names(plain)
    if not names:
        return False
    used = re.compile(r"\b(?:" + "|".join(map(re.escape, names)) + r")\b")
    return any(used.search(cell_text(nb, i)) and _RUN_RE.search(cell_text(nb, i))
               for i in nb.code_cells if i != index)


def cell_text(nb: Notebook, index: int) -> str:
    return _cell_text(nb.data["cells"][index])


def trains(nb: Notebook) -> bool:
    """The notebook trains (a Trainer, `.train()`, `.backward()`, an optimizer step, or a launch in a `!` line):
    with a rule's finding, only then are its cells that are not Python worth a finding (lint.lint_notebook)."""
    return any(_TRAINS_RE.search(_cell_text(nb.data["cells"][i])) for i in nb.code_cells)


def without_cells(nb: Notebook, cells: set[int]) -> Notebook:
    """The same notebook with these code cells blanked (every line a placeholder comment: no row moves, and a
    fix writes them back unchanged). The names a skipped cell may assign are bound to `...` on its separator
    row, so a later cell's use of them is unknown rather than an earlier cell's value."""
    lines = nb.source.split("\n")
    for row, (cell, _) in enumerate(nb.line_map):
        if cell in cells and not lines[row].lstrip().startswith((_STATEMENT, _PLACEHOLDER)):
            lines[row] = _PLACEHOLDER + lines[row]
    for row, line in enumerate(lines):
        m = _SEPARATOR_RE.match(line)
        if m and int(m.group(1)) - 1 in cells:
            names = assigned_names(_cell_text(nb.data["cells"][int(m.group(1)) - 1]))
            if names:
                lines[row] = " = ".join(names) + " = ...  " + SEPARATOR.format(index=m.group(1))
    return Notebook(nb.data, nb.raw, nb.code_cells, "\n".join(lines), nb.line_map)


def assigned_names(text: str) -> list[str]:
    """The names a cell that does not parse may bind, read line by line (assignments, def/class, for, as,
    imports); keywords excluded."""
    import keyword

    found: dict[str, None] = {}
    for line in text.split("\n"):
        if line.lstrip().startswith(("#", "%", "!")):
            continue
        for pattern in _ASSIGNED:
            for m in pattern.finditer(line):
                for name in re.split(r"\s*,\s*", m.group(1)):
                    if name and not keyword.iskeyword(name) and name.isidentifier():
                        found[name] = None
    return list(found)


def _restore(text: str) -> str:
    out = []
    for line in text.split("\n"):
        stripped = line.lstrip()
        for mark in (_STATEMENT, _PLACEHOLDER):
            if stripped.startswith(mark):
                at = line.index(mark)
                line = line[:at] + line[at + len(mark):]
                break
        out.append(line)
    return "\n".join(out)


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


_INSTALLED_RE = re.compile(r"Successfully installed ([^\n]+)")
_INSTALLED_LIBS = ("transformers", "trl", "peft")


def installed_in_outputs(nb: Notebook) -> tuple[tuple[str, str, str], ...]:
    """(library, "==version", where) from pip's `Successfully installed trl-0.8.6 ...` lines in the code cells'
    stored outputs (what the notebook really ran on when it was saved); the last cell that installs a library wins."""
    found: dict[str, tuple[str, str, str]] = {}
    for i in nb.code_cells:
        outputs = nb.data["cells"][i].get("outputs")
        for out in outputs if isinstance(outputs, list) else ():
            if not isinstance(out, dict):
                continue
            texts = [out.get("text")]
            data = out.get("data")
            if isinstance(data, dict):
                texts.append(data.get("text/plain"))
            for text in texts:
                text = "".join(text) if isinstance(text, list) else text
                if not isinstance(text, str):
                    continue
                for line in _INSTALLED_RE.findall(text):
                    for word in line.split():
                        name, _, version = word.rpartition("-")
                        if name.lower() in _INSTALLED_LIBS and re.match(r"\d", version):
                            found[name.lower()] = (name.lower(), f"=={version}",
                                                   f"the stored output of cell {i + 1} (`Successfully installed "
                                                   f"{word}`)")
    return tuple(found.values())


def place(file: str, line: int) -> str:
    """`file:line` for a message, or `file:cell N:row` when `file` is a notebook (its combined-source row)."""
    if file.endswith(".ipynb"):
        nb = cached_notebook(file)
        cell, row = nb.locate(line) if nb is not None else (None, line)
        if cell is not None:
            return f"{file}:cell {cell}:{row}"
    return f"{file}:{line}"


@lru_cache(maxsize=16)
def cached_notebook(path: str) -> "Notebook | None":
    """The notebook at `path`, read once a run; None when it cannot be read."""
    try:
        return read_notebook(Path(path).read_text(encoding="utf-8", errors="replace"))
    except (OSError, NotebookError):
        return None
