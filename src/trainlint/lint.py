"""The engine: file -> cheap relevance check -> LibCST facts -> rules -> suppression -> diagnostics."""

from __future__ import annotations

import ast
import re
import signal
import threading
import warnings
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from trainlint.config import Settings
from trainlint.context import FileContext
from trainlint.diagnostics import Diagnostic, Span
from trainlint.discovery import LAUNCHERS, repo_root
from trainlint.discovery import display as _display
from trainlint.facts import extract_facts
from trainlint.resolve import resolve_facts
from trainlint.launch.model import Launch
from trainlint.facts.names import INTERESTING_SHORTS, LIGER_APPLY_RE, MODEL_CLASS_RE, NOT_REPOSITORY_MODULES
from trainlint.knowledge.versions import decide_versions
from trainlint.rules import META_RULES, REGISTRY
from trainlint.codes import enabled_codes  # noqa: F401  (re-exported)
from trainlint.results import FileResult  # noqa: F401  (re-exported: the engine's callers import it here)
from trainlint.results import finish as _finish
from trainlint.source import Source, Unreadable, read_source

# A file that matches none of these cannot produce a finding, so it is never parsed.
_RELEVANT_BYTES = re.compile(
    rb"from_pretrained|from_config|Trainer|TrainingArguments|Config\s*\(|cross_entropy|CrossEntropyLoss|peft"
    rb"|checkpoint|labels\s*=|For[A-Z]\w*\s*\(|DataLoader"
)
_RELEVANT_CALLS = INTERESTING_SHORTS - {"backward", "step", "train", "add_argument", "HfArgumentParser",
                                        "BitsAndBytesConfig", "LoraConfig"} | {
    "parse_args_into_dataclasses", "parse_args_and_config", "parse_json_file", "parse_yaml_file"}  # parsed args
# The text of a call _is_relevant looks for (a name of _RELEVANT_CALLS, a model class, Liger's apply_..., then an
# opening parenthesis; or a `labels=` keyword): a file without one has no such call, so its ast is not walked.
_RELEVANT_CALL_TEXT = re.compile(
    r"(?:\b(?:" + "|".join(sorted(map(re.escape, _RELEVANT_CALLS), key=len, reverse=True)) +
    r")|\b[A-Z][A-Za-z0-9]*For[A-Z][A-Za-z0-9]*|\bapply_liger_kernel_to_\w+)\s*\(|\blabels\s*=")


def _meta(code: str, display: str, message: str, line: int = 1, col: int = 1) -> Diagnostic:
    return Diagnostic(code, META_RULES[code].name, message, display, Span.point(line, col))


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


# The limit is the file's CPU time (ITIMER_PROF: this process's user + system time), so a machine busy with other
# work does not turn a file that lints in 3 s of CPU into a TL003 after 10 s of waiting for a core (on the shared
# 2-core dev machine the dev set's LLaMA-Factory template.py did, one run in two). Waiting that is not computing
# (a stalled read) is bounded by the wall clock at WALL_FACTOR times the limit.
WALL_FACTOR = 4.0


@contextmanager
def _deadline(seconds: float, wall: float | None = None):
    """Interrupt the work after `seconds` of CPU time, or `wall` seconds of wall time (default WALL_FACTOR x
    `seconds`), whichever comes first (SIGPROF / SIGALRM; only where available and on the main thread)."""
    usable = hasattr(signal, "setitimer") and hasattr(signal, "SIGPROF") and \
        threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def on_alarm(signum, frame):
        raise _Timeout()

    previous = signal.signal(signal.SIGPROF, on_alarm), signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, wall if wall is not None else seconds * WALL_FACTOR)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, previous[0])
        signal.signal(signal.SIGALRM, previous[1])


def lint_file(path: Path, settings: Settings, codes: set[str], text: str | None = None) -> FileResult:
    """Lint one file; `text` stands for a script's or a notebook's contents when they are not on disk yet (an
    editor's buffer; a launcher or a config is always read from disk, as the launches of its scripts are)."""
    try:
        with _deadline(settings.per_file_timeout):
            return _lint_file(path, settings, codes, text)
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


