"""What the language server computes, apart from the protocol: an open document -> the findings the lint API
reports for it (placed on the documents they are in), and a finding -> the edit its fix makes.

Nothing here is new linting: a script or a notebook is `lint.lint_file` with the editor's text, a launcher or
a config is what `trainlint check LAUNCHER` lints (`launch.discover.expand_explicit`), a fix is
`fix.plan_fixes` / `fix.plan_launch_fixes` (applied, re-parsed, re-linted; nothing written), and the protocol
objects come from `report.lsp`. The protocol side (pygls) is in `trainlint.server.app`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from trainlint.config import Settings, discover
from trainlint.diagnostics import Diagnostic
from trainlint.discovery import LAUNCHERS, is_excluded
from trainlint.fix import edits_file, plan_fixes, plan_launch_fixes
from trainlint.lint import FileResult, enabled_codes, lint_file
from trainlint.report import lsp
from trainlint.source import Source, read_source

CONFIGS = (".yaml", ".yml", ".json", ".md", ".markdown")  # read as what the launches that pass them run


@dataclass(frozen=True)
class Cell:
    uri: str
    text: str


@dataclass(frozen=True)
class Document:
    """An open document as the client last sent it. A notebook document (LSP 3.17) has its code cells, each a
    text document of its own; `text` is then the notebook as trainlint reads a .ipynb file."""

    uri: str
    path: Path
    text: str
    version: int | None = None
    cells: tuple[Cell, ...] | None = None

    @property
    def kind(self) -> str:
        if self.cells is not None:
            return "notebook"
        if self.path.suffix == ".ipynb":
            return "notebook-json"  # a client without notebook support sends the JSON as text
        if self.path.suffix in LAUNCHERS or self.path.suffix in CONFIGS:
            return "launch"
        return "script"


def notebook_json(cells: tuple[Cell, ...], metadata: dict | None) -> str:
    """The nbformat 4 JSON of a notebook document's code cells (what `lint.lint_notebook` and `fix.plan_fixes`
    read). Written with json.dumps(indent=1), a layout `notebook.write_back` reproduces, so fixes work on it."""
    data = {"nbformat": 4, "nbformat_minor": 5, "metadata": metadata or {},
            "cells": [{"cell_type": "code", "metadata": {}, "source": c.text, "outputs": [], "execution_count": None}
                      for c in cells]}
    return json.dumps(data, indent=1)


@dataclass(frozen=True)
class Finding:
    """A diagnostic as published (`lsp`, on document `uri`), the trainlint Diagnostic it came from, and what is
    needed to recompute its fix: the file whose lint reported it, the text and settings it was linted with."""

    uri: str
    lsp: dict
    diag: Diagnostic
    linted: Path
    text: str | None
    settings: Settings


Buffers = Callable[[Path], "str | None"]  # an open document's text by path (None: read the disk)


def settings_for(path: Path) -> Settings:
    """The nearest [tool.trainlint] above the document (ConfigError when it is invalid), as `check` reads it."""
    return discover(path.parent)


def uri_for(path: Path) -> str:
    return path.resolve().as_uri()


def _absolute(name: str) -> Path:
    """A display path (relative to the server's working directory, the workspace root) -> the file."""
    return (Path.cwd() / name).resolve()


def _disk_lines(path: Path) -> list[str] | None:
    source = read_source(path)
    return lsp.lines_of(source.text) if isinstance(source, Source) else None


def _runs(doc: Document, settings: Settings, codes: set[str], buffers: Buffers) -> list[tuple[FileResult, str | None,
                                                                                              Settings]]:
    """The lint runs a document stands for: (result, the text linted or None for the disk, the settings)."""
    if doc.kind != "launch":
        return [(lint_file(doc.path, settings, codes, doc.text), doc.text, settings)]
    from trainlint.launch.discover import expand_explicit

    files, launch_files, configs = expand_explicit([doc.path], settings)
    if launch_files:
        settings = replace(settings, launch_files=launch_files, launch_configs=configs)
    files += [Path(f) for f in launch_files if Path(f).resolve() != doc.path.resolve()]  # a config's TL005 too
    out = []
    for file in dict.fromkeys(files):
        text = buffers(file.resolve()) if file.suffix in (".py", ".ipynb") else None
        out.append((lint_file(file, settings, codes, text), text, settings))
    return out


def analyse(doc: Document, buffers: Buffers, encoding: str = "utf-16",
            settings: Settings | None = None) -> dict[str, list[Finding]]:
    """uri -> findings for every document this one's analysis reports on: itself (always present, so that a
    fixed finding is cleared), its cells, and the launchers / configs where a launched value is written.
    Launchers and configs are read from disk, as the launches of the scripts they run are."""
    settings = settings if settings is not None else settings_for(doc.path)
    own = [c.uri for c in doc.cells] if doc.cells is not None else [doc.uri]
    out: dict[str, list[Finding]] = {uri: [] for uri in own}
    if is_excluded(doc.path, settings):  # as pre-commit's --force-exclude: excluded files stay quiet
        return out
    codes = enabled_codes(settings)
    seen: set[tuple] = set()
    for result, text, used in _runs(doc, settings, codes, buffers):
        for d in result.diagnostics:
            target = _absolute(d.filename)
            file_level = False
            if doc.cells is not None and target == doc.path.resolve() and d.cell is not None:
                if not 1 <= d.cell <= len(doc.cells):
                    continue
                uri, lines = doc.cells[d.cell - 1].uri, lsp.lines_of(doc.cells[d.cell - 1].text)
            elif target == doc.path.resolve():  # (a launcher or a config was linted as it is on disk)
                lines = _disk_lines(target) if doc.kind == "launch" else lsp.lines_of(doc.text)
                uri, file_level = doc.uri, d.cell is not None
            else:
                buffered = buffers(target)
                uri = uri_for(target)
                lines = lsp.lines_of(buffered) if buffered is not None else _disk_lines(target)
                file_level = d.cell is not None
            key = (uri, d.code, d.span, d.cell, d.message)
            if key in seen:
                continue
            seen.add(key)
            item = lsp.diagnostic(d, lines, encoding, lambda f: _locate(f, buffers), file_level)
            out.setdefault(uri, []).append(Finding(uri, item, d, result.path, text, used))
    return out


def _locate(name: str, buffers: Buffers) -> tuple[str, list[str] | None]:
    path = _absolute(name)
    text = buffers(path)
    return uri_for(path), lsp.lines_of(text) if text is not None else _disk_lines(path)


@dataclass(frozen=True)
class Action:
    """A code action: its title and kind, and the edits per document uri (the client's uris for open ones)."""

    title: str
    kind: str
    edits: dict[str, list[dict]]
    preferred: bool = False
    finding: Finding | None = None


def _cell_edits(doc: Document, new_json: str, encoding: str) -> dict[str, list[dict]]:
    """The fixed notebook JSON (from plan_fixes, which rewrites only the cells it touches) -> one minimal edit
    per cell that changed."""
    data = json.loads(new_json)
    out: dict[str, list[dict]] = {}
    for cell, new in zip(doc.cells or (), data["cells"]):
        text = new["source"] if isinstance(new["source"], str) else "".join(new["source"])
        edit = lsp.minimal_edit(cell.text, text, encoding)
        if edit is not None:
            out[cell.uri] = [edit]
    return out


def _whole(doc: Document, new_text: str, encoding: str) -> dict[str, list[dict]]:
    if doc.cells is not None:
        return _cell_edits(doc, new_text, encoding)
    edit = lsp.minimal_edit(doc.text, new_text, encoding)
    return {doc.uri: [edit]} if edit is not None else {}


def fix_action(finding: Finding, doc: Document | None, buffers: Buffers, encoding: str = "utf-16") -> Action | None:
    """The code action of one finding's fix, or None when it has none or the fix fails the checks `--fix`
    makes (it must apply, parse, and re-linted no longer report what it fixed). `doc` is the open document
    that was linted, when the fix is in it."""
    d = finding.diag
    if not d.fix:
        return None
    fix = d.fix
    codes = enabled_codes(finding.settings)
    target = edits_file(d)
    unsafe = not fix.safe
    title = f"Fix {d.code}{' (unsafe fix)' if unsafe else ''}: {fix.message}"
    if _absolute(target) == finding.linted.resolve():
        if doc is not None and finding.text is not None and doc.text != finding.text:
            return None  # the text changed since: its analysis, due after the pause, brings the new fixes
        outcome = plan_fixes(finding.linted, finding.settings, codes, unsafe=True, text=finding.text,
                             only=lambda c: c == d and c.fix is not None and c.fix.edits == fix.edits)
        if not outcome.applied or outcome.new_text is None:
            return None
        if doc is not None and doc.kind == "script":
            edits = {doc.uri: lsp.text_edits(fix.edits, lsp.lines_of(doc.text), encoding)}
        elif doc is not None:
            edits = _whole(doc, outcome.new_text, encoding)
        else:  # a script linted from disk under a launcher's analysis
            edits = {uri_for(finding.linted): lsp.text_edits(fix.edits, _disk_lines(finding.linted), encoding)}
    else:  # a value written in a launcher, a recipe or an args file
        outcome = plan_launch_fixes(target, [d], [finding.linted], finding.settings, codes, write=False)
        if outcome.error or outcome.new_text is None:
            return None
        where = _absolute(target)
        text, lines = buffers(where), _disk_lines(where)
        if text is not None and lsp.lines_of(text) != lines:
            return None  # open with unsaved changes: the finding's place was read on disk (see `analyse`)
        edits = {uri_for(where): lsp.text_edits(fix.edits, lines, encoding)}
    return Action(title, "quickfix", edits, preferred=not unsafe, finding=finding) if edits else None


def fix_all_action(doc: Document, encoding: str = "utf-16") -> Action | None:
    """`source.fixAll.trainlint`: every safe fix of the document, as `check --fix` would apply them."""
    if doc.kind == "launch":
        return None
    settings = settings_for(doc.path)
    if is_excluded(doc.path, settings):
        return None
    text = doc.text
    outcome = plan_fixes(doc.path, settings, enabled_codes(settings), unsafe=False, text=text)
    if not outcome.applied or outcome.new_text is None:
        return None
    edits = _whole(doc, outcome.new_text, encoding)
    n = len(outcome.applied)
    return Action(f"Fix all safe trainlint findings ({n})", "source.fixAll.trainlint", edits) if edits else None


def hover_text(code: str) -> str:
    """The rule's page (`trainlint rule CODE`), or the one line a TL0xx has."""
    from trainlint.pages import page
    from trainlint.rules import META_RULES

    text = page(code)
    if text is not None:
        return text
    info = META_RULES.get(code)
    return f"# {code} {info.name}\n\n{info.summary}" if info else f"# {code}"
