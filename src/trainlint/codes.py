"""The rule codes, without importing the rules: what a fully cached run (or `--select` checking) needs.

RULE_CODES must list exactly the codes the rule modules register (tests/test_rule_codes.py checks it; it lives outside the rules package so that importing it imports no rule)."""

from __future__ import annotations

RULE_CODES = ("TL101", "TL102", "TL201", "TL202", "TL203", "TL301", "TL302", "TL401", "TL501", "TL701")

# TL0xx describe trainlint itself (files it could not read); they are produced by the engine.
META_RULES = {
    "TL001": ("syntax-error", "the file could not be parsed as Python"),
    "TL002": ("unreadable-file", "binary, undecodable, unreadable or oversized file, or an unreadable notebook"),
    "TL003": ("file-timeout", "the file took longer than `per-file-timeout` to lint"),
    "TL004": ("internal-error", "trainlint itself failed on this file; the other files were still linted"),
    "TL005": ("unreadable-launch", "a launcher, args file or config that could not be read (shell that does not "
                                   "lex, YAML/JSON that does not load, a circular `source`)"),
    "TL006": ("launched-script-missing", "a launcher runs a Python script that does not exist"),
    "TL007": ("framework-config-key", "an axolotl / LLaMA-Factory config key the framework refuses, ignores, or that "
                                      "has no effect (unknown, removed, or a plugin's key without the plugin)"),
    "TL008": ("model-path-missing", "a framework config's model is a local path that does not exist"),
    "TL009": ("version-conflict", "a pinned or installed library version that the file's own calls cannot run on "
                                  "(a keyword or import that release does not have)"),
}


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
