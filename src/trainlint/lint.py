"""The engine: file -> cheap relevance check -> LibCST facts -> rules -> suppression -> diagnostics."""

from __future__ import annotations

import ast
import os
import re
import signal
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from fnmatch import fnmatch
from pathlib import Path

from trainlint.config import Settings
from trainlint.context import FileContext
from trainlint.diagnostics import Diagnostic, Span
from trainlint.discovery import relative
from trainlint.edits import source_lines
from trainlint.facts import extract_facts
from trainlint.facts.names import INTERESTING_SHORTS, LIGER_APPLY_RE, MODEL_CLASS_RE
from trainlint.knowledge.versions import decide_versions
from trainlint.notebook import Notebook, NotebookError, read_notebook
from trainlint.rules import META_RULES, REGISTRY
from trainlint.source import Unreadable, read_source

# A file that matches none of these cannot produce a finding, so it is never parsed.
_RELEVANT_BYTES = re.compile(
    rb"from_pretrained|from_config|Trainer|TrainingArguments|Config\s*\(|cross_entropy|CrossEntropyLoss|peft"
    rb"|checkpoint|labels\s*=|For[A-Z]\w*\s*\(|DataLoader"
)
_RELEVANT_CALLS = INTERESTING_SHORTS - {"backward", "step", "train", "add_argument", "HfArgumentParser",
                                        "BitsAndBytesConfig", "LoraConfig"}
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)
_IGNORE = re.compile(r"#\s*trainlint:\s*ignore\[(?P<codes>[^\]]*)\]")


@dataclass
class FileResult:
    path: Path
    display: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    skipped: str | None = None  # why the file was not analysed (verbose)
    context: FileContext | None = None


def enabled_codes(settings: Settings, select=None, ignore=None, extend_select=None) -> set[str]:
    """Ruff's semantics: the most specific matching prefix decides; at equal length, ignore wins."""
    chosen = list(select if select else settings.select) + list(extend_select or ()) + list(settings.extend_select)
    ignored = list(settings.ignore) + list(ignore or ())
    out = set()
    for code in [*REGISTRY, *META_RULES]:
        best_sel = max((len(p) for p in chosen if code.startswith(p)), default=-1)
        best_ign = max((len(p) for p in ignored if code.startswith(p)), default=-1)
        if best_sel > best_ign:
            out.add(code)
    return out


def _display(path: Path) -> str:
    try:
        return os.path.relpath(path, Path.cwd()).replace(os.sep, "/") if path.is_absolute() else path.as_posix()
    except ValueError:
        return path.as_posix()


def _meta(code: str, display: str, message: str, line: int = 1, col: int = 1) -> Diagnostic:
    return Diagnostic(code, META_RULES[code][0], message, display, Span.point(line, col))