def _lint_file(path: Path, settings: Settings, codes: set[str], text: str | None = None) -> FileResult:
    if path.suffix == ".ipynb":
        return lint_notebook(path, settings, codes, text)
    if path.suffix in LAUNCHERS:
        return lint_launcher(path, settings, codes)
    if path.suffix in (".yaml", ".yml"):  # an axolotl / LLaMA-Factory config is linted as a run of its own
        from trainlint.framework_lint import lint_config

        framework_result = lint_config(path, settings, codes)
        if framework_result is not None:
            return framework_result
    if path.suffix in (".yaml", ".yml", ".json", ".md"):  # read only as what a launch passes (launch/)
        return FileResult(path, _display(path), skipped="a config or document: checked through the launches that use it")
    if text is not None:
        return lint_text(path, text, settings, codes)
    source = read_source(path)
    if isinstance(source, Unreadable):
        result = FileResult(path, _display(path))
        result.diagnostics.append(_meta("TL002", result.display, f"cannot lint this file: {source.reason}",
                                        source.line, source.col))
        result.skipped = source.reason
        return _finish(result, settings, codes, None)
    return lint_text(path, source.text, settings, codes, source.raw)


def lint_launcher(path: Path, settings: Settings, codes: set[str]) -> FileResult:
    """A shell launcher: what cannot be read in it (TL005) and the scripts it runs that do not exist (TL006).
    The scripts it launches are checked under it when they are linted. A command a loop runs several times is
    one finding; a script that is not this repository's (launch/missing.py) is a `--verbose` note, once."""
    from trainlint.launch.discover import read_launcher, target_of, tree_files
    from trainlint.launch.missing import script_verdict

    display = _display(path)
    result = FileResult(path, display, skipped="launcher (its scripts are checked under it)")
    indexed = read_launcher(path)
    for problem in indexed.problems:
        result.diagnostics.append(_meta("TL005", display, f"cannot read this launcher fully: {problem.message}",
                                        problem.span.line, problem.span.col))
    root = repo_root(path, settings)
    text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
    skipped: dict[tuple[str, str, str], list[int]] = {}
    for inv in indexed.invocations:
        if inv.script is not None and inv.script.text and inv.script.text.endswith(".py") and \
                target_of(inv, path, root) is None:
            verdict, why = script_verdict(inv, path, root, text or "", tree_files(root))
            if verdict == "skip":
                skipped.setdefault((inv.launcher, inv.script.text, why), []).append(inv.script.span.line)
                continue
            result.diagnostics.append(_meta("TL006", display, f"{inv.launcher} runs {inv.script.text}, which does not "
                                                              f"exist (looked in the launcher's folder"
                                                              f"{' after its cd' if inv.cwd else ''} and {root.name}/)"
                                                              f"{why}",
                                            inv.script.span.line, inv.script.span.col))
        result.diagnostics.extend(_config_problems(inv, path, root))
    if any(inv.launcher.endswith("llamafactory-cli train") for inv in indexed.invocations):
        from trainlint.framework_lint import lint_cli_launches

        lint_cli_launches(path, indexed.invocations, settings, codes, result)
    for (launcher, script, why), lines in skipped.items():
        rows = sorted(set(lines))
        result.notes.append(f"not checked: {launcher} runs {script} (line{'s' if len(rows) > 1 else ''} "
                            f"{', '.join(map(str, rows))}), which is not this repository's ({why})")
    result.diagnostics = _once_per_word(result.diagnostics)
    return _finish(result, settings, codes, text)


