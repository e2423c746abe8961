"""The CI / code-review output formats: full, json-lines, junit, github, gitlab, rdjson, sarif.

Each machine format is parsed back (json / ElementTree) and checked field by field, first on real
files linted by the real CLI (a subprocess, cwd = the project), then on hand-built diagnostics for
the edge cases: escaping, non-ASCII byte columns, fixes, files that are gone. The SARIF log is
validated against the official OASIS SARIF 2.1.0 schema (tests/data/report/, see its README)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import trainlint
from trainlint.diagnostics import Diagnostic, Fix, Span
from trainlint.report import FORMATS, render
from trainlint.report.names import FORMAT_NAMES

DATA = Path(__file__).parent / "data" / "report"
URL = "https://github.com/trainlint/trainlint/blob/main/rules/{code}.md"

EAGER = '''from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation="eager")  # a "quote", 100% é
MAX_SEQ_LENGTH = 4096
'''
# The same finding with non-ASCII characters *before* the span: "modèle_é" is 8 characters, 10 bytes.
EAGER_ACCENTED = EAGER.replace("model = ", "modèle_é = ")
CLEAN = EAGER.replace('"eager"', '"sdpa"')
LINE_2 = EAGER.splitlines()[1]
KWARG = 'attn_implementation="eager"'
COL = LINE_2.index(KWARG) + 1  # 73: character column of the keyword argument TL101 points at
END_COL = COL + len(KWARG)  # 100: exclusive


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("CI_PROJECT_DIR", None)
    return subprocess.run([sys.executable, "-m", "trainlint", "check", *args], cwd=cwd, capture_output=True,
                          text=True, encoding="utf-8", env=env, timeout=120)


def check(cwd: Path, fmt: str, *paths: str, expect: int = 1) -> str:
    r = run(cwd, *paths, "--output-format", fmt)
    assert r.returncode == expect, r.stdout + r.stderr
    return r.stdout


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(EAGER, encoding="utf-8")
    (tmp_path / "clean.py").write_text(CLEAN, encoding="utf-8")
    return tmp_path


@pytest.fixture
def reference(project: Path) -> dict:
    """The finding as the existing json format reports it: the other formats must agree with it."""
    found = json.loads(check(project, "json", "train.py"))
    assert len(found) == 1
    d = found[0]
    assert (d["code"], d["filename"], d["location"], d["end_location"]) == (
        "TL101", "train.py", {"row": 2, "column": COL}, {"row": 2, "column": END_COL})
    return d


def sarif_validator():
    import jsonschema  # test-only dependency (the `test` extra)

    schema = json.loads((DATA / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    assert schema["id"].endswith("/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)


def assert_valid_sarif(log: dict) -> None:
    errors = sorted(sarif_validator().iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:10])


def diag(code="TL101", message="eager attention", filename="train.py", span=(2, COL, 2, END_COL), fix=None,
         name="eager-attention-at-long-context") -> Diagnostic:
    url = None if code.startswith("TL0") else URL.format(code=code)
    fix = Fix.from_json(fix) if isinstance(fix, dict) else fix  # written in the JSON shape the reports print
    return Diagnostic(code, name, message, filename, Span(*span), url, fix)


def edit(content: str, start: tuple[int, int], end: tuple[int, int]) -> dict:
    return {"content": content, "location": {"row": start[0], "column": start[1]},
            "end_location": {"row": end[0], "column": end[1]}}


# --- the format registry and the CLI ---------------------------------------------------------------

def test_every_format_name_has_a_formatter_and_the_cli_offers_it(project):
    assert list(FORMATS) == list(FORMAT_NAMES)
    assert {"full", "json-lines", "junit", "github", "gitlab", "rdjson", "sarif"} <= set(FORMAT_NAMES)
    r = subprocess.run([sys.executable, "-m", "trainlint", "check", "--help"], capture_output=True, text=True,
                       timeout=120)
    choices = re.search(r"--output-format \[([^\]]+)\]", " ".join(r.stdout.split())).group(1)
    assert choices.replace(" ", "").split("|") == list(FORMAT_NAMES)


def test_names_module_imports_nothing():
    source = (Path(trainlint.__file__).parent / "report" / "names.py").read_text()
    assert not re.search(r"^\s*(import|from)\s", source, re.M)


def test_text_check_loads_no_ci_formatter_and_sarif_loads_no_heavy_module(project):
    probe = (
        "import sys\n"
        "from trainlint.cli import main\n"
        "try:\n"
        "    main(['check', 'train.py', '--output-format', sys.argv[1]])\n"
        "except SystemExit:\n"
        "    pass\n"
        "mods = sorted(m for m in sys.modules if m.startswith('trainlint.report.') or m.split('.')[0] in\n"
        "              ('jsonschema', 'referencing', 'torch', 'transformers'))\n"
        "print('MODS', mods)\n"
    )
    r = subprocess.run([sys.executable, "-c", probe, "text"], cwd=project, capture_output=True, text=True, timeout=120)
    assert "MODS ['trainlint.report.formats', 'trainlint.report.names']" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-c", probe, "sarif"], cwd=project, capture_output=True, text=True, timeout=120)
    mods = r.stdout.rsplit("MODS ", 1)[1]
    assert "trainlint.report.sarif" in mods and "jsonschema" not in mods and "referencing" not in mods, r.stdout


# --- real files, real CLI ------------------------------------------------------------------------------

def test_github_workflow_commands(project, reference):
    out = check(project, "github", "train.py")
    assert out == (f"::error file=train.py,line=2,col={COL},endLine=2,endColumn={END_COL},title=TL101::"
                   f"{reference['message']}\n")
    assert check(project, "github", "clean.py", expect=0) == ""


def test_sarif_from_the_cli_is_schema_valid_with_rules_results_and_fixes(project, reference):
    from trainlint.rules import META_RULES, REGISTRY

    log = json.loads(check(project, "sarif", "train.py"))
    assert_valid_sarif(log)
    assert log["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json" and log["version"] == "2.1.0"
    (run_,) = log["runs"]
    driver = run_["tool"]["driver"]
    assert (driver["name"], driver["version"], driver["informationUri"]) == (
        "trainlint", trainlint.__version__, "https://github.com/trainlint/trainlint")
    ids = [r["id"] for r in driver["rules"]]
    assert ids == sorted(set(REGISTRY) | set(META_RULES))
    tl101 = driver["rules"][ids.index("TL101")]
    assert tl101["name"] == "eager-attention-at-long-context"
    assert tl101["helpUri"] == URL.format(code="TL101")
    assert tl101["shortDescription"]["text"] == "Eager attention at long context (attention score matrix)"
    assert tl101["fullDescription"]["text"].startswith("Flags a model that trains with *eager* attention")
    assert tl101["help"]["text"].startswith("Flags a model that trains with *eager* attention")
    assert "## Why is this bad?" not in tl101["help"]["text"]  # only the "What it does" section
    assert tl101["help"]["text"].endswith(f"Fix: {REGISTRY['TL101'].fix_hint}")
    assert tl101["help"]["markdown"].startswith("# TL101 eager-attention-at-long-context")
    assert tl101["defaultConfiguration"] == {"level": "error"}
    tl001 = driver["rules"][ids.index("TL001")]
    assert tl001["name"] == "syntax-error" and tl001["defaultConfiguration"] == {"level": "warning"}
    assert run_["columnKind"] == "unicodeCodePoints"

    (result,) = run_["results"]
    assert result["ruleId"] == "TL101" and driver["rules"][result["ruleIndex"]]["id"] == "TL101"
    assert result["level"] == "error"
    assert result["message"] == {"text": reference["message"]}
    assert result["locations"] == [{"physicalLocation": {
        "artifactLocation": {"uri": "train.py", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 2, "startColumn": COL, "endLine": 2, "endColumn": END_COL}}}]
    assert re.fullmatch(r"[0-9a-f]{64}", result["partialFingerprints"]["trainlintFingerprint/v1"])
    if reference["fix"] is None:
        assert "fixes" not in result
    else:
        fix = reference["fix"]
        assert result["fixes"] == [{
            "description": {"text": fix["message"]},
            "artifactChanges": [{
                "artifactLocation": {"uri": "train.py", "uriBaseId": "%SRCROOT%"},
                "replacements": [{
                    "deletedRegion": {"startLine": e["location"]["row"], "startColumn": e["location"]["column"],
                                      "endLine": e["end_location"]["row"], "endColumn": e["end_location"]["column"]},
                    "insertedContent": {"text": e["content"]}} for e in fix["edits"]]}],
            "properties": {"applicability": fix["applicability"]}}]
    assert str(project) not in json.dumps(log)  # no absolute path of this machine

    clean = json.loads(check(project, "sarif", "clean.py", expect=0))
    assert_valid_sarif(clean)
    assert clean["runs"][0]["results"] == [] and len(clean["runs"][0]["tool"]["driver"]["rules"]) == len(ids)


def test_fingerprints_survive_lines_added_above(project):
    def prints(fmt: str) -> tuple[list, list]:
        out = json.loads(check(project, fmt, "train.py"))
        if fmt == "sarif":
            results = out["runs"][0]["results"]
            return ([r["partialFingerprints"]["trainlintFingerprint/v1"] for r in results],
                    [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in results])
        return [i["fingerprint"] for i in out], [i["location"]["lines"]["begin"] for i in out]

    before = {fmt: prints(fmt) for fmt in ("sarif", "gitlab")}
    (project / "train.py").write_text("import os\n\n# setup\n" + EAGER, encoding="utf-8")
    for fmt, (fps, lines) in before.items():
        fps2, lines2 = prints(fmt)
        assert lines2 == [line + 3 for line in lines] and fps2 == fps, fmt


def test_rdjson_converts_character_columns_to_utf8_byte_columns(project, reference):
    out = json.loads(check(project, "rdjson", "train.py"))
    assert out["source"] == {"name": "trainlint", "url": "https://github.com/trainlint/trainlint"}
    assert out["severity"] == "ERROR"
    (d,) = out["diagnostics"]
    # Only ASCII before the span on this line (the é comes after it): byte columns == character columns.
    assert d["message"] == reference["message"] and d["severity"] == "ERROR"
    assert d["location"] == {"path": "train.py", "range": {"start": {"line": 2, "column": COL},
                                                           "end": {"line": 2, "column": END_COL}}}
    assert d["code"] == {"value": "TL101", "url": URL.format(code="TL101")}
    if reference["fix"]:
        assert d["suggestions"] == [
            {"range": {"start": {"line": e["location"]["row"], "column": e["location"]["column"]},
                       "end": {"line": e["end_location"]["row"], "column": e["end_location"]["column"]}},
             "text": e["content"]}
            for e in reference["fix"]["edits"]]

    (project / "accented.py").write_text(EAGER_ACCENTED, encoding="utf-8")
    (j,) = json.loads(check(project, "json", "accented.py"))
    assert j["location"] == {"row": 2, "column": COL + 3}  # characters
    (r,) = json.loads(check(project, "rdjson", "accented.py"))["diagnostics"]
    assert r["location"]["range"] == {"start": {"line": 2, "column": COL + 5},  # bytes: è and é are 2 each
                                      "end": {"line": 2, "column": END_COL + 5}}
    for s in r.get("suggestions", []):
        assert s["range"]["start"]["column"] == COL + 5

    clean = json.loads(check(project, "rdjson", "clean.py", expect=0))
    assert clean["diagnostics"] == []


def test_junit_one_failure_per_finding_and_one_passing_case_when_clean(project, reference):
    root = ET.fromstring(check(project, "junit", "train.py", "clean.py"))
    assert root.tag == "testsuites"
    assert [root.get(k) for k in ("name", "tests", "failures", "errors")] == ["trainlint", "1", "1", "0"]
    (suite,) = root
    assert (suite.get("name"), suite.get("tests"), suite.get("failures")) == ("train.py", "1", "1")
    (case,) = suite
    assert case.get("name") == f"TL101 eager-attention-at-long-context (2:{COL})"
    assert (case.get("classname"), case.get("file"), case.get("line")) == ("train.py", "train.py", "2")
    (failure,) = case
    assert failure.tag == "failure" and failure.get("type") == "TL101"
    assert failure.get("message") == reference["message"]
    assert failure.text == f"train.py:2:{COL}: TL101 {reference['message']}\n{URL.format(code='TL101')}"

    root = ET.fromstring(check(project, "junit", "clean.py", expect=0))
    assert (root.get("tests"), root.get("failures")) == ("1", "0")
    (suite,) = root
    (case,) = suite
    assert case.get("name") == "no issues found (1 file checked)" and list(case) == []


def test_gitlab_code_quality(project, reference):
    out = json.loads(check(project, "gitlab", "train.py"))
    assert len(out) == 1
    issue = out[0]
    assert set(issue) == {"description", "check_name", "fingerprint", "severity", "location"}
    assert issue["description"] == f"TL101: {reference['message']}"
    assert issue["check_name"] == "TL101" and issue["severity"] == "major"
    assert re.fullmatch(r"[0-9a-f]{32}", issue["fingerprint"])
    assert issue["location"] == {"path": "train.py", "lines": {"begin": 2, "end": 2}}
    assert json.loads(check(project, "gitlab", "clean.py", expect=0)) == []


def test_json_lines_are_the_json_formats_objects(project):
    (project / "second.py").write_text(EAGER_ACCENTED, encoding="utf-8")
    whole = json.loads(check(project, "json", "."))
    lines = check(project, "json-lines", ".").splitlines()
    assert len(whole) == 2 and [json.loads(line) for line in lines] == whole
    assert check(project, "json-lines", "clean.py", expect=0) == ""


def test_full_shows_the_source_underlined_the_rule_name_and_the_fix(project, reference):
    out = check(project, "full", "train.py")
    lines = out.splitlines()
    text_lines = check(project, "text", "train.py").splitlines()
    assert lines[0] == text_lines[0] == f"train.py:2:{COL}: TL101 {reference['message']}"
    assert lines[1:5] == [
        "  |",
        f"2 | {LINE_2}",
        "  | " + " " * (COL - 1) + "^" * len(KWARG) + " eager-attention-at-long-context",
        "  |",
    ]
    rest = lines[5:]
    if reference["fix"]:
        assert rest[0] == f"  = help: {reference['fix']['message']}"
        rest = rest[1:]
    assert rest[:2] == ["", "Found 1 error in 1 file checked."]
    assert check(project, "full", "clean.py", expect=0) == "All checks passed! (1 file checked)\n"
    quiet = run(project, "train.py", "--output-format", "full", "-q").stdout
    assert "Found" not in quiet and quiet.startswith(lines[0])


# --- hand-built diagnostics: escaping, byte columns, fixes, missing files --------------------------------

def test_github_escapes_data_and_properties_like_the_actions_toolkit():
    d = diag(message="100% sure\r\nsecond: line, with comma", filename="odd:dir,1/50%/x.py", code="TL0:1,%")
    assert render("github", [d], 1) == (
        f"::warning file=odd%3Adir%2C1/50%25/x.py,line=2,col={COL},endLine=2,endColumn={END_COL},"
        "title=TL0%3A1%2C%25::100%25 sure%0D%0Asecond: line, with comma")
    assert render("github", [diag(code="TL101")], 1).startswith("::error ")
    assert render("github", [], 3) == ""


def test_rdjson_byte_columns_for_multibyte_characters(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # reviewdog's own example: in 'a𐐀b' the column of b is 6 (𐐀 is 4 bytes in UTF-8).
    (tmp_path / "u.py").write_text("x = 1\ns = 'a𐐀b'  # é\n", encoding="utf-8")
    line = "s = 'a𐐀b'  # é"
    b = line.index("b") + 1  # character column 8
    fix = {"applicability": "unsafe", "message": "Replace b", "edits": [edit("c", (2, b), (2, b + 1)),
                                                                       edit("", (2, len(line) + 1), (3, 1))]}
    d = diag(filename="u.py", span=(2, b, 2, b + 1), fix=fix)
    gone = diag(filename="deleted.py", span=(2, b, 2, b + 1), fix=fix)
    out = json.loads(render("rdjson", [d, gone, diag(code="TL001", filename="u.py", span=(1, 1, 1, 1),
                                                     name="syntax-error")], 1))
    rd, rgone, rmeta = out["diagnostics"]
    assert rd["location"]["range"] == {"start": {"line": 2, "column": b + 3}, "end": {"line": 2, "column": b + 4}}
    # Two edits are one suggestion over the lines they span (reviewdog posts a suggestion as whole lines and
    # wants every suggestion of a comment on the same lines): lines 2 to 3 become line 2 with both applied.
    assert rd["suggestions"] == [
        {"range": {"start": {"line": 2, "column": 1}, "end": {"line": 3, "column": 1}}, "text": "s = 'a𐐀c'  # é"}]
    # The file is gone: character columns are kept rather than guessed, and the lines two edits would join
    # cannot be read, so there is no suggestion; a one-edit fix keeps its own (reviewdog reads the lines).
    assert rgone["location"] == {"path": "deleted.py", "range": {"start": {"line": 2, "column": b},
                                                                 "end": {"line": 2, "column": b + 1}}}
    assert "suggestions" not in rgone
    one = {**fix, "edits": fix["edits"][:1]}
    (rone,) = json.loads(render("rdjson", [diag(filename="deleted.py", span=(2, b, 2, b + 1), fix=one)], 1))[
        "diagnostics"]
    assert rone["suggestions"] == [{"range": {"start": {"line": 2, "column": b}, "end": {"line": 2, "column": b + 1}},
                                    "text": "c"}]
    assert rmeta["severity"] == "WARNING" and rmeta["code"] == {"value": "TL001"} and "suggestions" not in rmeta


def test_sarif_hand_built_fix_odd_paths_unknown_and_meta_codes_are_schema_valid(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my dir").mkdir()
    (tmp_path / "my dir" / "train file.py").write_text(EAGER, encoding="utf-8")
    fix = {"applicability": "safe", "message": 'Set attn_implementation="sdpa"',
           "edits": [edit('attn_implementation="sdpa"', (2, COL), (2, END_COL)), edit("import os\n", (1, 1), (1, 1))]}
    ds = [
        diag(filename="my dir/train file.py", fix=fix),
        diag(code="TL001", name="syntax-error", message="syntax error: invalid syntax", filename="bad#1%.py",
             span=(3, 5, 3, 5)),
        diag(code="TL999", name="future-rule", message="from a newer rule set", filename="é.py", span=(1, 1, 1, 2)),
    ]
    log = json.loads(render("sarif", ds, 3))
    assert_valid_sarif(log)
    run_ = log["runs"][0]
    rules = run_["tool"]["driver"]["rules"]
    r_fix, r_meta, r_new = run_["results"]
    assert r_fix["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "my%20dir/train%20file.py", "uriBaseId": "%SRCROOT%"}
    assert r_fix["fixes"] == [{
        "description": {"text": 'Set attn_implementation="sdpa"'},
        "artifactChanges": [{
            "artifactLocation": {"uri": "my%20dir/train%20file.py", "uriBaseId": "%SRCROOT%"},
            "replacements": [
                {"deletedRegion": {"startLine": 2, "startColumn": COL, "endLine": 2, "endColumn": END_COL},
                 "insertedContent": {"text": 'attn_implementation="sdpa"'}},
                {"deletedRegion": {"startLine": 1, "startColumn": 1, "endLine": 1, "endColumn": 1},
                 "insertedContent": {"text": "import os\n"}}]}],
        "properties": {"applicability": "safe"}}]
    assert r_meta["level"] == "warning" and rules[r_meta["ruleIndex"]]["id"] == "TL001"
    assert r_meta["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "bad%231%25.py"
    assert "fixes" not in r_meta
    assert r_new["level"] == "error" and rules[r_new["ruleIndex"]] == {
        "id": "TL999", "name": "future-rule", "shortDescription": {"text": "Future rule"},
        "fullDescription": {"text": "Future rule"}, "help": {"text": "Future rule"},
        "defaultConfiguration": {"level": "error"}}
    assert r_new["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "%C3%A9.py"
    # Files that cannot be read still get a fingerprint (from the message), all distinct here.
    fps = [r["partialFingerprints"]["trainlintFingerprint/v1"] for r in run_["results"]]
    assert len(set(fps)) == 3


def test_fingerprints_tell_identical_lines_apart_by_occurrence(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.py").write_text("a = f(x)\na = f(x)\n", encoding="utf-8")
    ds = [diag(filename="t.py", span=(1, 5, 1, 9)), diag(filename="t.py", span=(2, 5, 2, 9))]
    sarif = [r["partialFingerprints"]["trainlintFingerprint/v1"]
             for r in json.loads(render("sarif", ds, 1))["runs"][0]["results"]]
    gitlab = [i["fingerprint"] for i in json.loads(render("gitlab", ds, 1))]
    assert len(set(sarif)) == 2 and len(set(gitlab)) == 2
    (tmp_path / "t.py").write_text("\n\n  a  =  f(x)\na = f(x)\n", encoding="utf-8")  # shifted, re-spaced
    moved = [diag(filename="t.py", span=(3, 7, 3, 11)), diag(filename="t.py", span=(4, 5, 4, 9))]
    assert [r["partialFingerprints"]["trainlintFingerprint/v1"]
            for r in json.loads(render("sarif", moved, 1))["runs"][0]["results"]] == sarif


def test_gitlab_paths_are_rebased_on_ci_project_dir(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    monkeypatch.setenv("CI_PROJECT_DIR", str(tmp_path))
    (issue,) = json.loads(render("gitlab", [diag(filename="train.py")], 1))
    assert issue["location"]["path"] == "sub/train.py"
    monkeypatch.setenv("CI_PROJECT_DIR", str(tmp_path / "sub" / "elsewhere"))
    (issue,) = json.loads(render("gitlab", [diag(filename="train.py", code="TL002", name="unreadable-file")], 1))
    assert issue["location"]["path"] == "train.py" and issue["severity"] == "minor"


def test_junit_is_well_formed_with_control_characters_and_markup():
    d = diag(message='bad \x00\x1b byte <&> "quoted"\nsecond line', filename="a&b <c>.py")
    root = ET.fromstring(render("junit", [d, diag(filename="z.py")], 2))
    suites = list(root)
    assert [s.get("name") for s in suites] == ["a&b <c>.py", "z.py"]
    failure = suites[0][0][0]
    assert failure.get("message") == 'bad \\x00\\x1b byte <&> "quoted"\nsecond line'
    assert root.get("tests") == "2" and root.get("failures") == "2"


def test_full_with_fix_wide_characters_multiline_span_and_missing_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.py").write_text("x = '日本'; y = call(\n    a,\n    b)\n", encoding="utf-8")
    y = "x = '日本'; y = call(".index("y") + 1  # character column 11, terminal column 13
    wide = diag(filename="w.py", span=(1, y, 1, y + 1), message="wide",
                fix={"applicability": "unsafe", "message": "Rename y", "edits": [edit("z", (1, y), (1, y + 1))]})
    multi = diag(filename="w.py", span=(1, y + 4, 3, 7), message="multi")  # from `call(` to the `)`
    gone = diag(filename="gone.py", span=(12, 1, 12, 2), message="gone")
    out = render("full", [wide, multi, gone], 2)
    blocks = out.split("\n\n")
    assert blocks[0].splitlines() == [
        "w.py:1:11: TL101 wide",
        "  |",
        "1 | x = '日本'; y = call(",
        "  |             ^ eager-attention-at-long-context",  # '日本' takes four terminal columns
        "  |",
        "  = help: Rename y",
    ]
    assert blocks[1].splitlines() == [
        "w.py:1:15: TL101 multi",
        "  |",
        "1 | x = '日本'; y = call(",
        "  |                 ^^^^^",
        "2 |     a,",
        "  |     ^^",
        "3 |     b)",
        "  |     ^^ eager-attention-at-long-context",
        "  |",
    ]
    assert blocks[2].splitlines() == ["gone.py:12:1: TL101 gone", "   = rule: eager-attention-at-long-context "
                                                                  "(source not available)"]
    assert blocks[3] == "Found 3 errors in 2 files checked."
    assert render("full", [wide], 1, quiet=True).endswith("= help: Rename y")


def test_text_and_json_are_unchanged():
    d = diag(message="m")
    assert render("text", [d], 1) == f"train.py:2:{COL}: TL101 m\nFound 1 error in 1 file checked."
    assert render("concise", [], 2) == "All checks passed! (2 files checked)"
    assert render("text", [d], 1, quiet=True) == f"train.py:2:{COL}: TL101 m"
    (got,) = json.loads(render("json", [d], 1))
    assert got.pop("cell", None) is None  # notebooks' field, null for a plain file
    assert got == {
        "code": "TL101", "message": "m", "filename": "train.py", "location": {"row": 2, "column": COL},
        "end_location": {"row": 2, "column": END_COL}, "fix": None, "url": URL.format(code="TL101"), "noqa_row": 2}


def _notebook(cells: list[str]) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Title"]},
        *({"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
           "source": c.splitlines(keepends=True)} for c in cells)]}, indent=1)


def test_notebook_diagnostics_name_their_cell_where_a_format_can_only_point_at_file_lines(tmp_path, monkeypatch):
    import dataclasses

    if "cell" not in {f.name for f in dataclasses.fields(Diagnostic)}:
        pytest.skip("Diagnostic has no notebook cell")
    monkeypatch.chdir(tmp_path)
    code = "import torch\nmodèle = load(attn='eager')\n"
    (tmp_path / "nb.ipynb").write_text(_notebook(["x = 1\n", code]), encoding="utf-8")
    col = code.splitlines()[1].index("attn") + 1  # 15
    fix = {"applicability": "safe", "message": "Use sdpa", "edits": [edit("attn='sdpa'", (2, col), (2, col + 12))]}
    d = dataclasses.replace(diag(filename="nb.ipynb", span=(2, col, 2, col + 12), message="eager", fix=fix), cell=3)

    full = render("full", [d], 1).splitlines()
    assert full[1:4] == ["  |", "2 | modèle = load(attn='eager')", "  | " + " " * (col - 1) + "^" * 12
                         + " eager-attention-at-long-context"]
    assert full[5] == "  = help: Use sdpa"
    assert render("github", [d], 1) == f"::error file=nb.ipynb,title=TL101::cell 3, line 2, column {col}: eager"
    log = json.loads(render("sarif", [d], 1))
    assert_valid_sarif(log)
    (result,) = log["runs"][0]["results"]
    assert result["message"]["text"] == f"cell 3, line 2, column {col}: eager"
    assert result["locations"] == [{"physicalLocation": {"artifactLocation": {"uri": "nb.ipynb",
                                                                              "uriBaseId": "%SRCROOT%"}}}]
    assert result["properties"] == {"notebookCell": 3, "cellRegion": {"startLine": 2, "startColumn": col,
                                                                      "endLine": 2, "endColumn": col + 12}}
    assert "fixes" not in result
    (rd,) = json.loads(render("rdjson", [d], 1))["diagnostics"]
    assert rd["location"] == {"path": "nb.ipynb"} and "suggestions" not in rd
    assert rd["message"] == (f"cell 3, line 2, column {col}: eager (fix not suggested: a notebook's lines are its "
                             f"cells' and a suggestion would have to edit the .ipynb JSON; `trainlint check --fix "
                             f"nb.ipynb` applies it: Use sdpa)")
    (gl,) = json.loads(render("gitlab", [d], 1))
    assert gl["location"] == {"path": "nb.ipynb", "lines": {"begin": 1, "end": 1}}
    assert gl["description"] == f"TL101: cell 3, line 2, column {col}: eager"
    case = ET.fromstring(render("junit", [d], 1))[0][0]
    assert case.get("name") == f"TL101 eager-attention-at-long-context (cell 3:2:{col})" and case.get("line") is None
    assert case[0].text.startswith(f"nb.ipynb:cell 3:2:{col}: TL101 eager")

    # A cell inserted above: the cell number changes, the fingerprint does not (it hashes the line).
    before = result["partialFingerprints"]["trainlintFingerprint/v1"]
    (tmp_path / "nb.ipynb").write_text(_notebook(["y = 2\n", "x = 1\n", code]), encoding="utf-8")
    moved = json.loads(render("sarif", [dataclasses.replace(d, cell=4)], 1))["runs"][0]["results"][0]
    assert moved["partialFingerprints"]["trainlintFingerprint/v1"] == before