def _is_relevant(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name and (name in _RELEVANT_CALLS or MODEL_CLASS_RE.match(name) or LIGER_APPLY_RE.match(name)):
                return True
            if any(k.arg == "labels" for k in node.keywords):
                return True
    return False


class _Timeout(BaseException):
    """BaseException, so no `except Exception` inside a library can swallow it half-way through a parse."""


@contextmanager
def _deadline(seconds: float):
    """Interrupt the work after `seconds` (SIGALRM; only where available and on the main thread)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def on_alarm(signum, frame):
        raise _Timeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def lint_file(path: Path, settings: Settings, codes: set[str]) -> FileResult:
    try:
        with _deadline(settings.per_file_timeout):
            return _lint_file(path, settings, codes)
    except Exception as exc:  # noqa: BLE001 - one file's internal error must not stop the run
        display = _display(path)
        result = FileResult(path, display, skipped="internal error")
        result.diagnostics.append(_meta("TL004", display, f"trainlint failed on this file ({type(exc).__name__}: "
                                                          f"{str(exc)[:120]}); please report it"))
        return _finish(result, settings, codes, None)
    except _Timeout:
        display = _display(path)
        result = FileResult(path, display, skipped="per-file time limit")
        result.diagnostics.append(_meta("TL003", display, f"not linted: took longer than the per-file time limit "
                                                          f"({settings.per_file_timeout:g} s, `per-file-timeout`)"))
        return _finish(result, settings, codes, None)


def _lint_file(path: Path, settings: Settings, codes: set[str]) -> FileResult:
    if path.suffix == ".ipynb":
        return lint_notebook(path, settings, codes)
    source = read_source(path)
    if isinstance(source, Unreadable):
        result = FileResult(path, _display(path))
        result.diagnostics.append(_meta("TL002", result.display, f"cannot lint this file: {source.reason}",
                                        source.line, source.col))
        result.skipped = source.reason
        return _finish(result, settings, codes, None)
    return lint_text(path, source.text, settings, codes, source.raw)


def lint_notebook(path: Path, settings: Settings, codes: set[str]) -> FileResult:
    display = _display(path)
    source = read_source(path)
    reason = None
    if isinstance(source, Unreadable):
        reason = source.reason
    else:
        try:
            nb = read_notebook(source.text)
        except NotebookError as exc:
            reason = str(exc)
    if reason is not None:
        result = FileResult(path, display, skipped=reason)
        result.diagnostics.append(_meta("TL002", display, f"cannot lint this notebook: {reason}"))
        return _finish(result, settings, codes, None)
    if not nb.code_cells:
        return FileResult(path, display, skipped="notebook has no code cells")
    result = lint_text(path, nb.source, settings, codes)
    result.diagnostics = [to_cell(d, nb) for d in result.diagnostics]
    return result


def to_cell(diag: Diagnostic, nb: Notebook) -> Diagnostic:
    """Combined-source coordinates -> the cell and the row inside it (Ruff's notebook convention)."""
    cell, row = nb.locate(diag.span.line)
    _, end_row = nb.locate(diag.span.end_line)
    fix = diag.fix
    if fix is not None:
        fix = {**fix, "edits": [{**e, "location": {**e["location"], "row": nb.locate(e["location"]["row"])[1]},
                                 "end_location": {**e["end_location"],
                                                  "row": nb.locate(e["end_location"]["row"])[1]}}
                                for e in fix["edits"]]}
    return replace(diag, span=Span(row, diag.span.col, end_row, diag.span.end_col), cell=cell, fix=fix)


def lint_text(path: Path, text: str, settings: Settings, codes: set[str], raw: bytes | None = None) -> FileResult:
    """Lint `text` as the contents of `path` (the fixer re-lints its result this way)."""
    display = _display(path)
    result = FileResult(path, display)
    if not _RELEVANT_BYTES.search(raw if raw is not None else text.encode("utf-8", "surrogatepass")):
        result.skipped = "mentions none of the APIs trainlint checks"
        return result
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences in user code are not our business
            tree = ast.parse(text, filename=display)
    except SyntaxError as exc:
        result.diagnostics.append(_meta("TL001", display, f"syntax error: {exc.msg}", exc.lineno or 1,
                                        exc.offset or 1))
        result.skipped = "syntax error"
        return _finish(result, settings, codes, text)
    except (ValueError, RecursionError, MemoryError) as exc:
        result.diagnostics.append(_meta("TL001", display, f"could not be parsed: {type(exc).__name__}: {exc}"))
        result.skipped = "could not be parsed"
        return _finish(result, settings, codes, text)
    if not _is_relevant(tree):
        result.skipped = "calls none of the APIs trainlint checks"
        return result
    import libcst as cst  # only now: most files never get here

    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        result.diagnostics.append(_meta("TL001", display, f"syntax error: {exc.message}", exc.raw_line,
                                        exc.raw_column + 1))
        result.skipped = "syntax error"
        return _finish(result, settings, codes, text)
    except (RecursionError, MemoryError) as exc:
        result.diagnostics.append(_meta("TL001", display, f"could not be parsed: {type(exc).__name__}"))
        result.skipped = "could not be parsed"
        return _finish(result, settings, codes, text)
    try:
        from trainlint.facts.walk import statement_starts  # (positions are placed with the ast already parsed)

        facts = extract_facts(module, display, text, statement_starts(tree))
        versions = decide_versions(path, facts.pip_pins, settings.version_overrides())
        ctx = FileContext(path, display, facts, versions, settings, text)
        result.context = ctx
        for code in sorted(codes & REGISTRY.keys()):
            result.diagnostics.extend(REGISTRY[code].run(ctx))
    except RecursionError:
        result.diagnostics = [_meta("TL001", display, "could not be analysed: expressions nested too deeply")]
    return _finish(result, settings, codes, text)


def _finish(result: FileResult, settings: Settings, codes: set[str], text: str | None) -> FileResult:
    ignored = _per_file_ignores(result.path, settings)
    lines = source_lines(text) if text is not None else []
    kept = []
    for diag in result.diagnostics:
        if diag.code not in codes or any(diag.code.startswith(p) for p in ignored):
            continue
        if 0 < diag.span.line <= len(lines) and _suppressed(lines[diag.span.line - 1], diag.code):
            continue
        kept.append(diag)
    result.diagnostics = sorted(kept, key=lambda d: d.sort_key)
    return result


def _per_file_ignores(path: Path, settings: Settings) -> list[str]:
    rel = relative(path, settings.root)
    out: list[str] = []
    for pattern, codes in settings.per_file_ignores:
        if fnmatch(rel, pattern) or fnmatch(path.name, pattern):
            out.extend(codes)
    return out


def _suppressed(line: str, code: str) -> bool:
    if "#" not in line:
        return False
    m = _NOQA.search(line)
    if m:
        codes = m.group("codes")
        if codes is None or code in re.split(r"[\s,]+", codes.upper()):
            return True
    m = _IGNORE.search(line)
    if m:
        listed = [c.strip().upper() for c in m.group("codes").split(",")]
        return code in listed or "" in listed
    return False