def _once_per_word(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """One finding per place: a loop (or a function called several times) runs the same word with other values;
    the first value is said, and how many more there were."""
    groups: dict[tuple, list[Diagnostic]] = {}
    for d in diagnostics:
        groups.setdefault((d.code, d.filename, d.span), []).append(d)
    out = []
    for same in groups.values():
        first = same[0]
        others = len({d.message for d in same}) - 1
        if others:
            first = replace(first, message=f"{first.message} (and {others} more value{'s' if others > 1 else ''} "
                                           f"of this word: it runs in a loop or more than once)")
        out.append(first)
    return out


def _config_problems(inv, launcher: Path, root: Path) -> list[Diagnostic]:
    """TL005 on each config file the invocation names (a recipe, an args file, a DeepSpeed or accelerate
    config) that does not load, reported in that file; a named config that does not exist is said too
    (launch/missing.py decides which words are configs and where they are looked up)."""
    from trainlint.launch.configs import read_config
    from trainlint.launch.discover import display
    from trainlint.launch.missing import config_words, missing_configs

    out = []
    missing = missing_configs(inv, launcher, root)
    for word in missing:
        out.append(_meta("TL005", _display(launcher), f"{inv.launcher} passes {word.text}, which does not exist",
                         word.span.line, word.span.col))
    bases = [launcher.parent / inv.cwd, root / inv.cwd, root] if inv.cwd else [launcher.parent, root]
    for word in config_words(inv):
        if word in missing:
            continue
        path = next((b / word.text for b in bases if (b / word.text).is_file()), None)
        if path is None:
            continue
        reading = read_config(path)
        for problem in getattr(reading, "problems", ()) or ((reading.problem,) if reading.problem else ()):
            out.append(_meta("TL005", display(path), f"cannot read this config fully ({_display(launcher)} passes it): "
                                                     f"{problem.message}", problem.span.line, problem.span.col))
    return out


def lint_notebook(path: Path, settings: Settings, codes: set[str], text: str | None = None) -> FileResult:
    from trainlint.notebook import NotebookError, read_notebook  # (only for notebooks)

    display = _display(path)
    source = read_source(path) if text is None else Source(text, "utf-8", b"")
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
    from trainlint.notebook import bad_cells, language, without_cells

    if language(nb) not in (None, "python", "python3", "ipython", "ipython3"):
        return FileResult(path, display, skipped=f"a {language(nb)} notebook, not Python")

    bad = bad_cells(nb)  # cells that are not Python: each reported once, the rest linted without them
    if bad:
        nb = without_cells(nb, set(bad))
    from trainlint.notebook import installed_in_outputs

    result = lint_text(path, nb.source, settings, codes, observed=installed_in_outputs(nb))
    written = lint_written_scripts(path, nb, settings, codes)  # `%%writefile train.py` cells, as launched
    result.diagnostics = [to_cell(d, nb) for d in result.diagnostics]
    if bad:  # one finding for the notebook, at its first such cell (already in the cell's own rows)
        from trainlint.notebook import bears_on_run, trains

        def listed(cells) -> str:
            return "; ".join(f"cell {cell + 1} ({bad[cell][2]})" for cell in sorted(cells))

        bearing = {cell for cell in bad if bears_on_run(nb, cell)}
        idle = set(bad) - bearing
        message = f"not Python, so skipped (the other cells were linted): {listed(bearing or bad)}"
        if not (trains(nb) or any(not d.code.startswith("TL0") for d in result.diagnostics)):
            result.notes.append(f"{message} (not reported: the notebook does not train, and nothing else was found)")
        elif not bearing:
            result.notes.append(f"{message} (not reported: none of them names a model, trainer, argument or "
                                f"step of the run)")
        else:
            if idle:
                result.notes.append(f"also skipped, naming nothing of the run: {listed(idle)}")
            first = min(bearing)
            row, col, _ = bad[first]
            result.diagnostics.append(replace(_meta("TL001", display, message, row, col), cell=first + 1))
    for diag in written:
        if diag not in result.diagnostics:
            result.diagnostics.append(diag)
    result.diagnostics.sort(key=lambda d: d.sort_key)
    return result


def lint_written_scripts(path: Path, nb, settings: Settings, codes: set[str]) -> list[Diagnostic]:
    """Each `%%writefile x.py` cell linted as x.py under the notebook's launches of it; diagnostics in cell
    coordinates. Fixes inside a written cell are not offered (they would have to rewrite the cell)."""
    from trainlint.launch.discover import launch_of
    from trainlint.launch.notebook import invocations, written_scripts

    scripts = written_scripts(nb)
    if not scripts:
        return []
    invs = invocations(nb, path)
    root = repo_root(path, settings)
    out: list[Diagnostic] = []
    nb_display = _display(path.resolve()) if path.is_absolute() else path.as_posix()
    for ws in scripts:
        virtual = path.parent / ws.name
        mine = [inv for inv in invs if inv.script is not None and inv.script.text is not None and
                (path.parent / (inv.cwd or "") / inv.script.text).resolve() == virtual.resolve()]
        def launches(facts, versions, mine=mine):
            return [launch_of(inv, path, root, facts, versions) for inv in mine]

        result = lint_text(virtual, ws.text, settings, codes, launches=launches)
        for diag in result.diagnostics:
            if diag.filename == result.display:  # in the written script: shift into the notebook's rows
                span = Span(diag.span.line + ws.offset, diag.span.col, diag.span.end_line + ws.offset,
                            diag.span.end_col)
                diag = replace(diag, filename=nb_display, span=span, fix=None,
                               message=f"{ws.name} (written by %%writefile): {diag.message}")
            out.append(to_cell(replace(diag, filename=nb_display, related=()), nb))
    return out


def to_cell(diag: Diagnostic, nb) -> Diagnostic:
    """Combined-source coordinates -> the cell and the row inside it (Ruff's notebook convention)."""
    if diag.cell is not None:  # already in cells (a value of another notebook's launch: results.finish)
        return diag
    cell, row = nb.locate(diag.span.line)
    _, end_row = nb.locate(diag.span.end_line)
    fix = diag.fix
    if fix is not None:
        fix = replace(fix, edits=tuple(replace(e, start=(nb.locate(e.start[0])[1], e.start[1]),
                                               end=(nb.locate(e.end[0])[1], e.end[1])) for e in fix.edits))
    return replace(diag, span=Span(row, diag.span.col, end_row, diag.span.end_col), cell=cell, fix=fix)


def lint_text(path: Path, text: str, settings: Settings, codes: set[str], raw: bytes | None = None,
              launches=None, observed: tuple[tuple[str, str, str], ...] = ()) -> FileResult:
    """Lint `text` as the contents of `path` (the fixer re-lints its result this way), under the launches
    `launches(facts, versions)` returns (None: the launches found for it in its repository). `observed`: library
    versions the file shows were installed (notebook outputs, notebook.installed_in_outputs)."""
    display = _display(path)
    result = FileResult(path, display)
    if not _RELEVANT_BYTES.search(raw if raw is not None else text.encode("utf-8", "surrogatepass")) and \
            not _reaches_relevant(text, path, settings):
        result.skipped = "mentions none of the APIs trainlint checks"
        return result
    tree: ast.Module | None = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences in user code are not our business
            tree = ast.parse(text, filename=display)
    except SyntaxError as exc:
        # Newer syntax than this interpreter's `ast` reads (PEP 701 f-strings on 3.11) may still be valid:
        # LibCST's parser reads Python 3.12/3.13; only when it fails too is this a syntax error.
        if "nested" in str(exc.msg) or not _newer_syntax(text):  # (a nesting limit is not newer syntax)
            result.diagnostics.append(_meta("TL001", display, f"syntax error: {exc.msg}", exc.lineno or 1,
                                            exc.offset or 1))
            result.skipped = "syntax error"
            return _finish(result, settings, codes, text)
    except (ValueError, RecursionError, MemoryError) as exc:
        result.diagnostics.append(_meta("TL001", display, f"could not be parsed: {type(exc).__name__}: {exc}"))
        result.skipped = "could not be parsed"
        return _finish(result, settings, codes, text)
    if tree is not None and not (_RELEVANT_CALL_TEXT.search(text) and _is_relevant(tree)) and \
            not _reaches_relevant(text, path, settings):
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

        starts = statement_starts(tree) if tree is not None else None
        facts, notes, result.reached = _with_repository_code(
            extract_facts(module, display, text, starts, tree=tree), module, display, text, starts, path, settings,
            tree)
        from trainlint.knowledge.api_versions import bounds

        versions = decide_versions(path, facts.pip_pins, settings.version_overrides(), bounds(facts, text), observed,
                                   _framework_requires(path, facts))
        for conflict in versions.conflicts:
            calls = conflict.uses[:len(conflict.uses) - conflict.requirements]
            required = conflict.uses[len(calls):]
            said = "; ".join(part for part in (
                f"cannot run this file's calls: {'; '.join(calls)}" if calls else "",
                f"does not satisfy the other libraries' releases (no set of releases satisfies every pin): "
                f"{'; '.join(required)}" if required else "") if part)
            result.diagnostics.append(_meta(
                "TL009", display, f"{conflict.library} {conflict.version} ({conflict.source}) {said}; the rules assume "
                                  f"{conflict.version}", conflict.line))
        if launches is not None:
            launches = launches(facts, versions)
        else:
            launches = []
            if facts.declares_parameters:
                from trainlint.launch.discover import launches_for

                launches = launches_for(path, facts, versions, settings)
        if facts.hydra:  # the configs composed decide its values: a change to one must not keep a cached result
            result.diagnostics.extend(_hydra_problems(launches, display))
            result.reached = list(result.reached) + [Path(s).resolve() for launch in launches for s in launch.sources
                                                     if s.endswith((".yaml", ".yml")) and Path(s).is_file()]

        def context(launch: Launch) -> FileContext:
            return FileContext(path, display, resolve_facts(facts, launch, versions), versions, settings, text,
                               launch, facts, notes)

        def findings(launch: Launch, ctx: FileContext | None = None) -> list[Diagnostic]:
            ctx = ctx or context(launch)
            return [diag for code in sorted(codes & REGISTRY.keys()) for diag in REGISTRY[code].run(ctx)]

        found: dict[tuple, tuple[Diagnostic, Launch, list[Launch]]] = {}
        for launch in launches or [Launch.defaults()]:
            ctx = context(launch)
            result.contexts.append(ctx)
            for diag in _name_assumptions(findings(launch, ctx), launch, findings):
                key = (diag.code, diag.filename, diag.span)
                if key not in found:
                    found[key] = (_fix_file(diag, display), launch, [])
                elif found[key][0].assumptions and not diag.assumptions:  # certain under this launch
                    found[key] = (_fix_file(diag, display), launch, found[key][2] + [found[key][1]])
                else:  # the same finding under several launches is reported once
                    found[key][2].append(launch)
        result.diagnostics.extend(_under_launches(display, *entry) for entry in found.values())
        result.context = result.contexts[0]
    except RecursionError:
        result.diagnostics = [_meta("TL001", display, "could not be analysed: expressions nested too deeply")]
    return _finish(result, settings, codes, text)


def _framework_requires(path: Path, facts) -> tuple[tuple[str, str, str], ...]:
    """What the axolotl / LLaMA-Factory release the project pins requires of transformers / trl / peft, for a script
    that imports that framework (it runs in the framework's environment): knowledge/frameworks.py LIBRARY_PINS."""
    out: list[tuple[str, str, str]] = []
    for framework in ("axolotl", "llamafactory"):
        if not facts.imports_module(framework):
            continue
        from trainlint.framework_lint import framework_release
        from trainlint.knowledge.frameworks import LIBRARY_PINS

        release, note = framework_release(path, framework)
        if note.startswith("not pinned"):
            continue
        out.extend((lib, spec, f"{framework} {release} ({note})")
                   for lib, spec in LIBRARY_PINS[framework][release].items())
    return tuple(out)


def _hydra_problems(launches, display: str) -> list[Diagnostic]:
    """TL005 in each Hydra / OmegaConf config the script reads that cannot be composed (launch/hydra.py), once."""
    from trainlint.launch.discover import display as shown

    out, seen = [], set()
    for launch in launches:
        for problem in getattr(launch, "problems", ()):
            key = (str(problem.file), problem.span, problem.message)
            if key in seen:
                continue
            seen.add(key)
            out.append(_meta("TL005", shown(problem.file), f"cannot compose this config fully ({display} reads it): "
                                                          f"{problem.message}", problem.span.line, problem.span.col))
    return out


def _with_repository_code(facts, module, display: str, text: str, starts, path: Path, settings: Settings,
                          tree=None):
    """The file's facts with what the repository's own modules add (facts/modules.py, facts/inline.py); the
    verbose notes of what could not be followed; the module files read (the cache checks them)."""
    notes: list[str] = []
    reached: list[Path] = []
    root = None
    if facts.hops and settings.follow_hops > 0:
        from trainlint.facts.inline import follow_calls
        from trainlint.facts.modules import parse_helpers, with_parse_helpers

        root = repo_root(path, settings)
        helpers = parse_helpers(facts, path, root) if not facts.declares_parameters else {}
        if helpers:  # `args = get_args()` from a repository module: read again with args as parsed
            facts = with_parse_helpers(extract_facts(module, display, text, starts, frozenset(helpers), tree), helpers,
                                       _display)
        from trainlint.facts.inline import run_scopes

        facts, notes, reached = follow_calls(facts, path, root, _display, settings.follow_hops, run_scopes(tree))
    if any(p.parser_class for p in facts.parsed):  # a parser class of the repository's own (H4ArgumentParser)
        from trainlint.facts.modules import confirm_parsers

        facts = confirm_parsers(facts, path, root or repo_root(path, settings), text)
    if facts.parsed:  # argument dataclasses it imports from the repository's own modules
        from trainlint.facts.modules import with_imported_classes

        facts = with_imported_classes(facts, path, root or repo_root(path, settings), _display)
    return facts, notes, reached


_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+([.\w]+)[ \t]+import|import[ \t]+([\w.]+))", re.M)


