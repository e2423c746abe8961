"""Linting an axolotl / LLaMA-Factory config: read it safely with spans, map it to facts, run the same rules,
say the findings in the config's keys, and fix the YAML text in place.

A `.yml` / `.yaml` that is neither framework's config returns None here and is skipped as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from trainlint.config import Settings
from trainlint.context import FileContext
from trainlint.diagnostics import Diagnostic
from trainlint.discovery import display as _display
from trainlint.frameworks.synth import Keys, Mapped
from trainlint.knowledge import frameworks as K
from trainlint.knowledge.versions import PIN_FILES, Versions, decide_versions, parse_version
from trainlint.launch.configs import read_config
from trainlint.launch.framework_config import framework_of
from trainlint.launch.model import ConfigReading, Launch
from trainlint.results import FileResult, finish
from trainlint.sniff import looks_like, looks_like_config

_FRAMEWORK_PIN = re.compile(r"""(?im)^\s*['"]?(axolotl|llamafactory)(?:\[[^\]]*\])?\s*==\s*([\w.]+)""")


def framework_release(path: Path, framework: str) -> tuple[str, str]:
    """(release whose semantics apply, why): a `==` pin in the project's requirement files nearest the config,
    else the installed distribution, else the newest release read."""
    own = own_release(path, framework)
    if own is not None:
        release = K.read_release(framework, own)
        return release, f"the repository is {framework} {own} itself" + (
            "" if release == own else f"; semantics of {release}, the nearest release read")
    directory = path.resolve().parent
    while True:
        for pattern in PIN_FILES:
            for candidate in sorted(directory.glob(pattern)):
                try:
                    text = candidate.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
                for name, version in _FRAMEWORK_PIN.findall(text):
                    if name.lower() == framework:
                        release = K.read_release(framework, version)
                        return release, f"pinned {framework}=={version} in {_display(candidate)}" + (
                            "" if release == version else f"; semantics of {release}, the nearest release read")
        if (directory / ".git").exists() or directory.parent == directory:
            break
        directory = directory.parent
    # what is installed next to trainlint is not the run's environment (knowledge/versions.py decide_versions)
    return K.NEWEST[framework], "not pinned: the newest release read"


_SETUP_NAME = re.compile(r"""\bname\s*=\s*['"](axolotl|llamafactory)['"]""")
_SETUP_VERSION = re.compile(r"""\bversion\s*=\s*['"]([0-9][\w.]*)['"]""")
_LF_VERSION = re.compile(r"""^VERSION\s*=\s*['"]([0-9][\w.]*)['"]""", re.M)


_DUNDER_VERSION = re.compile(r"""^__version__\s*=\s*['"]([0-9][\w.]*)['"]""", re.M)


def _package_version(directory: Path, framework: str):
    """`__version__ = "0.12.0"` in the package's __init__.py (src layout or flat), as a match, or None."""
    for init in (directory / "src" / framework / "__init__.py", directory / framework / "__init__.py"):
        try:
            m = _DUNDER_VERSION.search(init.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        if m is not None:
            return m
    return None


def own_release(path: Path, framework: str) -> str | None:
    """The framework's version when the config lives in a checkout of the framework itself (its examples): axolotl's
    setup.py `version="0.4.0"`, its VERSION file or its package's `__version__` (0.12's setup.py reads that);
    LLaMA-Factory's src/llamafactory/extras/env.py `VERSION = "0.9.4"`. None elsewhere."""
    directory = path.resolve().parent
    while True:
        for name in ("setup.py", "pyproject.toml"):
            try:
                text = (directory / name).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            found = _SETUP_NAME.search(text)
            if found is None or found.group(1) != framework:
                continue
            if framework == K.LLAMAFACTORY:
                try:
                    env = (directory / "src" / "llamafactory" / "extras" / "env.py").read_text(encoding="utf-8")
                except OSError:
                    return None
                m = _LF_VERSION.search(env)
            else:
                m = _SETUP_VERSION.search(text)
                if m is None:  # a dynamic version read from a VERSION file (axolotl >= 0.13's pyproject.toml)
                    try:
                        m = re.fullmatch(r"\s*([0-9][\w.]*)\s*", (directory / "VERSION").read_text(encoding="utf-8"))
                    except OSError:
                        m = None
                if m is None:  # axolotl <= 0.12's setup.py get_package_version(): src/axolotl/__init__.py __version__
                    m = _package_version(directory, framework)
            return m.group(1) if m else None
        if (directory / ".git").exists() or directory.parent == directory:
            return None
        directory = directory.parent


def framework_versions(path: Path, framework: str, release: str, settings: Settings) -> Versions:
    """The libraries the framework runs on: the project's own pins and `versions` settings first, else the pins
    of the framework release (its wheel's requirements)."""
    pins = tuple(K.LIBRARY_PINS[framework][release].items())
    versions = decide_versions(path, pins, settings.version_overrides())
    fixed = {}
    for lib in versions.all():
        if lib.source.startswith("`pip install"):
            spec = K.LIBRARY_PINS[framework][release][lib.name]
            lib = replace(lib, source=f"{framework} {release} requires {lib.name}{spec}")
        fixed[lib.name] = lib
    return Versions(**fixed)


def _hf_fields(versions: Versions) -> set[str] | None:
    from trainlint.knowledge.arguments import library_fields

    fields = library_fields("Seq2SeqTrainingArguments", versions)
    return set(fields) if fields else None


def map_config(path: Path, reading: ConfigReading, framework: str, settings: Settings,
               release: tuple[str, str] | None = None) -> tuple[Mapped, Versions]:
    release_, note = release or framework_release(path, framework)
    versions = framework_versions(path, framework, release_, settings)
    keys = Keys(reading)
    display = _display(path)
    if framework == K.AXOLOTL:
        from trainlint.frameworks.axolotl import map_axolotl

        return map_axolotl(keys, path, display, release_, note), versions
    from trainlint.frameworks.llamafactory import map_llamafactory

    return map_llamafactory(keys, path, display, release_, note, _hf_fields(versions)), versions


@dataclass
class FrameworkContext(FileContext):
    """A FileContext over a framework config; its git base is the config's base version, read the same way."""

    mapped: Mapped | None = None

    @cached_property
    def base(self):
        from trainlint.history import base_version

        old = base_version(self.path, self.settings.diff_base)
        if old.text is None:
            return None, old.note
        if old.text == self.text:
            return self.facts, f"{old.note}: unchanged"
        reading = read_config(self.path, old.text)
        framework = framework_of(reading)
        if framework != self.mapped.framework:
            return None, f"{old.note}: not a {self.mapped.framework} config there"
        mapped, _ = map_config(self.path, reading, framework, self.settings, (self.mapped.release, ""))
        return mapped.facts, old.note

    def verbose_lines(self) -> list[str]:
        m = self.mapped
        return [f"{m.framework} {m.release} config ({m.version_note})", *super().verbose_lines()]


def _meta(code: str, display: str, message: str, line: int, col: int) -> Diagnostic:
    from trainlint.diagnostics import Span
    from trainlint.rules import META_RULES

    return Diagnostic(code, META_RULES[code].name, message, display, Span.point(line, col))


def lint_config(path: Path, settings: Settings, codes: set[str], text: str | None = None):
    """The FileResult for a framework config, or None when the file is not one (it is then skipped as before)."""
    if text is None:
        if not looks_like_config(path):
            return None
        from trainlint.source import Unreadable, read_source

        source = read_source(path)
        if isinstance(source, Unreadable):
            return None  # read_config says why below only for a file that reads as text
        text = source.text
    display = _display(path)
    reading = read_config(path, text)
    framework = framework_of(reading)
    result = FileResult(path, display)
    if framework is None:
        if reading.entries or not looks_like(text.encode("utf-8", "surrogatepass")):
            return None
        for problem in reading.problems[:1]:  # it looks like one and does not load
            result.diagnostics.append(_meta("TL005", display, f"cannot read this config: {problem.message}",
                                            problem.span.line, problem.span.col))
        result.skipped = "a framework config that does not load"
        return finish(result, settings, codes, text)
    for problem in reading.problems:
        result.diagnostics.append(_meta("TL005", display, f"cannot read this config fully: {problem.message}",
                                        problem.span.line, problem.span.col))
    _check(path, display, text, reading, framework, settings, codes, result)
    return finish(result, settings, codes, text)


def _check(path: Path, display: str, text: str, reading: ConfigReading, framework: str, settings: Settings,
           codes: set[str], result: FileResult, fixes: bool = True) -> None:
    """The rules over the run a framework config makes; findings at its keys (fixes only where the keys are a
    YAML file's: `fixes`)."""
    from trainlint.rules import REGISTRY

    mapped, versions = map_config(path, reading, framework, settings)
    own = own_release(path, framework)
    unread = own is not None and own not in K.LIBRARY_PINS[framework]
    if unread:  # which keys that release took was not read: say nothing about keys rather than judge by another's
        read = ", ".join(sorted(K.LIBRARY_PINS[framework], key=parse_version))
        result.notes.append(f"{display}: {framework} {own}'s config keys were not read (releases read: {read}): "
                            f"TL007 not checked")
    for p in mapped.problems:
        if unread and p.code == "TL007":
            continue
        result.diagnostics.append(_meta(p.code, display, p.message, p.span.line, p.span.col))
    from trainlint.frameworks.fixes import adapt, spelling_for

    ctx = FrameworkContext(path, display, mapped.facts, versions, settings, text, Launch.defaults(), mapped.facts,
                           mapped=mapped)
    spec = ctx.spec(mapped.facts.models[0])
    model_type = spec.model_type if spec is not None else None
    # the rules word their findings as this config (or `llamafactory-cli train`'s flags) says a setting
    ctx.spelling = spelling_for(mapped, model_type, "yaml" if fixes else "flag")
    result.contexts.append(ctx)
    result.context = result.context or ctx
    for code in sorted(codes & REGISTRY.keys()):
        for diag in REGISTRY[code].run(ctx):
            result.diagnostics.append(adapt(diag, mapped, text, settings.fix_attention, model_type) if fixes
                                      else diag.with_fix(None))


def lint_cli_launches(path: Path, invocations, settings: Settings, codes: set[str], result: FileResult) -> None:
    """`llamafactory-cli train --model_name_or_path X --stage sft ...` in a launcher: LLaMA-Factory hands those
    flags to HfArgumentParser when the first word is not a config file (llamafactory/hparams/parser.py read_args,
    0.9.x), so they are a config written in the launcher: the same rules, at the flags. (A config file with
    `key=value` overrides is checked as that file.)"""
    text = path.read_text(encoding="utf-8", errors="replace")
    for inv in invocations:
        if not inv.launcher.endswith("llamafactory-cli train") or not inv.args or \
                (inv.args[0].text or "").endswith((".yaml", ".yml", ".json")) or inv.args[0].text is None:
            continue
        reading = flag_reading(path, inv.args)
        if reading.entries:
            _check(path, result.display, text, reading, K.LLAMAFACTORY, settings, codes, result, fixes=False)


def flag_reading(path: Path, words) -> ConfigReading:
    """`--key value` / `--flag` words as a config's entries (HfArgumentParser: a bare flag is True; a value is
    typed as YAML would type it). A word whose value is not known statically (`$1`) leaves its key out."""
    from trainlint.launch.model import Entry

    entries = []
    i = 0
    while i < len(words):
        word = words[i]
        key = word.text or ""
        if not key.startswith("--") or len(key) == 2:
            i += 1
            continue
        name, eq, inline = key[2:].partition("=")
        name = name.replace("-", "_")
        if eq:
            entries.append(Entry(name, _typed(inline), word.span, word.span))
            i += 1
            continue
        nxt = words[i + 1] if i + 1 < len(words) else None
        if nxt is None or (nxt.text or "").startswith("--"):
            entries.append(Entry(name, True, word.span, word.span))
            i += 1
            continue
        if nxt.text is not None:
            entries.append(Entry(name, _typed(nxt.text), nxt.span, word.span))
        i += 2
    return ConfigReading(path, tuple(entries))


def _typed(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
