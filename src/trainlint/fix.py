"""Applying fixes to a file without ever corrupting it.

All fixes of a file are applied in one pass over the text; the result must parse and, re-linted, must
no longer report what each fix was for (fixes that do not remove their diagnostic are dropped); then
it is written atomically (temporary file in the same directory, then rename), keeping the mode, the
encoding, the BOM and the newline style. On any error the file is left untouched.
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import libcst as cst

from trainlint.atomic import write_bytes_atomic
from trainlint.config import Settings
from trainlint.diagnostics import Diagnostic
from trainlint.discovery import display as _display
from trainlint.lint import lint_text, to_cell
from trainlint.notebook import NotebookError, bad_cells, read_notebook, without_cells, write_back
from trainlint.source import Source, line_starts, read_source


@dataclass
class FixOutcome:
    path: Path
    new_text: str | None = None  # None: nothing to change
    applied: list[Diagnostic] = field(default_factory=list)  # a subset of `found`
    remaining: list[Diagnostic] = field(default_factory=list)
    found: list[Diagnostic] = field(default_factory=list)  # before fixing
    error: str | None = None
    source: Source | None = None


def _offset(starts: list[int], row: int, col: int, size: int) -> int:
    if row - 1 >= len(starts):
        return size
    return min(starts[row - 1] + col - 1, size)


def _conflict(a: int, b: int, a2: int, b2: int) -> bool:
    """Two edits [a, b) and [a2, b2) overlap, or insert at the same point (their order would be ambiguous)."""
    return (a < b2 and a2 < b) or a == a2


def apply_edits(text: str, diagnostics: list[Diagnostic]) -> tuple[str, list[Diagnostic]]:
    """Apply the edits of non-overlapping fixes (first come, first served); returns the applied ones."""
    starts = line_starts(text)
    chosen: list[tuple[int, int, str]] = []
    applied: list[Diagnostic] = []
    for diag in diagnostics:
        spans = []
        for e in diag.fix.edits:
            a = _offset(starts, e.start[0], e.start[1], len(text))
            b = _offset(starts, e.end[0], e.end[1], len(text))
            spans.append((a, b, e.content))
        if any(_conflict(a, b, a2, b2) for a, b, _ in spans for a2, b2, _ in chosen):
            continue
        chosen.extend(spans)
        applied.append(diag)
    out = text
    for a, b, content in sorted(chosen, key=lambda t: (t[0], t[1]), reverse=True):
        out = out[:a] + content + out[b:]
    return out, applied


def plan_fixes(path: Path, settings: Settings, codes: set[str], unsafe: bool, text: str | None = None,
              only: Callable[[Diagnostic], bool] | None = None) -> FixOutcome:
    """The file's fixes, applied, checked and re-linted (nothing is written). `text` stands for the file's
    contents when they are not on disk (an editor's buffer); `only` picks the fixes to apply by the diagnostic
    as it is reported (a notebook's in its cell's rows), e.g. the one an editor's code action is for."""
    if path.suffix in (".yaml", ".yml"):  # an axolotl / LLaMA-Factory config: YAML edits (frameworks/), from disk
        return plan_config_fixes(path, settings, codes, unsafe)
    outcome = FixOutcome(path)
    source = read_source(path) if text is None else Source(text, "utf-8", text.encode("utf-8", "surrogatepass"))
    if not isinstance(source, Source):
        return outcome
    outcome.source = source
    nb = None
    if path.suffix == ".ipynb":
        try:
            nb = read_notebook(source.text)
        except NotebookError as exc:
            outcome.error = str(exc)
            return outcome
        bad = bad_cells(nb)  # linted without its cells that are not Python, as lint_notebook does
        if bad:
            nb = without_cells(nb, set(bad))
    text = nb.source if nb is not None else source.text
    first = lint_text(path, text, settings, codes, None if nb is not None else source.raw).diagnostics
    here = _display(path)
    wanted = [d for d in first if d.fix and (d.fix.safe or unsafe) and edits_file(d) == here
              and (only is None or only(to_cell(d, nb) if nb is not None else d))]
    outcome.remaining = outcome.found = first
    while wanted:
        new_text, applied = apply_edits(text, wanted)
        try:
            cst.parse_module(new_text)
        except Exception as exc:  # noqa: BLE001 - a fix that breaks the file is dropped, never written
            outcome.error = f"fixes produced invalid Python ({type(exc).__name__}); file left unchanged"
            return outcome
        after = lint_text(path, new_text, settings, codes).diagnostics
        before_counts = Counter(d.code for d in first)
        after_counts = Counter(d.code for d in after)
        fixed_counts = Counter(d.code for d in applied)
        failing = {c for c in fixed_counts if before_counts[c] - after_counts[c] < fixed_counts[c]}
        if not failing:
            outcome.applied, outcome.remaining = applied, after
            if nb is None:
                outcome.new_text = new_text
                return outcome
            try:
                outcome.new_text = write_back(nb, new_text)  # only the edited cells change
            except NotebookError as exc:
                outcome.error = f"{exc}; file left unchanged"
                return outcome
            outcome.applied = [to_cell(d, nb) for d in applied]
            outcome.remaining = [to_cell(d, nb) for d in after]
            return outcome
        wanted = [d for d in wanted if d.code not in failing]
    return outcome


def plan_config_fixes(path: Path, settings: Settings, codes: set[str], unsafe: bool):
    """plan_fixes for a framework config (framework_lint.py lints it): apply the YAML edits, require that the
    result still loads as the same framework's config with no new reading problem, and that re-linted it no longer
    reports what was fixed."""
    from collections import Counter

    from trainlint.framework_lint import lint_config
    from trainlint.launch.framework_config import framework_of
    from trainlint.launch.configs import read_config

    outcome = FixOutcome(path)
    source = read_source(path)
    if not isinstance(source, Source):
        return outcome
    outcome.source = source
    first = lint_config(path, settings, codes, source.text)
    if first is None:
        return outcome
    here = _display(path)
    outcome.found = outcome.remaining = first.diagnostics
    wanted = [d for d in first.diagnostics if d.fix and (d.fix.safe or unsafe)
              and (d.fix.file or d.filename) == here]
    before = read_config(path, source.text)
    while wanted:
        new_text, applied = apply_edits(source.text, wanted)
        after_reading = read_config(path, new_text)
        if framework_of(after_reading) != framework_of(before) or len(after_reading.problems) > len(before.problems):
            outcome.error = "fixes would make the config unreadable; file left unchanged"
            return outcome
        after = lint_config(path, settings, codes, new_text)
        fixed = Counter(d.code for d in applied)
        was, now = Counter(d.code for d in first.diagnostics), Counter(d.code for d in after.diagnostics)
        failing = {c for c in fixed if was[c] - now[c] < fixed[c]}
        if not failing:
            outcome.applied, outcome.remaining, outcome.new_text = applied, after.diagnostics, new_text
            return outcome
        wanted = [d for d in wanted if d.code not in failing]
    return outcome


def edits_file(d: Diagnostic) -> str:
    """The file a diagnostic's fix edits: its own, or the one the fix names (a launch-decided finding)."""
    return (d.fix.file or d.filename) if d.fix else d.filename


@dataclass
class LaunchFixOutcome:
    file: str
    new_text: str | None = None
    applied: list[Diagnostic] = field(default_factory=list)
    error: str | None = None


def plan_launch_fixes(file: str, diagnostics: list[Diagnostic], scripts: list[Path], settings: Settings,
                      codes: set[str], write: bool = True) -> LaunchFixOutcome:
    """Fixes that rewrite a value in a launcher, a recipe or an args file. The edited file must still read as
    well as before (no new problem), and the scripts it launches, re-linted with the edit in place, must no
    longer report what was fixed; else nothing is written (the file is restored byte for byte)."""
    from trainlint.launch.configs import read_config
    from trainlint.launch.discover import clear_caches, read_launch_text
    from trainlint.lint import lint_file

    outcome = LaunchFixOutcome(file)
    path = Path(file)
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        outcome.error = f"cannot read it ({exc}); not fixed"
        return outcome
    new_text, applied = apply_edits(text, diagnostics)
    if not applied or new_text == text:
        return outcome

    def problems(t: str) -> int:
        if path.suffix == ".py":  # a default written in one of the repository's modules
            import libcst as cst

            try:
                cst.parse_module(t)
            except Exception:  # noqa: BLE001 - the edit would break the module
                return 1
            return 0
        if path.suffix in (".json", ".yaml", ".yml"):
            r = read_config(path, t)
            return len(r.problems or ((r.problem,) if r.problem else ()))
        return len(read_launch_text(t, path).problems)

    if problems(new_text) > problems(text):
        outcome.error = "the fix would make it unreadable; left unchanged"
        return outcome
    if not write:  # --diff: show it, write nothing
        outcome.new_text, outcome.applied = new_text, applied
        return outcome
    mode = path.stat().st_mode
    write_bytes_atomic(path, new_text.encode("utf-8"), keep_mode_of=path)
    clear_caches()
    fixed = {(d.code, d.span) for d in applied}
    still = [d for script in scripts for d in lint_file(script, settings, codes).diagnostics
             if d.filename == file and (d.code, d.span) in fixed]
    if still:
        write_bytes_atomic(path, raw, keep_mode_of=path)
        path.chmod(mode)
        clear_caches()
        outcome.error = "re-linted with the fix, the finding remains; left unchanged"
        return outcome
    outcome.new_text, outcome.applied = new_text, applied
    return outcome


def write_atomic(path: Path, text: str, source: Source) -> None:
    """Keep the encoding, the BOM, the newline style (already in `text`) and the file mode."""
    data = text.encode(source.encoding)
    if source.raw.startswith(b"\xef\xbb\xbf") and not data.startswith(b"\xef\xbb\xbf"):
        data = b"\xef\xbb\xbf" + data
    write_bytes_atomic(path, data, keep_mode_of=path)


def unified_diff(path: str, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{path}", tofile=f"b/{path}"))