# what makes a file an entry point: a `__main__` guard, or a call statement at the top level (`main()`)
_ENTRY_POINT = re.compile(r"""__name__\s*==\s*['"]__main__['"]|['"]__main__['"]\s*==\s*__name__"""
                          r"|^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*\(", re.M)


def _reaches_relevant(text: str, path: Path, settings: Settings) -> bool:
    """A thin entry point (`from pkg.finetuning import main; main()`) that calls none of the APIs itself is
    still checked when a module of the repository it imports does (read as bytes, a few modules at most).
    Only an entry point: a library module that imports a relevant one but runs nothing is not a run."""
    if settings.follow_hops <= 0 or path.suffix != ".py" or not _ENTRY_POINT.search(text):
        return False
    from trainlint.facts.modules import find_module

    root = repo_root(path, settings)
    todo, seen = [(path, text, 0)], {path.resolve()}
    while todo and len(seen) < 16:
        here, source, depth = todo.pop()
        for m in _IMPORT_LINE.finditer(source):
            module = m.group(1) or m.group(2)
            if module.split(".")[0] in NOT_REPOSITORY_MODULES:
                continue
            found = find_module(module, here, root)
            if found is None or found.resolve() in seen:
                continue
            seen.add(found.resolve())
            try:
                data = found.read_bytes()[:1_000_000]
            except OSError:
                continue
            if _RELEVANT_BYTES.search(data):
                return True
            if depth < 1:  # a package's __init__.py that re-exports from its modules
                todo.append((found, data.decode("utf-8", "replace"), depth + 1))
    return False


