"""Rule declarations that need no rule import: the RuleInfo record every rule declares, the TL0xx codes (trainlint
itself, declared here once), and RULE_CODES, the memory rules' codes read from the rules package's module names.

A fully cached run (or `--select` checking) needs the codes without importing a rule or LibCST, so RULE_CODES is
found the way pkgutil finds the rule modules (rules/tlNNN_<name>.py -> "TLNNN"), without importing them;
tests/test_rule_codes.py checks it is exactly what the modules register."""

from __future__ import annotations

import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path

# What `--fix` can do for a rule's findings: nothing, always a safe edit, always an unsafe one (needs
# `--unsafe-fixes`), or safe in some cases and unsafe in others (the page's "Fix safety" says which).
FIX_KINDS = ("none", "safe", "unsafe", "safe or unsafe")
# What `trainlint verify` checks of a rule's fixed run against the run as written (verify/run.py and
# verify/simulate.py dispatch on it, never on a code); None: nothing (a rule without a fix).
# Each kind's sentence is the rule page's "Verified" line (scripts/gen_rule_docs.py).
VERIFY_KINDS = {
    # the predicted saving: memory.estimate.saving_of, where the estimate prices the fix
    "memory": "the fixed run's peak is lower, by about the saving the estimate predicts where it prices the fix",
    "adapter-grads": "every LoRA B weight gets a gradient in the fixed run",
    # the effective batch: the finding's Diagnostic.data["effective_batch"]
    "samples-per-step": "the fixed run takes as many samples per optimizer step as the finding keeps",
}
# What a code is about: a memory rule's finding; trainlint's reading of a launch input (a launcher, a config, a pin);
# or a file trainlint could not check at all (nothing else was checked in it: verify has nothing to run).
CATEGORIES = ("rule", "input", "unchecked")


@dataclass(frozen=True)
class RuleInfo:
    """What a rule declares once, in its own module; `rule --all`, SARIF's rule metadata, the README table and the
    pages' headers (scripts/gen_rule_docs.py) are made from it."""

    code: str
    name: str
    consumer: str  # the memory consumer (or concern) the rule is about
    summary: str  # one sentence: what it flags
    fix_hint: str  # one line: what to do (Markdown)
    fix: str = "none"  # one of FIX_KINDS
    # what the fix's code needs to run at all, beyond the script's own (e.g. "CUDA": a Triton kernel); None when
    # the fixed script runs wherever the original does. verify reads it: a fix whose kernel cannot run on the
    # device it measures on is "not measurable here" (and never simulated).
    fix_runs_on: str | None = None
    verifies: str | None = None  # one of VERIFY_KINDS, or None
    category: str = "rule"  # one of CATEGORIES

    def __post_init__(self) -> None:
        if self.fix not in FIX_KINDS:
            raise ValueError(f"{self.code}: fix must be one of {FIX_KINDS}, not {self.fix!r}")
        if self.verifies is not None and self.verifies not in VERIFY_KINDS:
            raise ValueError(f"{self.code}: verifies must be one of {tuple(VERIFY_KINDS)} or None, not "
                             f"{self.verifies!r}")
        if self.category not in CATEGORIES:
            raise ValueError(f"{self.code}: category must be one of {CATEGORIES}, not {self.category!r}")

    @property
    def family(self) -> str:
        return self.code[:3] + "xx"


_ITSELF = "trainlint itself"
# TL0xx describe trainlint itself (files it could not read or check: category "unchecked"; launch inputs it could not
# read or that contradict themselves: "input"); the engine produces them (lint.py, framework_lint.py), no rule module
# does.
META_RULES: dict[str, RuleInfo] = {r.code: r for r in (
    RuleInfo("TL001", "syntax-error", _ITSELF, "the file could not be parsed as Python",
             "fix the syntax error the message points at; nothing else was checked in the file", category="unchecked"),
    RuleInfo("TL002", "unreadable-file", _ITSELF,
             "binary, undecodable, unreadable or oversized file, or an unreadable notebook",
             "save the file as UTF-8 (or declare its encoding, PEP 263), or exclude it", category="unchecked"),
    RuleInfo("TL003", "file-timeout", _ITSELF, "the file took longer than `per-file-timeout` to lint",
             "raise `per-file-timeout` (default 10 s), or exclude the file", category="unchecked"),
    RuleInfo("TL004", "internal-error", _ITSELF,
             "trainlint itself failed on this file; the other files were still linted",
             "a bug in trainlint: please report it with the message", category="unchecked"),
    RuleInfo("TL005", "unreadable-launch", _ITSELF,
             "a launcher, args file or config that could not be read (shell that does not lex, YAML/JSON that does "
             "not load, a circular `source`)",
             "fix the file or the path the launcher passes; what could be read still counts", category="input"),
    RuleInfo("TL006", "launched-script-missing", _ITSELF, "a launcher runs a Python script that does not exist",
             "fix the script's path in the launcher (after its `cd`), or add the script", category="input"),
    RuleInfo("TL007", "framework-config-key", _ITSELF,
             "an axolotl / LLaMA-Factory config key the framework refuses, ignores, or that has no effect (unknown, "
             "removed, or a plugin's key without the plugin)",
             "rename or remove the key, or add the plugin it belongs to", category="input"),
    RuleInfo("TL008", "model-path-missing", _ITSELF, "a framework config's model is a local path that does not exist",
             "fix the path, or name the model by its Hub id", category="input"),
    RuleInfo("TL009", "version-conflict", _ITSELF,
             "a pinned or installed library version that the file's own calls cannot run on (a keyword or import "
             "that release does not have), or that the releases pinned for the other libraries rule out",
             "fix the pin or the call; the rules still assume the pin", category="input"),
)}

_RULE_MODULE = re.compile(r"tl(\d{3})_\w+")


def _rule_codes() -> tuple[str, ...]:
    found = (_RULE_MODULE.fullmatch(m.name) for m in pkgutil.iter_modules([str(Path(__file__).parent / "rules")]))
    return tuple(sorted(f"TL{m.group(1)}" for m in found if m))


RULE_CODES = _rule_codes()


def enabled_codes(settings, select=None, ignore=None, extend_select=None) -> set[str]:
    """Ruff's semantics: the most specific matching prefix decides; at equal length, ignore wins."""
    chosen = list(select if select else settings.select) + list(extend_select or ()) + list(settings.extend_select)
    ignored = list(settings.ignore) + list(ignore or ())
    out = set()
    for code in [*RULE_CODES, *META_RULES]:
        best_sel = max((len(p) for p in chosen if code.startswith(p)), default=-1)
        best_ign = max((len(p) for p in ignored if code.startswith(p)), default=-1)
        if best_sel > best_ign:
            out.add(code)
    return out
