"""launch/configs.py: JSON / YAML configs read safely, every key with exact spans; DeepSpeed and accelerate settings."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainlint.diagnostics import Span
from trainlint.launch.accelerate import ACCELERATE_DEFAULTS
from trainlint.launch.configs import (
    AUTO_FROM_MODEL,
    AUTO_FROM_TRAINING_ARGS,
    MAX_DEPTH,
    accelerate_settings,
    auto_values,
    config_kind,
    deepspeed_settings,
    read_config,
)

FIXTURES = Path(__file__).parent / "fixtures" / "launch" / "configs"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "configs"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/configs")


def at(text: str, span: Span, breaks: str = "\r\n|\r|\n") -> str:
    """The text a span covers; lines break at \\r\\n, \\r and \\n (JSON; YAML also breaks at NEL, LS and PS)."""
    starts = [0] + [m.end() for m in re.finditer(breaks, text)]
    return text[starts[span.line - 1] + span.col - 1: starts[span.end_line - 1] + span.end_col - 1]


YAML_BREAKS = "\r\n|[\r\n\x85\u2028\u2029]"


def sp(line: int, col: int, end_line: int, end_col: int) -> Span:
    return Span(line, col, end_line, end_col)


def messages(reading) -> list[str]:
    return [p.message for p in reading.problems]


def one_problem(reading) -> str:
    assert reading.problem is not None and len(reading.problems) == 1, reading.problems
    assert reading.problem == reading.problems[0]
    return reading.problem.message


# --- JSON ---------------------------------------------------------------------------------------------------------


def test_json_nested_keys_are_dotted_in_file_order_with_value_and_key_spans():
    path = FIXTURES / "ds_zero2_offload.json"
    text = path.read_text()
    r = read_config(path)
    assert r.problem is None and r.problems == ()
    assert [e.key for e in r.entries] == [
        "bf16", "bf16.enabled", "zero_optimization", "zero_optimization.stage", "zero_optimization.offload_optimizer",
        "zero_optimization.offload_optimizer.device", "zero_optimization.offload_optimizer.pin_memory",
        "zero_optimization.allgather_partitions", "zero_optimization.reduce_bucket_size",
        "zero_optimization.overlap_comm", "zero_optimization.contiguous_gradients", "gradient_accumulation_steps",
        "gradient_clipping", "train_micro_batch_size_per_gpu", "wall_clock_breakdown"]
    device = r.get("zero_optimization.offload_optimizer.device")
    assert (device.value, device.span, device.key_span) == ("cpu", sp(8, 17, 8, 22), sp(8, 7, 8, 15))
    assert at(text, device.span) == '"cpu"' and at(text, device.key_span) == '"device"'
    section = r.get("zero_optimization")
    assert section.span == sp(5, 24, 15, 4) and section.key_span == sp(5, 3, 5, 22)
    assert at(text, section.span).startswith("{\n    \"stage\": 2") and at(text, section.span).endswith("true\n  }")
    assert section.value == json.loads(text)["zero_optimization"]
    bucket = r.get("zero_optimization.reduce_bucket_size")
    assert bucket.value == 5e8 and isinstance(bucket.value, float) and at(text, bucket.span) == "5e8"
    assert r.get("gradient_clipping").value == 1.0 and r.get("gradient_clipping").span == sp(17, 24, 17, 27)


def test_json_values_are_what_json_load_builds():
    for path in sorted(FIXTURES.glob("*.json")):
        r = read_config(path)
        assert r.problems == (), path
        assert {e.key: e.value for e in r.top_level()} == json.loads(path.read_text()), path


def test_json_lists_are_values_and_their_items_get_no_entries():
    path = FIXTURES / "args_run.json"
    r = read_config(path)
    e = r.get("report_to")
    assert e.value == ["wandb", "tensorboard"] and e.span == sp(11, 18, 11, 42)
    assert not [x for x in r.entries if x.key.startswith("report_to.")]
    assert r.get("resume_from_checkpoint").value is None
    assert r.get("learning_rate").value == 2e-5 and r.get("learning_rate").span == sp(6, 22, 6, 26)


def test_json_escapes_and_unicode_are_decoded_and_columns_count_characters():
    path = FIXTURES / "args_run.json"
    text = path.read_text()
    e = read_config(path).get("run_name")
    assert e.value == 'café "quoted" — ünïcode'
    assert e.span == sp(12, 17, 12, 49)
    assert at(text, e.span) == '"caf\\u00e9 \\"quoted\\" — ünïcode"'
    # An astral character is one column, as Python counts characters.
    r = read_config(Path("x.json"), '{"a": "\U0001F600", "b": 1}')
    assert r.get("a").span == sp(1, 7, 1, 10) and r.get("b").span == sp(1, 17, 1, 18)
    assert r.get("b").key_span == sp(1, 12, 1, 15)


def test_json_numbers_and_literals_as_the_stdlib_builds_them():
    text = '{"i": -12, "f": 1.5e-3, "big": 123456789012345678901234567890, "t": true, "n": null, "x": NaN, "z": 0}'
    r = read_config(Path("n.json"), text)
    assert r.problems == ()
    values = {e.key: e.value for e in r.entries}
    assert values["i"] == -12 and type(values["i"]) is int
    assert values["f"] == 1.5e-3 and values["big"] == 123456789012345678901234567890
    assert values["t"] is True and values["n"] is None and values["x"] != values["x"] and values["z"] == 0
    assert [at(text, e.span) for e in r.entries] == ["-12", "1.5e-3", "123456789012345678901234567890", "true",
                                                     "null", "NaN", "0"]


def test_json_with_crlf_line_endings(tmp_path: Path):
    path = tmp_path / "crlf.json"
    path.write_bytes(b'{\r\n  "a": 1,\r\n  "b": {"c": "x"}\r\n}\r\n')
    r = read_config(path)
    assert r.problems == ()
    assert r.get("a").span == sp(2, 8, 2, 9)
    assert r.get("b").span == sp(3, 8, 3, 18)
    assert (r.get("b.c").span, r.get("b.c").key_span) == (sp(3, 14, 3, 17), sp(3, 9, 3, 12))


def test_json_bom_is_not_counted_and_is_reported_because_json_load_refuses_it(tmp_path: Path):
    raw = b'\xef\xbb\xbf{"a": 1}\n'
    path = tmp_path / "bom.json"
    path.write_bytes(raw)
    r = read_config(path)
    assert r.get("a").value == 1 and r.get("a").span == sp(1, 7, 1, 8) and r.get("a").key_span == sp(1, 2, 1, 5)
    assert "byte-order mark" in one_problem(r)
    with pytest.raises(json.JSONDecodeError):  # what transformers / accelerate do with it (open(encoding="utf-8"))
        json.loads(raw.decode("utf-8"))


def test_json_comments_and_trailing_commas_are_read_and_reported_as_hjson_only():
    text = ('{\n  // DeepSpeed reads this with hjson\n  "zero_optimization": {"stage": 3,}, # stage\n'
            '  /* x */ "a": [1,]\n}\n')
    r = read_config(Path("ds.json"), text)
    assert r.get("zero_optimization.stage").value == 3 and r.get("zero_optimization.stage").span == sp(3, 34, 3, 35)
    assert r.get("a").value == [1] and r.get("a").span == sp(4, 16, 4, 20)
    found = messages(r)
    assert len(found) == 5
    assert found[0].startswith("comment at line 2, column 3: comments are not JSON")
    assert found[1].startswith("trailing comma at line 3, column 35")
    assert [m.split(":")[0] for m in found[2:]] == ["comment at line 3, column 39", "comment at line 4, column 3",
                                                   "trailing comma at line 4, column 18"]
    assert "json.load" in found[0] and "hjson" in found[0]
    assert r.problems[1].span == sp(3, 35, 3, 36)


def test_json_duplicate_key_keeps_the_last_value_and_is_reported():
    text = '{"zero_optimization": {"stage": 2, "stage": 3}, "x": 1}'
    r = read_config(Path("d.json"), text)
    stage = r.get("zero_optimization.stage")
    assert stage.value == 3 and stage.key_span == sp(1, 36, 1, 43) and stage.span == sp(1, 45, 1, 46)
    assert [e.key for e in r.entries] == ["zero_optimization", "zero_optimization.stage", "x"]
    assert one_problem(r).startswith("duplicate key 'zero_optimization.stage' (line 1 and line 1): json.load keeps")
    assert {e.key: e.value for e in r.top_level()} == json.loads(text)


@pytest.mark.parametrize("text, message, span", [
    ('{\n  "a": 1\n  "b": 2\n}',
     "JSON syntax error at line 3, column 3: expected ',' or '}' after a value in an object", sp(3, 3, 3, 3)),
    ("{'a': 1}", "JSON syntax error at line 1, column 2: expected a key in double quotes, found \"'\"", sp(1, 2, 1, 2)),
    ('{"a": \'x\'}', "JSON syntax error at line 1, column 7: strings must be in double quotes", sp(1, 7, 1, 7)),
    ('{"a": "x\n"}', "JSON syntax error at line 1, column 7: unterminated string (a line break before the closing "
     "quote)", sp(1, 7, 1, 7)),
    ('{"a": "\\q"}', "JSON syntax error at line 1, column 8: Invalid \\escape", sp(1, 8, 1, 8)),
    ('{"a": "x\ty"}', "JSON syntax error at line 1, column 9: Invalid control character at", sp(1, 9, 1, 9)),
    ('{"a": 01}', "JSON syntax error at line 1, column 7: invalid number '01'", sp(1, 7, 1, 7)),
    ('{"a": 1} {"b": 2}', "JSON syntax error at line 1, column 10: extra data after the top-level value",
     sp(1, 10, 1, 10)),
    ('{"a": tru}', "JSON syntax error at line 1, column 7: unexpected 't', a value was expected", sp(1, 7, 1, 7)),
    ('{"a": [1, 2', "JSON syntax error at line 1, column 12: expected ',' or ']' after a value in a list",
     sp(1, 12, 1, 12)),
    ("  \n", "JSON syntax error at line 2, column 1: the file is empty (no JSON value)", sp(2, 1, 2, 1)),
    ('{"a": 1 /* no end', "JSON syntax error at line 1, column 9: unterminated /* comment", sp(1, 9, 1, 9)),
    ('[1, 2]', "not an args or config file: the top level is a list, not a mapping of keys", sp(1, 1, 1, 7)),
    ('"text"', "not an args or config file: the top level is a string, not a mapping of keys", sp(1, 1, 1, 7)),
])
def test_json_errors_are_problems_with_their_position(text: str, message: str, span: Span):
    r = read_config(Path("bad.json"), text)
    assert r.entries == ()
    assert one_problem(r) == message
    assert r.problem.span == span and r.problem.file == Path("bad.json")


def test_a_fatal_problem_comes_first_before_what_was_noticed_on_the_way():
    r = read_config(Path("d.json"), '{"a": 1, "a": 2, // note\n "b": }')
    assert r.entries == ()
    assert r.problem.message == "JSON syntax error at line 2, column 7: unexpected '}', a value was expected"
    assert [p.message.split(" (")[0].split(":")[0] for p in r.problems[1:]] == ["duplicate key 'a'",
                                                                               "comment at line 1, column 18"]


def test_json_nested_too_deep_is_a_problem_not_a_recursion_error():
    r = read_config(Path("deep.json"), '{"a": ' + "[" * 5000 + "]" * 5000 + "}")
    assert r.entries == () and f"nested more than {MAX_DEPTH} levels deep" in one_problem(r)


# --- YAML ---------------------------------------------------------------------------------------------------------


def test_yaml_values_are_what_safe_load_builds():
    for path in sorted(FIXTURES.glob("*.yaml")):
        r = read_config(path)
        assert r.problems == (), path
        assert {e.key: e.value for e in r.top_level()} == yaml.safe_load(path.read_text()), path


def test_yaml_block_flow_quoted_and_multiline_scalars_have_exact_spans():
    path = FIXTURES / "yaml_features.yaml"
    text = path.read_text()
    r = read_config(path)
    flow = r.get("flow")
    assert flow.span == sp(8, 7, 8, 52) and at(text, flow.span) == "{a: 1, b: [x, y], c: 'single', d: \"dou\\\"ble\"}"
    assert [(e.key, e.value, at(text, e.span)) for e in r.entries if e.key.startswith("flow.")] == [
        ("flow.a", 1, "1"), ("flow.b", ["x", "y"], "[x, y]"), ("flow.c", "single", "'single'"),
        ("flow.d", 'dou"ble', '"dou\\"ble"')]
    literal = r.get("literal")
    assert literal.value == "line one\nline two\n" and literal.span == sp(10, 10, 12, 11)
    assert at(text, literal.span) == "|\n  line one\n  line two"
    folded = r.get("folded")
    assert folded.value == "folded text" and folded.span == sp(14, 9, 16, 7)
    plain = r.get("plain_multi")
    assert plain.value == "first second" and plain.span == sp(18, 14, 19, 9)
    quoted = r.get("quoted_num")
    assert quoted.value == "8" and at(text, quoted.span) == '"8"'
    nothing = r.get("nothing")  # `key:` with no value: null, a zero-width span just after the colon
    assert nothing.value is None and nothing.span == sp(21, 9, 21, 9) and nothing.key_span == sp(21, 1, 21, 8)
    assert r.get("tilde").value is None and r.get("tilde").span == sp(22, 8, 22, 9)
    # A block mapping runs from its first key to the end of its last value; an anchor is not part of the value.
    defaults = r.get("defaults")
    assert defaults.span == sp(2, 3, 4, 11) and defaults.key_span == sp(1, 1, 1, 9)


def test_yaml_1_1_scalars_as_the_safe_loader_reads_them():
    r = read_config(FIXTURES / "yaml_features.yaml")
    # PyYAML's float needs a dot: 1e-4 is the string "1e-4", 1.0e-4 is a float.
    assert r.get("defaults.lr").value == "1e-4" and r.get("defaults.warmup").value == 1.0e-4
    assert r.get("defaults.flag").value is True  # `on`
    assert r.get("bools").value == [True, True, True, True, True, "y", False, False]
    text = "a: yes\nb: Off\nc: 1_000\nd: 017\ne: 0x1F\nf: 1:30\ng: 0o17\nh: 2024-01-02\ni: .inf\nj: 2e-5\nk: '1e-4'\n"
    values = {e.key: e.value for e in read_config(Path("q.yaml"), text).entries}
    assert values == yaml.safe_load(text)
    assert values["a"] is True and values["b"] is False and values["c"] == 1000 and values["d"] == 15
    assert values["e"] == 31 and values["f"] == 90 and values["g"] == "0o17" and values["j"] == "2e-5"
    assert str(values["h"]) == "2024-01-02" and values["i"] == float("inf")


def test_yaml_non_string_keys_are_named_as_written():
    r = read_config(Path("k.yaml"), "on: 1\n2: b\n")
    assert [(e.key, e.value) for e in r.entries] == [("on", 1), ("2", "b")]
    assert r.get("on").key_span == sp(1, 1, 1, 3)


def test_yaml_merge_keys_and_aliases_point_where_each_value_is_written():
    path = FIXTURES / "yaml_features.yaml"
    text = path.read_text()
    r = read_config(path)
    # `base` merges *defaults and overrides lr: merged keys first, as the constructed dict has them.
    assert [e.key for e in r.entries if e.key.startswith("base.")] == ["base.lr", "base.warmup", "base.flag"]
    assert r.get("base").value == {"lr": "3e-5", "warmup": 1.0e-4, "flag": True}
    assert r.get("base.lr").span == sp(7, 7, 7, 11)  # the override, written under base
    assert r.get("base.warmup").span == sp(3, 11, 3, 17) and at(text, r.get("base.warmup").span) == "1.0e-4"
    assert r.get("base.warmup").key_span == sp(3, 3, 3, 9)  # inherited: written in the anchored mapping
    assert r.problems == ()  # an override of a merged key is not a duplicate
    alias = r.get("alias")
    assert alias.value == {"lr": "1e-4", "warmup": 1.0e-4, "flag": True}
    assert alias.span == sp(20, 8, 20, 17) and at(text, alias.span) == "*defaults"
    assert r.get("alias.lr").span == sp(2, 7, 2, 11)


def test_yaml_with_crlf_line_endings_and_a_bom(tmp_path: Path):
    path = tmp_path / "crlf.yaml"
    path.write_bytes(b"\xef\xbb\xbfa: 1\r\nb:\r\n  c: x\r\n")
    r = read_config(path)
    assert r.problems == ()  # PyYAML accepts a BOM
    assert (r.get("a").span, r.get("a").key_span) == (sp(1, 4, 1, 5), sp(1, 1, 1, 2))
    assert r.get("b").span == sp(3, 3, 3, 7)
    assert (r.get("b.c").value, r.get("b.c").span) == ("x", sp(3, 6, 3, 7))


def test_yaml_duplicate_key_keeps_the_last_value_and_is_reported():
    text = "model: a\ntraining:\n  lr: 1\n  lr: 2\nmodel: b\n"
    r = read_config(Path("d.yaml"), text)
    assert r.get("model").value == "b" and r.get("model").span == sp(5, 8, 5, 9)
    assert r.get("training.lr").value == 2 and r.get("training.lr").key_span == sp(4, 3, 4, 5)
    assert [e.key for e in r.entries] == ["model", "training", "training.lr"]
    assert messages(r) == ["duplicate key 'model' (line 1 and line 5): yaml.safe_load keeps the last value",
                           "duplicate key 'training.lr' (line 3 and line 4): yaml.safe_load keeps the last value"]
    assert r.problems[0].span == sp(5, 1, 5, 6)
    assert {e.key: e.value for e in r.top_level()} == yaml.safe_load(text)


def test_yaml_several_documents_reads_the_first_and_says_safe_load_refuses_it():
    text = "a: 1\n---\nb: 2\n"
    r = read_config(Path("m.yaml"), text)
    assert [(e.key, e.value) for e in r.entries] == [("a", 1)]
    message = one_problem(r)
    assert message.startswith("the file holds more than one YAML document (another starts at line 2)")
    assert r.problem.span == sp(2, 1, 2, 1)
    with pytest.raises(yaml.composer.ComposerError, match="expected a single document"):
        yaml.safe_load(text)


def test_yaml_alias_bomb_is_refused_quickly():
    lines = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    start = time.perf_counter()
    r = read_config(Path("bomb.yaml"), "\n".join(lines) + "\n")
    assert time.perf_counter() - start < 2
    assert r.entries == ()
    assert "YAML aliases expand" in one_problem(r) and "alias bomb" in r.problem.message


def test_yaml_recursive_alias_is_a_problem():
    r = read_config(Path("r.yaml"), "a: &loop\n  self: *loop\n")
    assert r.entries == ()
    assert one_problem(r) == ("not read: recursive YAML alias (the node anchored at line 1, column 4 contains "
                              "itself)")


def test_yaml_python_tags_are_refused_and_never_run(tmp_path: Path):
    marker = tmp_path / "ran"
    text = f"a: !!python/object/apply:os.system ['touch {marker}']\n"
    r = read_config(Path("evil.yaml"), text)
    assert not marker.exists()
    assert r.entries == ()
    assert one_problem(r).startswith("YAML error at line 1, column 4: could not determine a constructor for the tag "
                                     "'tag:yaml.org,2002:python/object/apply:os.system'")


@pytest.mark.parametrize("text, message, span", [
    ("a: [1, 2\nb: 3\n", "YAML error at line 2, column 2: expected ',' or ']', but got ':' (while parsing a flow "
     "sequence at line 1 column 4)", sp(2, 2, 2, 2)),
    ("a:\n\tb: 1\n", "YAML error at line 2, column 1: found character '\\t' that cannot start any token (while "
     "scanning for the next token)", sp(2, 1, 2, 1)),
    ("a: *nowhere\n", "YAML error at line 1, column 4: found undefined alias 'nowhere'", sp(1, 4, 1, 4)),
    ("a: 2024-13-01\n", "YAML error at line 1, column 4: the value '2024-13-01' cannot be built (month must be in "
     "1..12)", sp(1, 4, 1, 4)),
    ("a: \x07\n", "YAML error at line 1, column 4: the character U+0007 is not allowed in YAML (the safe loader "
     "refuses the file)", sp(1, 4, 1, 4)),
    ("- a\n- b\n", "not an args or config file: the top level is a list, not a mapping of keys", sp(1, 1, 2, 4)),
    ("just text\n", "not an args or config file: the top level is a single value, not a mapping of keys",
     sp(1, 1, 1, 10)),
    ("", "not an args or config file: it holds no YAML document (empty, or only comments)", sp(1, 1, 1, 1)),
    ("# only a comment\n", "not an args or config file: it holds no YAML document (empty, or only comments)",
     sp(1, 1, 1, 1)),
    ("---\n", "not an args or config file: the top level is empty (null), not a mapping of keys", sp(2, 1, 2, 1)),
    ("!!set {a, b}\n", "not an args or config file: the top level is a set, not a mapping of keys", sp(1, 1, 1, 13)),
])
def test_yaml_errors_are_problems_with_their_position(text: str, message: str, span: Span):
    r = read_config(Path("bad.yaml"), text)
    assert r.entries == ()
    assert one_problem(r) == message
    assert r.problem.span == span


def test_yaml_nested_too_deep_is_a_problem():
    for text in ("a: " + "[" * 150 + "]" * 150 + "\n", "a: " + "[" * 20000 + "]" * 20000 + "\n"):
        r = read_config(Path("deep.yaml"), text)
        assert r.entries == () and "nested" in one_problem(r) and "deep" in r.problem.message


# --- the file itself ----------------------------------------------------------------------------------------------


def test_unreadable_files_are_problems(tmp_path: Path):
    assert one_problem(read_config(tmp_path / "missing.json")) == "not read: file not found"
    folder = tmp_path / "dir.yaml"
    folder.mkdir()
    assert one_problem(read_config(folder)) == "not read: not a regular file"
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(6 * 1024 * 1024)
    assert one_problem(read_config(big)) == "not read: the file is 6.3 MB, over the 5 MB limit for a config file"
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"a: 1\nb: \x00\x01\x02\n")
    r = read_config(binary)
    assert one_problem(r) == "not read: binary file (it contains NUL bytes), not a JSON or YAML config"
    assert r.problem.span == sp(2, 4, 2, 4)
    latin = tmp_path / "l.yaml"
    latin.write_bytes(b"name: ok\nrun: caf\xe9\n")
    r = read_config(latin)
    assert one_problem(r) == ("not read: not valid UTF-8 (byte 0xe9 at line 2, column 9); the loaders open configs "
                              "as UTF-8")
    assert r.problem.span == sp(2, 9, 2, 10)
    utf16 = tmp_path / "u.json"
    utf16.write_bytes('{"a": 1}'.encode("utf-16"))
    assert one_problem(read_config(utf16)).startswith("not read: the file is UTF-16 encoded")
    assert one_problem(read_config(tmp_path / "acc.cfg", "a: 1\n")).startswith("not read: 'acc.cfg' is not a .json")
    assert read_config(tmp_path / "acc.cfg", "a: 1\n", syntax="yaml").get("a").value == 1


def test_text_given_is_read_instead_of_the_file():
    r = read_config(Path("/nonexistent/ds.json"), '{"train_batch_size": 16}')
    assert r.problems == () and r.get("train_batch_size").value == 16
    assert "over the 5 MB limit" in one_problem(read_config(Path("x.yaml"), "a" * (6 * 1024 * 1024)))
    assert "NUL" in one_problem(read_config(Path("x.yaml"), "a: \x00"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.binary(max_size=300), suffix=st.sampled_from([".json", ".yaml", ".yml"]))
def test_read_config_never_raises_on_arbitrary_bytes(tmp_path_factory, raw: bytes, suffix: str):
    path = tmp_path_factory.mktemp("h") / f"c{suffix}"
    path.write_bytes(raw)
    r = read_config(path)
    assert r.problem is None or "internal error" not in r.problem.message


_YAMLISH = st.text(alphabet=st.sampled_from(list("ab:-[]{},&*!|>'\"#\n\t ?%@`1.e~<=")), max_size=120)


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(_YAMLISH, st.text(max_size=120)), syntax=st.sampled_from(["json", "yaml"]))
def test_read_config_never_raises_on_arbitrary_text(text: str, syntax: str):
    r = read_config(Path("x.cfg"), text, syntax=syntax)
    assert r.problem is None or "internal error" not in r.problem.message
    if r.problem is None and syntax == "yaml":
        loaded = yaml.safe_load(text)
        if all(isinstance(key, str) for key in loaded):  # other keys are named as written, `?` alone is None
            assert {e.key: e.value for e in r.top_level()} == loaded


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
_KEYS = st.text(alphabet="abcxyz_ é\"\\", min_size=1, max_size=6).filter(lambda k: "." not in k)
_DOCS = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(_KEYS, inner, max_size=3)), max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(doc=st.dictionaries(_KEYS, _DOCS, min_size=1, max_size=5), indent=st.sampled_from([None, 1, 4]),
       ascii_only=st.booleans())
def test_json_spans_cover_exactly_the_written_value_and_key(doc: dict, indent, ascii_only: bool):
    text = json.dumps(doc, indent=indent, ensure_ascii=ascii_only)
    r = read_config(Path("p.json"), text)
    assert r.problems == ()
    assert {e.key: e.value for e in r.top_level()} == json.loads(text)
    for e in r.entries:
        assert json.loads(at(text, e.span)) == e.value
        assert json.loads(at(text, e.key_span)) == e.key.split(".")[-1]


@settings(max_examples=150, deadline=None)
@given(doc=st.dictionaries(_KEYS, _DOCS, min_size=1, max_size=5), flow=st.sampled_from([False, True, None]))
def test_yaml_scalar_spans_cover_exactly_the_written_value(doc: dict, flow):
    text = yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True)
    r = read_config(Path("p.yaml"), text)
    assert r.problems == ()
    assert {e.key: e.value for e in r.top_level()} == yaml.safe_load(text)
    for e in r.entries:
        if not isinstance(e.value, (dict, list)):
            assert yaml.safe_load(at(text, e.span, YAML_BREAKS) or "~") == e.value, (text, e)
        assert yaml.safe_load(at(text, e.key_span, YAML_BREAKS)) == e.key.split(".")[-1]


def test_without_pyyaml_a_yaml_config_is_a_problem(monkeypatch):
    from trainlint.launch import configs

    monkeypatch.setitem(sys.modules, "yaml", None)  # what `import yaml` meets when PyYAML is not installed
    configs._loader_class.cache_clear()
    try:
        r = read_config(Path("a.yaml"), "a: 1\n")
    finally:
        configs._loader_class.cache_clear()
    assert one_problem(r) == "not read: PyYAML is not installed, so YAML configs cannot be read (pip install pyyaml)"
    assert read_config(Path("a.json"), '{"a": 1}').get("a").value == 1


def test_importing_the_reader_does_not_import_yaml():
    probe = "import sys, trainlint.launch.configs; print('yaml' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


# --- what kind of file --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, kind", [
    ("ds_zero2_offload.json", "deepspeed"), ("ds_zero3_auto.json", "deepspeed"), ("args_run.json", "args"),
    ("trl_sft_recipe.yaml", "args"), ("yaml_features.yaml", "args"), ("acc_deepspeed_zero3.yaml", "accelerate"),
    ("acc_deepspeed_file.yaml", "accelerate"), ("acc_fsdp_v1.yaml", "accelerate"), ("acc_fsdp_v2.yaml", "accelerate"),
    ("acc_multi_gpu.yaml", "accelerate"),
])
def test_config_kind_of_each_fixture(name: str, kind: str):
    assert config_kind(read_config(FIXTURES / name)) == kind


def test_config_kind_edge_cases():
    assert config_kind(read_config(Path("a.json"), '{"bf16": {"enabled": true}}')) == "deepspeed"
    assert config_kind(read_config(Path("a.json"), '{"optimizer": {"type": "AdamW"}}')) == "deepspeed"
    assert config_kind(read_config(Path("a.json"), '{"bf16": true, "optimizer": "adamw_torch"}')) == "args"
    assert config_kind(read_config(Path("a.json"), '[1]')) == "unknown"
    assert config_kind(read_config(Path("a.json"), '{}')) == "unknown"
    assert config_kind(read_config(Path("a.yaml"), "some key: 1\n")) == "unknown"


# --- DeepSpeed ----------------------------------------------------------------------------------------------------


def test_deepspeed_zero2_with_optimizer_offload():
    s = deepspeed_settings(read_config(FIXTURES / "ds_zero2_offload.json"))
    assert s.stage == (2, sp(6, 14, 6, 15))
    assert s.offload_optimizer == ("cpu", sp(8, 17, 8, 22))
    assert s.offload_param is None
    assert s.micro_batch == (4, sp(18, 37, 18, 38)) and s.grad_accum == (8, sp(16, 34, 16, 35))
    assert s.train_batch is None and s.fp16 is None
    assert s.bf16 == (True, sp(3, 16, 3, 20))
    assert s.reduce_bucket_size == (5e8, sp(12, 27, 12, 30))
    assert s.activation_checkpointing is None and s.optimizer is None


def test_deepspeed_zero3_offload_and_auto_values_kept_as_auto():
    r = read_config(FIXTURES / "ds_zero3_auto.json")
    s = deepspeed_settings(r)
    assert s.stage == (3, sp(13, 18, 13, 19))
    assert s.offload_optimizer == ("cpu", sp(14, 41, 14, 46)) and s.offload_param == ("nvme", sp(15, 37, 15, 43))
    assert s.micro_batch == ("auto", sp(30, 39, 30, 45)) and s.grad_accum == ("auto", sp(27, 36, 27, 42))
    assert s.train_batch == ("auto", sp(29, 25, 29, 31))
    assert s.bf16 == ("auto", sp(7, 25, 7, 31)) and s.fp16 == ("auto", sp(3, 20, 3, 26))
    assert s.optimizer == ("AdamW", sp(9, 17, 9, 24))
    assert s.activation_checkpointing[0] == {"partition_activations": True, "cpu_checkpointing": False}
    assert s.partition_activations == (True, sp(24, 34, 24, 38)) and s.cpu_checkpointing[0] is False
    assert s.prefetch_bucket_size[0] == "auto" and s.max_live_parameters == (1e9, sp(20, 39, 20, 42))
    fills = {e.key: source for e, source in auto_values(r)}
    assert fills == {
        "fp16.enabled": "fp16 or fp16_full_eval", "bf16.enabled": "bf16 or bf16_full_eval",
        "optimizer.params.lr": "learning_rate", "optimizer.params.betas": "[adam_beta1, adam_beta2]",
        "optimizer.params.eps": "adam_epsilon", "optimizer.params.weight_decay": "weight_decay",
        "zero_optimization.reduce_bucket_size": "hidden_size * hidden_size",
        "zero_optimization.stage3_prefetch_bucket_size": "int(0.9 * hidden_size * hidden_size)",
        "zero_optimization.stage3_param_persistence_threshold": "10 * hidden_size",
        "gradient_accumulation_steps": "gradient_accumulation_steps",
        "train_batch_size": "world_size * per_device_train_batch_size * gradient_accumulation_steps",
        "train_micro_batch_size_per_gpu": "per_device_train_batch_size",
        "zero_allow_untested_optimizer": None,  # nothing fills it: DeepSpeed would get the string "auto"
    }


def test_deepspeed_deprecated_and_legacy_forms():
    s = deepspeed_settings(read_config(Path("a.json"), '{"zero_optimization": true}'))
    assert s.stage == (1, sp(1, 23, 1, 27))  # read_zero_config_deprecated: a true is stage 1
    text = '{"zero_optimization": {"stage": 3, "cpu_offload": true, "cpu_offload_param": false}, "bfloat16": ' \
           '{"enabled": true}}'
    s = deepspeed_settings(read_config(Path("a.json"), text))
    assert s.offload_optimizer == ("cpu", sp(1, 51, 1, 55)) and s.offload_param is None
    assert s.bf16 == (True, sp(1, 110, 1, 114))
    both = '{"bf16": {"enabled": false}, "bfloat16": {"enabled": true}}'  # bf16 wins when both are there
    assert deepspeed_settings(read_config(Path("a.json"), both)).bf16[0] is False
    section_only = '{"bf16": {}, "bfloat16": {"enabled": true}}'
    assert deepspeed_settings(read_config(Path("a.json"), section_only)).bf16 is None


def test_deepspeed_config_inline_in_an_args_recipe():
    r = read_config(FIXTURES / "trl_sft_recipe.yaml")
    assert r.get("learning_rate").value == 2.0e-05 and r.get("warmup_ratio").value == "1e-1"
    s = deepspeed_settings(r, prefix="deepspeed")
    assert s.stage == (3, sp(29, 12, 29, 13))
    assert s.offload_param == ("cpu", sp(30, 29, 30, 32))
    assert s.bf16 == ("auto", sp(31, 19, 31, 23)) and s.micro_batch == ("auto", sp(32, 35, 32, 39))
    assert [e.key for e, _ in auto_values(r, prefix="deepspeed")] == ["deepspeed.bf16.enabled",
                                                                       "deepspeed.train_micro_batch_size_per_gpu"]
    top = deepspeed_settings(r)  # without the prefix only the args' own same-named keys are seen
    assert top.stage is None and top.micro_batch is None and top.grad_accum == (4, sp(14, 30, 14, 31))


def _installed_source(module: str) -> str:
    spec = importlib.util.find_spec(module.split(".")[0])
    if spec is None or spec.origin is None:
        pytest.skip(f"{module} is not installed")
    path = Path(spec.origin).parent.joinpath(*module.split(".")[1:]).with_suffix(".py")
    return path.read_text(encoding="utf-8")


def test_auto_table_matches_what_the_installed_transformers_fills():
    source = _installed_source("transformers.integrations.deepspeed")
    filled = set(re.findall(r'fill_(?:match|only)\(\s*"([^"]+)"', source))
    assert filled == set(AUTO_FROM_TRAINING_ARGS) | set(AUTO_FROM_MODEL)


# --- accelerate ---------------------------------------------------------------------------------------------------


def test_accelerate_deepspeed_plugin_settings_inline():
    s = accelerate_settings(read_config(FIXTURES / "acc_deepspeed_zero3.yaml"))
    assert s.distributed_type == ("DEEPSPEED", sp(12, 19, 12, 28))
    assert s.num_processes == (4, sp(18, 16, 18, 17)) and s.num_machines == (1, sp(17, 15, 17, 16))
    assert s.mixed_precision == ("bf16", sp(16, 18, 16, 22))
    ds = s.deepspeed
    assert ds.zero_stage == (3, sp(9, 15, 9, 16))
    assert ds.offload_optimizer_device == ("cpu", sp(5, 29, 5, 32))
    assert ds.offload_param_device == ("none", sp(6, 25, 6, 29))
    assert ds.zero3_init_flag == (True, sp(7, 20, 7, 24)) and ds.deepspeed_config_file is None
    # A DeepSpeed-config key under deepspeed_config is no launch argument: accelerate ignores it.
    assert ds.ignored == (("zero_optimization", sp(10, 3, 10, 20)),)
    assert s.fsdp is None and s.refused_with_config_file() == ()


def test_accelerate_deepspeed_config_file_is_returned_as_written():
    s = accelerate_settings(read_config(FIXTURES / "acc_deepspeed_file.yaml"))
    assert s.deepspeed.deepspeed_config_file == ("configs/ds_zero3_auto.json", sp(3, 26, 3, 52))
    assert s.deepspeed.zero_stage is None and s.deepspeed.ignored == ()
    assert s.num_processes is None  # accelerate: -1, and the launch stops unless --num_processes is given
    assert ACCELERATE_DEFAULTS["num_processes"] == -1
    # accelerate refuses these next to a deepspeed_config_file (DeepSpeedPlugin._deepspeed_config_checks).
    assert s.refused_with_config_file() == (("gradient_accumulation_steps", sp(5, 32, 5, 33)),
                                            ("mixed_precision", sp(9, 18, 9, 22)))
    assert s.fsdp == accelerate_settings(read_config(Path("a.yaml"), "fsdp_config: {}\n")).fsdp
    assert s.fsdp.version is None


def test_accelerate_fsdp_v1():
    s = accelerate_settings(read_config(FIXTURES / "acc_fsdp_v1.yaml"))
    f = s.fsdp
    assert s.distributed_type[0] == "FSDP" and s.num_processes == (8, sp(19, 16, 19, 17))
    assert f.version is None  # FSDP1 by default
    assert f.sharding_strategy == ("SHARD_GRAD_OP", sp(11, 27, 11, 40))
    assert f.offload_params == (True, sp(10, 24, 10, 28))
    assert f.activation_checkpointing is None and f.reshard_after_forward is None
    assert f.auto_wrap_policy[0] == "TRANSFORMER_BASED_WRAP" and f.backward_prefetch[0] == "BACKWARD_PRE"
    assert f.use_orig_params[0] is True and f.sync_module_states[0] is True and f.forward_prefetch[0] is False
    assert s.deepspeed is None


def test_accelerate_fsdp_v2_keys_with_and_without_the_fsdp_prefix():
    f = accelerate_settings(read_config(FIXTURES / "acc_fsdp_v2.yaml")).fsdp
    assert f.version == (2, sp(12, 17, 12, 18))  # `version: 1` then `fsdp_version: 2`: the last written wins
    assert f.reshard_after_forward == (False, sp(8, 31, 8, 36))
    assert f.activation_checkpointing == (True, sp(4, 34, 4, 38))
    assert f.offload_params == (False, sp(7, 19, 7, 24))  # launch.py puts `fsdp_` in front of `offload_params`
    assert f.transformer_layer_cls_to_wrap == ("LlamaDecoderLayer", sp(10, 39, 10, 56))
    assert f.sharding_strategy is None


def test_accelerate_multi_gpu_with_the_legacy_fp16_key():
    s = accelerate_settings(read_config(FIXTURES / "acc_multi_gpu.yaml"))
    assert s.distributed_type == ("MULTI_GPU", sp(3, 19, 3, 28))
    assert s.mixed_precision == ("fp16", sp(8, 7, 8, 11))  # process_config: `fp16: true` means mixed_precision fp16
    assert s.gpu_ids == ("all", sp(4, 10, 4, 13)) and s.num_processes is None
    assert s.deepspeed is None and s.fsdp is None


def test_accelerate_defaults_match_the_installed_accelerate():
    launch = _installed_source("accelerate.commands.launch")
    for flag, default in [("fsdp_version", '"1"'), ("fsdp_sharding_strategy", '"FULL_SHARD"'),
                          ("fsdp_reshard_after_forward", '"true"'), ("fsdp_offload_params", '"false"'),
                          ("fsdp_activation_checkpointing", '"false"')]:
        assert re.search(rf'"--{flag}",[^)]*?default={default}', launch), flag
    assert ACCELERATE_DEFAULTS["fsdp_version"] == 1 and ACCELERATE_DEFAULTS["fsdp_sharding_strategy"] == "FULL_SHARD"
    config_args = _installed_source("accelerate.commands.config.config_args")
    assert "num_processes: int = -1" in config_args
    assert "You need to manually pass in `--num_processes` using this config yaml." in launch
    plugin = _installed_source("accelerate.utils.dataclasses")
    assert 'int(os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", 2))' in plugin
    assert ACCELERATE_DEFAULTS["zero_stage"] == 2


# --- real framework configs (read by path, never copied) ----------------------------------------------------------


def _shared_configs() -> list[Path]:
    return sorted(p for p in SHARED.glob("*/*") if p.suffix in (".yaml", ".yml"))


@pytest.mark.skipif(not SHARED.is_dir(), reason="the shared config sample is not here")
def test_every_shared_framework_config_loads_like_safe_load():
    paths = _shared_configs()
    assert len(paths) == 33
    for path in paths:
        r = read_config(path)
        assert r.problems == (), path
        assert {e.key: e.value for e in r.top_level()} == yaml.safe_load(path.read_text(encoding="utf-8")), path
        assert config_kind(r) == "args", path


@pytest.mark.skipif(not SHARED.is_dir(), reason="the shared config sample is not here")
def test_known_keys_of_shared_configs_have_exact_spans():
    path = SHARED / "llama-factory" / "examples__train_lora__qwen3_lora_sft_ds3.yaml"
    text = path.read_text()
    r = read_config(path)
    ds = r.get("deepspeed")  # followed by a comment on the same line, which is not part of the value
    assert (ds.value, ds.span, ds.key_span) == ("examples/deepspeed/ds_z3_config.json", sp(11, 12, 11, 48),
                                                sp(11, 1, 11, 10))
    assert r.get("learning_rate").value == 1.0e-4 and at(text, r.get("learning_rate").span) == "1.0e-4"
    assert r.get("per_device_train_batch_size").span == sp(31, 30, 31, 31)
    path = SHARED / "axolotl" / "examples__qwen3__qlora-fsdp.yaml"
    text = path.read_text()
    r = read_config(path)
    assert r.get("fsdp").value == ["full_shard", "auto_wrap"] and r.get("fsdp").span == sp(56, 3, 57, 14)
    offload = r.get("fsdp_config.fsdp_offload_params")
    assert (offload.value, offload.span, offload.key_span) == (True, sp(61, 24, 61, 28), sp(61, 3, 61, 22))
    assert r.get("bf16").value == "auto" and r.get("special_tokens").span == sp(68, 16, 68, 16)
    assert at(text, r.get("gradient_checkpointing_kwargs.use_reentrant").span) == "false"