def _name_assumptions(diagnostics: list[Diagnostic], launch: Launch, findings) -> list[Diagnostic]:
    """A finding that is gone once the launch's assumed values are unknown rests on them: it names the ones it
    rests on (each one alone gone makes it go), or all of them when no single one does. `findings(launch)` runs
    the rules under a launch."""
    assumed = launch.assumptions
    if not assumed or not diagnostics:
        return diagnostics

    def keys(without: tuple[str, ...]) -> set[tuple]:
        return {(d.code, d.filename, d.span) for d in findings(launch.without(without))}

    certain = keys(assumed)
    if all((d.code, d.filename, d.span) in certain for d in diagnostics):
        return diagnostics
    alone = {a: keys((a,)) for a in assumed[:_MAX_SINGLE]} if len(assumed) > 1 else {}
    out = []
    for d in diagnostics:
        key = (d.code, d.filename, d.span)
        if key in certain:
            out.append(d)
            continue
        named = tuple(a for a, held in alone.items() if key not in held) or assumed
        out.append(replace(d, message=f"{d.message} (assuming {'; '.join(named)})",
                           assumptions=tuple(dict.fromkeys(d.assumptions + named))))
    return out


_MAX_SINGLE = 6  # past this many assumptions in one launch, a finding resting on them names them all


