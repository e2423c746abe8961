"""sarif: a SARIF 2.1.0 log (GitHub code scanning's `upload-sarif`, Azure DevOps, IDE viewers).

One run. tool.driver.rules lists every rule trainlint has (the registered rules and the TL0xx meta
rules), each with its page's "What it does" section as help; every result points into that list.

Levels: a rule's finding is an `error` (trainlint exits 1 on it, and it predicts an out-of-memory
crash or a wasted run). TL0xx are `warning`s: they say trainlint could not check a file (it does not
parse, or cannot be read), a gap in coverage rather than a defect found, and code scanning should not
fail a pull request's check on them the way it does on errors.

Locations are relative to the directory trainlint ran in (uriBaseId %SRCROOT%, the repository root in
CI), so no absolute path of the machine that ran it ends up in the log; columns are Unicode code points
(run.columnKind), as trainlint counts them. partialFingerprints carries a hash that survives lines
being added above a finding (see report._common.fingerprints).

A notebook's rows count within a cell, not within the .ipynb file, so its results locate the file
only (no region, no fixes), start their message with the cell, line and column, and carry them as
properties.notebookCell and properties.cellRegion.

A finding that rests on a launcher's default the caller could override (`MODEL=...` before an option parser,
`${VAR:-x}`) lists those defaults as properties.assumptions, as its message does ("assuming ...").
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote

from trainlint.diagnostics import Diagnostic
from trainlint.report._common import PROJECT_URL, Sources, cell_of, fingerprints, in_cell, is_meta

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
FINGERPRINT_KEY = "trainlintFingerprint/v1"
_ABSOLUTE = re.compile(r"^(/|[A-Za-z]:[/\\])")


def level(code: str) -> str:
    return "warning" if is_meta(code) else "error"


def artifact_location(filename: str) -> dict:
    """A URI reference for a path as the CLI prints it (posix, relative to the cwd): percent-encoded
    (spaces, '%', '#', non-ASCII) and resolved against %SRCROOT%."""
    if _ABSOLUTE.match(filename):  # only when the file is on another drive than the cwd (Windows)
        path = filename.replace("\\", "/")
        return {"uri": "file://" + ("" if path.startswith("/") else "/") + quote(path, safe="/:")}
    return {"uri": quote(filename, safe="/"), "uriBaseId": "%SRCROOT%"}


def region(line: int, col: int, end_line: int, end_col: int) -> dict:
    return {"startLine": line, "startColumn": col, "endLine": end_line, "endColumn": end_col}


def section(page: str, title: str) -> str | None:
    """The body of a rule page's `## title` section."""
    m = re.search(rf"^##\s+{re.escape(title)}\s*$(.*?)(?=^##\s|\Z)", page, re.M | re.S)
    return m.group(1).strip() if m and m.group(1).strip() else None


def _first_paragraph(markdown: str) -> str:
    return " ".join(markdown.split("\n\n", 1)[0].split())


def _words(name: str) -> str:
    text = name.replace("-", " ").replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def rule_descriptors(extra: dict[str, str]) -> list[dict]:
    """Every known rule, sorted by code, plus any code in `extra` (code -> name) that no registry knows."""
    from trainlint.pages import page
    from trainlint.rules import META_RULES, REGISTRY
    from trainlint.rules.base import DOCS_URL

    declared = {**META_RULES, **REGISTRY}  # each rule's declaration (codes.RuleInfo)
    out = []
    for code in sorted(set(declared) | set(extra)):
        text = page(code)
        what = section(text, "What it does") if text else None
        info = declared.get(code)
        if info is not None:
            name, short = info.name, f"{_words(info.name)} ({info.consumer})"
            full = _first_paragraph(what) if what else info.summary
            help_text = f"{what or full}\n\nFix: {info.fix_hint}"
        else:
            name = extra[code]
            short = full = help_text = _words(name)
        descriptor: dict = {
            "id": code,
            "name": name,
            "shortDescription": {"text": short},
            "fullDescription": {"text": full},
            "help": {"text": help_text},
            "defaultConfiguration": {"level": level(code)},
        }
        if text:
            descriptor["help"]["markdown"] = text.strip()
        if info is not None:
            descriptor["helpUri"] = DOCS_URL.format(code=code)
            descriptor["properties"] = {"consumer": info.consumer, "fix": info.fix}
        out.append(descriptor)
    return out


def _fix(d: Diagnostic) -> dict | None:
    fix = d.fix
    if fix is None or not fix.edits:
        return None
    replacements = [
        {"deletedRegion": region(e.start[0], e.start[1], e.end[0], e.end[1]),
         "insertedContent": {"text": e.content}}
        for e in fix.edits
    ]
    out: dict = {"artifactChanges": [{"artifactLocation": artifact_location(d.filename),
                                      "replacements": replacements}]}
    if fix.message:
        out["description"] = {"text": fix.message}
    if fix.applicability:
        out["properties"] = {"applicability": fix.applicability}
    return out


def log(diagnostics: list[Diagnostic]) -> dict:
    from trainlint import __version__

    rules = rule_descriptors({d.code: d.name for d in diagnostics})
    index = {r["id"]: i for i, r in enumerate(rules)}
    prints = fingerprints(diagnostics, Sources())
    results = []
    for d, fp in zip(diagnostics, prints):
        s, cell = d.span, cell_of(d)
        physical: dict = {"artifactLocation": artifact_location(d.filename)}
        if cell is None:
            physical["region"] = region(s.line, s.col, s.end_line, s.end_col)
        result: dict = {
            "ruleId": d.code,
            "ruleIndex": index[d.code],
            "level": level(d.code),
            "message": {"text": in_cell(d) + d.message},
            "locations": [{"physicalLocation": physical}],
            "partialFingerprints": {FINGERPRINT_KEY: fp},
        }
        fix = _fix(d) if cell is None else None
        if fix:
            result["fixes"] = [fix]
        if cell is not None:
            result["properties"] = {"notebookCell": cell, "cellRegion": region(s.line, s.col, s.end_line, s.end_col)}
        if d.assumptions:  # the launcher defaults it rests on (`--certain-only` hides it)
            result.setdefault("properties", {})["assumptions"] = list(d.assumptions)
        if d.versions:  # the library releases it was judged on, when not the newest unpinned ones
            result.setdefault("properties", {})["versions"] = list(d.versions)
        if d.related:  # a launch-decided finding: the script it reaches, the launch line
            result["relatedLocations"] = [
                {"id": i, "message": {"text": what},
                 "physicalLocation": {"artifactLocation": artifact_location(file),
                                      "region": region(r.line, r.col, r.end_line, r.end_col)}}
                for i, (file, r, what) in enumerate(d.related)]
        results.append(result)
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "trainlint", "version": __version__,
                                "informationUri": PROJECT_URL, "rules": rules}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }


def render(diagnostics: list[Diagnostic], files: int, quiet: bool = False) -> str:
    return json.dumps(log(diagnostics), indent=2)
