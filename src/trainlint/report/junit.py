"""junit: JUnit XML, for CI systems that show test reports (GitLab `reports: junit:`, Jenkins,
Azure Pipelines, test-reporter actions). One <testsuite> per file with findings, one failing
<testcase> per finding; a clean run is one passing testcase, so the report is never empty."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict

from trainlint.diagnostics import Diagnostic
from trainlint.report._common import cell_of, position

# Characters XML 1.0 cannot carry, even escaped (C0 controls but tab/LF/CR, surrogates, U+FFFE/U+FFFF).
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(value: str) -> str:
    return _INVALID_XML.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                            else f"\\u{ord(m.group()):04x}", value)


def _element(parent: ET.Element | None, tag: str, **attrs: object) -> ET.Element:
    clean = {k: _xml_text(str(v)) for k, v in attrs.items()}
    return ET.Element(tag, clean) if parent is None else ET.SubElement(parent, tag, clean)


def tree(diagnostics: list[Diagnostic], files: int) -> ET.Element:
    n = len(diagnostics)
    root = _element(None, "testsuites", name="trainlint", tests=max(n, 1), failures=n, errors=0)
    if not diagnostics:
        suite = _element(root, "testsuite", name="trainlint", tests=1, failures=0, errors=0, skipped=0)
        _element(suite, "testcase", name=f"no issues found ({files} file{'s' if files != 1 else ''} checked)",
                 classname="trainlint")
        return root
    by_file: dict[str, list[Diagnostic]] = defaultdict(list)
    for d in diagnostics:
        by_file[d.filename].append(d)
    for filename, found in by_file.items():
        suite = _element(root, "testsuite", name=filename, tests=len(found), failures=len(found), errors=0,
                         skipped=0)
        for d in found:
            s, cell = d.span, cell_of(d)
            where = f"{s.line}:{s.col}" if cell is None else f"cell {cell}:{s.line}:{s.col}"
            line = {"line": s.line} if cell is None else {}  # a notebook's rows are not lines of the file
            case = _element(suite, "testcase", name=f"{d.code} {d.name} ({where})", classname=filename,
                            file=filename, **line)
            failure = _element(case, "failure", message=d.message, type=d.code)
            failure.text = _xml_text(f"{position(d)}: {d.code} {d.message}" + (f"\n{d.url}" if d.url else ""))
    return root


def render(diagnostics: list[Diagnostic], files: int, quiet: bool = False) -> str:
    root = tree(diagnostics, files)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")