def _fix_file(diag: Diagnostic, display: str) -> Diagnostic:
    """A finding reported in a launcher whose fix edits the script says so (Fix.file); a fix made for the
    launch file itself already names it."""
    if diag.filename == display or diag.fix is None or diag.fix.file is not None:
        return diag
    return diag.with_fix(replace(diag.fix, file=display))


def _under_launches(display: str, diag: Diagnostic, launch: Launch, others: list[Launch]) -> Diagnostic:
    """One finding at one place under one or several launches: the first launch's figures, each launch named
    (a finding in the script itself says which launch its numbers are for)."""
    names = [o.label for o in others if o.label != launch.label]
    if diag.filename != display or (launch.file is None and not names):
        return diag
    said = [f"launched by {launch.label}"] if launch.file is not None else []
    if names:
        said.append(f"the same under {len(names)} other launch{'es' if len(names) > 1 else ''}: "
                    f"{', '.join(dict.fromkeys(names))}")
    related = diag.related + tuple((o.file, o.span, "also launched here") for o in others if o.file and o.span)
    return replace(diag, message=f"{diag.message} ({'; '.join(said)})", related=related)


def _newer_syntax(text: str) -> bool:
    """`ast` rejected the text; LibCST's parser (which reads newer grammar) accepts it."""
    import libcst as cst

    try:
        cst.parse_module(text)
    except Exception:  # noqa: BLE001 - any failure means: not parsable here either
        return False
    return True
