"""gitlab: a GitLab Code Quality report (`artifacts: reports: codequality:`), the subset of the Code
Climate issue format GitLab reads: description, check_name, fingerprint, severity, location.path and
location.lines.begin/end."""

from __future__ import annotations

import json
import os
from pathlib import Path

from trainlint.diagnostics import Diagnostic
from trainlint.report._common import Sources, cell_of, fingerprints, in_cell, is_meta


def _path(filename: str) -> str:
    """GitLab wants paths relative to the repository root: CI_PROJECT_DIR in a GitLab job. The CLI's
    paths are relative to the cwd, so they are rebased when the job runs trainlint from a subfolder."""
    project = os.environ.get("CI_PROJECT_DIR")
    if not project:
        return filename
    try:
        rel = os.path.relpath(Path(filename).resolve(), Path(project).resolve())
    except ValueError:  # another drive (Windows)
        return filename
    outside = rel == os.pardir or rel.startswith(os.pardir + os.sep)
    return filename if outside else Path(rel).as_posix()


def render(diagnostics: list[Diagnostic], files: int, quiet: bool = False) -> str:
    prints = fingerprints(diagnostics, Sources(), "md5")
    issues = [
        {
            "description": f"{d.code}: {in_cell(d)}{d.message}",
            "check_name": d.code,
            "fingerprint": fp,
            # GitLab's scale: info, minor, major, critical, blocker.
            "severity": "minor" if is_meta(d.code) else "major",
            # A notebook's rows count within a cell: its issues sit on line 1 and say where.
            "location": {"path": _path(d.filename), "lines": {"begin": d.span.line, "end": d.span.end_line}
                         if cell_of(d) is None else {"begin": 1, "end": 1}},
        }
        for d, fp in zip(diagnostics, prints)
    ]
    return json.dumps(issues, indent=2)
