"""The fixed run's launch: fixes whose value is written in the launcher, the recipe or the args file (TL401's
`--gradient_accumulation_steps`, TL101's `attn_implementation: eager` in a recipe) applied to temporary copies.

The user's files are never written: each fixed text goes to a copy in verify's work directory, the fixed run's
arguments are read from the fixed launcher text (``launch_command(..., text=)``) and name the copies of the fixed
configs, and the re-lint that proves each fix removes its finding reads the fixed texts in place of the files
(``Settings.launch_texts``), so the spans and the launch are the same as the user's. A fix that edits a Python
module the script imports (a dataclass default) is not applied here: the run would import the original."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from trainlint.config import Settings
from trainlint.diagnostics import Diagnostic
from trainlint.discovery import display
from trainlint.verify.target import CONFIG_SUFFIXES, Target


@dataclass
class LaunchFixes:
    args: tuple[str, ...]  # the fixed run's arguments
    texts: dict[str, str] = field(default_factory=dict)  # absolute path -> fixed text
    copies: dict[str, Path] = field(default_factory=dict)  # absolute path of a fixed config -> its copy
    applied: list[Diagnostic] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # launch fixes not applied, and why

    def settings(self, settings: Settings) -> Settings:
        """The settings the fixed run is linted (and predicted) under."""
        if not self.texts:
            return settings
        return replace(settings, launch_texts=tuple(sorted(self.texts.items())))


def launch_fixes(target: Target, script_text: str, found: list[Diagnostic], codes: set[str],
                 workdir: Path) -> LaunchFixes:
    """Apply the launch-value fixes among `found` to copies under `workdir`; `script_text` is the fixed script."""
    from trainlint.fix import edits_file, plan_launch_fixes

    out = LaunchFixes(target.args)
    here = display(target.script)
    by_file: dict[str, list[Diagnostic]] = {}
    for d in found:
        if d.fix and edits_file(d) != here:
            by_file.setdefault(edits_file(d), []).append(d)
    runnable = {str(target.launcher)} if target.launcher else set()
    for file, diags in sorted(by_file.items()):
        path = Path(file).resolve()
        if str(path) not in runnable and path.suffix not in CONFIG_SUFFIXES:
            out.notes.append(f"{file}: the fix edits a file the fixed run cannot use a copy of; not applied")
            continue
        outcome = plan_launch_fixes(file, diags, [target.script], target.settings, codes, write=False)
        if outcome.error or outcome.new_text is None:
            out.notes.append(f"{file}: {outcome.error or 'nothing to change'}")
            continue
        out.texts[str(path)] = outcome.new_text
        out.applied.extend(outcome.applied)
    _keep_effective(out, target, script_text, codes)
    if not out.texts:
        return out
    configs = {p for p in out.texts if p != str(target.launcher)}
    for i, p in enumerate(sorted(configs)):
        copy = workdir / "launch" / str(i) / Path(p).name  # the name kept: parsers choose by suffix
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(out.texts[p], encoding="utf-8")
        out.copies[p] = copy
    args = target.args
    if target.launcher is not None and str(target.launcher) in out.texts:
        from trainlint.verify.target import launch_command

        _, launch_args, _, _ = launch_command(target.launcher, target.settings, out.texts[str(target.launcher)],
                                              target.configs)
        args = tuple(launch_args) + target.extra
    out.args = tuple(_to_copy(a, target.bases, out.copies) for a in args)
    return out


def _keep_effective(out: LaunchFixes, target: Target, script_text: str, codes: set[str]) -> None:
    """Re-lint the fixed script under the fixed launch texts; a file whose fixes leave their finding is dropped."""
    from trainlint.fix import edits_file
    from trainlint.lint import lint_text

    def file_of(d: Diagnostic) -> str:
        return str(Path(edits_file(d)).resolve())

    while out.texts:
        after = lint_text(target.script, script_text, out.settings(target.settings), codes).diagnostics
        left = {(d.code, d.filename, d.span.line) for d in after}
        failing = {file_of(d) for d in out.applied if (d.code, d.filename, d.span.line) in left}
        if not failing:
            return
        for p in sorted(failing):
            out.texts.pop(p, None)
            out.notes.append(f"{display(Path(p))}: re-linted with the fix, the finding remains; not applied")
        out.applied = [d for d in out.applied if file_of(d) not in failing]


def _to_copy(arg: str, bases: tuple[Path, ...], copies: dict[str, Path]) -> str:
    """An argument that names a fixed config (`recipe.yaml`, `--config=recipe.yaml`) names its copy instead."""
    if not copies:
        return arg
    prefix, value = ("", arg)
    if arg.startswith("-") and "=" in arg:
        prefix, value = arg.split("=", 1)
        prefix += "="
    if not value.endswith(CONFIG_SUFFIXES):
        return arg
    rel = Path(value)
    for base in ([Path("/")] if rel.is_absolute() else bases):
        candidate = base / rel
        if candidate.is_file():
            copy = copies.get(str(candidate.resolve()))
            return prefix + str(copy) if copy is not None else arg
    return arg
