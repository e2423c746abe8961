"""All rules, by code, discovered from this package (like Fixit's collect_rules): every module named
tlNNN_<name>.py is imported, and its `@rule(...)` declaration registers it. A rule is documented in rules/TLNNN.md."""

from __future__ import annotations

import importlib
import pkgutil
import re

from trainlint.codes import META_RULES, RULE_CODES  # noqa: F401  (the light table)
from trainlint.rules.base import REGISTRY, Rule

_RULE_MODULE = re.compile(r"tl\d{3}_\w+")  # the same pattern codes.RULE_CODES reads the codes from

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _RULE_MODULE.fullmatch(_module):
        importlib.import_module(f"{__name__}.{_module}")

__all__ = ["REGISTRY", "Rule", "META_RULES"]
