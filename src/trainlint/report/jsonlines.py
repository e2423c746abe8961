"""json-lines: one object per line, the same objects (Ruff's JSON field names) as the json format."""

from __future__ import annotations

import json

from trainlint.diagnostics import Diagnostic
from trainlint.report.formats import to_json


def render(diagnostics: list[Diagnostic], files: int, quiet: bool = False) -> str:
    return "\n".join(json.dumps(to_json(d)) for d in diagnostics)
