"""report/lsp.py, the converter `trainlint server` publishes with: positions in each LSP position encoding,
the one minimal edit between two texts, file-level notebook findings; and the server command without the
`lsp` extra."""

from __future__ import annotations

import subprocess
import sys

from trainlint.diagnostics import Diagnostic, Fix, Span
from trainlint.report import lsp

LINE = "s = 'a\U00010400b'  # é"  # reviewdog's example character: 1 code point, 2 UTF-16 units, 4 UTF-8 bytes


def test_character_counts_in_the_negotiated_encoding():
    col = LINE.index("b") + 1  # 1-based code-point column of b
    assert lsp.character(LINE, col, "utf-32") == col - 1
    assert lsp.character(LINE, col, "utf-16") == col - 1 + 1
    assert lsp.character(LINE, col, "utf-8") == col - 1 + 3
    assert lsp.character(LINE, len(LINE) + 3, "utf-16") == len(LINE) + 1 + 2  # past the end: one unit a column
    assert lsp.character(None, 7) == 6  # a line that cannot be read keeps the column


def test_diagnostic_range_code_and_related_location():
    d = Diagnostic("TL101", "eager-attention-at-long-context", "eager", "t.py", Span(2, 8, 2, 9),
                   "https://example.org/TL101", Fix("safe", "m", ()),
                   related=(("run.sh", Span(1, 1, 1, 4), "launched here"),))
    out = lsp.diagnostic(d, ["x = 1", LINE], "utf-16", lambda f: (f"file:///w/{f}", ["abc"]))
    assert out["range"] == {"start": {"line": 1, "character": 8}, "end": {"line": 1, "character": 9}}
    assert (out["code"], out["severity"], out["source"]) == ("TL101", lsp.ERROR, "trainlint")
    assert out["codeDescription"] == {"href": "https://example.org/TL101"} and out["data"] == {"fix": "safe"}
    assert out["relatedInformation"] == [{"location": {"uri": "file:///w/run.sh", "range": {
        "start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 3}}}, "message": "launched here"}]


def test_a_notebook_finding_on_the_json_text_sits_at_the_top_and_names_its_cell():
    d = Diagnostic("TL002", "unreadable-file", "bad", "nb.ipynb", Span(3, 5, 3, 9), cell=4)
    out = lsp.diagnostic(d, ["{"], file_level=True)
    assert out["range"] == {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
    assert out["message"] == "cell 4, line 3, column 5: bad" and out["severity"] == lsp.WARNING


def test_minimal_edit_replaces_only_what_differs_and_never_splits_a_crlf():
    old = "a = 1\r\nb = f(x)\r\nc = 3\r\n"
    new = "a = 1\r\nb = f(x,\r\n      y=2)\r\nc = 3\r\n"
    edit = lsp.minimal_edit(old, new)
    assert edit == {"range": {"start": {"line": 1, "character": 7}, "end": {"line": 1, "character": 7}},
                    "newText": ",\r\n      y=2"}
    # the common prefix ("a\r") and suffix ("\nc\r\n") both end inside the first "\r\n": the edit takes it whole
    edit = lsp.minimal_edit("a\r\nc\r\n", "a\rx\r\nc\r\n")
    assert edit == {"range": {"start": {"line": 0, "character": 1}, "end": {"line": 1, "character": 0}},
                    "newText": "\rx\r\n"}
    assert lsp.minimal_edit("same", "same") is None


def test_minimal_edit_counts_utf16_units_before_the_change():
    edit = lsp.minimal_edit(LINE, LINE.replace("b'", "c'"))
    assert edit["range"]["start"]["character"] == LINE.index("b") + 1 and edit["newText"] == "c"


def test_server_without_the_lsp_extra_says_how_to_install_it():
    probe = ("import sys\nsys.modules['pygls'] = None\nfrom trainlint.cli import main\nmain(['server'])\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "the server needs the lsp extra (pip install 'trainlint[lsp]')" in r.stderr
