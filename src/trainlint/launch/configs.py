"""Reading the JSON / YAML configs a launch names (args files, recipes, DeepSpeed, accelerate) safely, with exact spans.

Nothing is ever executed. JSON values come from the stdlib's own pieces (`json.decoder.scanstring` for strings,
`int` / `float` on the number token as `json.scanner` does), one token at a time, under a small scanner of our own
that knows where each token is written. YAML goes through `yaml.SafeLoader`: the file is composed to its
node graph (that is where the marks are), the graph is checked (depth, alias expansion, recursion) and only then
are the values built by the safe constructor. `read_config` never raises: whatever is wrong with the file comes
back as a LaunchProblem, and whatever could still be read comes back as entries.

Spans follow trainlint.diagnostics.Span (1-based line and column, end column exclusive, columns count characters).
A value's span covers what is written: the quotes of a string, the whole `{...}` of a flow mapping, a block mapping
from its first key to the end of its last value, a block scalar (`|`, `>`) from the indicator to the end of its last
line, a value written as an alias (`*base`) the alias itself; a tag (`!!str 5`) is part of the value, an anchor
(`&base`) is not. A key without a value (`key:`) has a zero-width value span just after the colon, which is where a
fix would write one. A BOM is not counted. Keys inherited through `<<: *base` point where they are written, in the
anchored mapping. A key that itself contains a dot is kept as written, so its dotted name is ambiguous with nesting
(no DeepSpeed, accelerate or HF argument name has one). A key YAML 1.1 reads as a non-string (`on:` is True) is
named as written.

What the loaders accept, and so what this module accepts (sources read, not run):
- transformers 5.24.0 `HfArgumentParser.parse_json_file` and accelerate 1.15.0 `HfDeepSpeedConfig` (which is what
  `TrainingArguments(deepspeed="ds.json")` and `accelerate launch` use) read JSON with `json.load`, files opened as
  UTF-8: strict JSON (plus Python's NaN / Infinity), duplicate keys silently keep the last value, a BOM is an error.
- DeepSpeed 0.19.8 `deepspeed/runtime/config.py` `DeepSpeedConfig` reads a config *path* (plain
  `deepspeed.initialize(config="ds.json")`, no transformers) with `hjson.load(..., object_pairs_hook=
  dict_raise_error_on_duplicate_keys)`: comments and trailing commas are accepted there, duplicate keys are an error.
  So a JSON file with `//`, `#` or `/* */` comments or a trailing comma is read here (the values still matter), and
  the reading carries a problem saying transformers and accelerate would refuse it. The rest of hjson (quoteless
  strings, optional commas) is not accepted: such a file is a syntax error here.
- YAML: `yaml.safe_load` everywhere (transformers `parse_yaml_file`, TRL `TrlParser`, accelerate
  `load_config_from_file`): YAML 1.1 scalars (`on`/`yes` are True, `1e-4` without a dot is the *string* "1e-4",
  `1_000` is 1000, `017` is 15, `2024-01-02` is a date), merge keys `<<:`, last duplicate wins, and a file with more
  than one document is refused ("expected a single document in the stream").
"""

from __future__ import annotations

import bisect
import codecs
import functools
import json
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainlint.diagnostics import Span
from trainlint.launch.model import ConfigReading, Entry, LaunchProblem

MAX_BYTES = 5 * 1024 * 1024  # a config is a few kB; anything this big is not one, and is not read
MAX_DEPTH = 100  # real configs nest < 10 deep; this keeps every walk here (and PyYAML's recursion) bounded
MAX_ALIAS_EXPANSION = 100_000  # nodes that YAML aliases add beyond those written ("billion laughs")

_YAML_BREAKS = re.compile("\r\n|[\r\n\x85\u2028\u2029]")  # what PyYAML's reader counts as a line break
_JSON_BREAKS = re.compile("\r\n|[\r\n]")  # JSON whitespace has only \r and \n
_YAML_SPACE = " \t\r\n\x85\u2028\u2029"
_ANCHOR = re.compile(r"&[0-9A-Za-z_-]+")  # PyYAML's scan_anchor: alphanumerics, '-' and '_'


class _Lines:
    """Offsets in the text to 1-based (line, column), columns in characters."""

    def __init__(self, text: str, breaks: re.Pattern[str]) -> None:
        self.starts = [0] + [m.end() for m in breaks.finditer(text)]

    def pos(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset) - 1
        return line + 1, offset - self.starts[line] + 1

    def span(self, start: int, end: int) -> Span:
        return Span(*self.pos(start), *self.pos(end))

    def point(self, offset: int) -> Span:
        return Span(*self.pos(offset), *self.pos(offset))


@dataclass
class _Val:
    """A value with its span; for a mapping, its winning (name, key span, value) pairs in the loader's dict order."""

    value: Any
    span: Span
    pairs: list[tuple[str, Span, _Val]] | None = None


@dataclass
class _Notes:
    """Problems found so far, in the order found, each message once (the first one is ConfigReading.problem)."""

    items: list[tuple[str, Span]]

    def add(self, message: str, span: Span) -> None:
        if all(message != m for m, _ in self.items):
            self.items.append((message, span))


class _Fatal(Exception):
    def __init__(self, message: str, span: Span) -> None:
        super().__init__(message)
        self.message = message
        self.span = span


_START = Span(1, 1, 1, 1)


def read_config(path: Path, text: str | None = None, *, syntax: str | None = None) -> ConfigReading:
    """Every key of a JSON or YAML config with its value and spans; problems as LaunchProblems, never an exception.

    The syntax is chosen by suffix (.json: JSON; .yaml / .yml: YAML) unless `syntax` ("json" or "yaml") says
    otherwise: accelerate reads any `--config_file` that does not end in .json as YAML, so a caller that knows how
    the file is read should say so. `text`, when given, is used instead of the file's contents (an editor buffer).
    """
    path = Path(path)
    notes = _Notes([])
    try:
        entries = _read(path, text, syntax, notes)
    except _Fatal as fatal:  # nothing could be read: that comes first, before what was noticed on the way
        notes.items.insert(0, (fatal.message, fatal.span))
        entries = ()
    except Exception as exc:  # a bug here must cost one file's reading, never the lint run
        notes.add(f"could not read this config (trainlint internal error: {type(exc).__name__}: {exc})", _START)
        entries = ()
    problems = tuple(LaunchProblem(path, span, message) for message, span in notes.items)
    return ConfigReading(path, tuple(entries), problems[0] if problems else None, problems)


def _read(path: Path, text: str | None, syntax: str | None, notes: _Notes) -> list[Entry]:
    kind = (syntax or {".json": "json", ".yaml": "yaml", ".yml": "yaml"}.get(path.suffix.lower(), "")).lower()
    if kind not in ("json", "yaml"):
        raise _Fatal(f"not read: {path.name!r} is not a .json, .yaml or .yml file, and no syntax was given", _START)
    if text is None:
        text = _read_text(path)
    elif len(text) > MAX_BYTES:
        raise _Fatal(f"not read: the text is {len(text) / 1e6:.1f} million characters, over the "
                     f"{MAX_BYTES // 2**20} MB limit for a config file", _START)
    bom = text.startswith("\ufeff")
    if bom:
        text = text[1:]  # spans do not count it, as editors do not show it
    if "\x00" in text:
        lines = _Lines(text, _JSON_BREAKS)
        raise _Fatal("not read: binary file (it contains NUL characters), not a JSON or YAML config",
                     lines.point(text.index("\x00")))
    if kind == "json":
        lines = _Lines(text, _JSON_BREAKS)
        if bom:
            # json.load refuses it ("Unexpected UTF-8 BOM"): transformers and accelerate open the file as UTF-8.
            notes.add("the file starts with a UTF-8 byte-order mark, which json.load refuses (transformers and "
                      "accelerate open JSON configs as plain UTF-8); save it without the BOM", _START)
        root = _Json(text, lines, notes).document()
    else:
        lines = _Lines(text, _YAML_BREAKS)
        root = _read_yaml(text, lines, notes)  # PyYAML skips a leading BOM itself, so it is no problem there
    if root is None:
        return []
    entries: list[Entry] = []
    _emit(root.pairs or [], "", entries)
    return entries


def _emit(pairs: list[tuple[str, Span, _Val]], prefix: str, out: list[Entry], depth: int = 0) -> None:
    for name, key_span, val in pairs:
        key = f"{prefix}.{name}" if prefix else name
        out.append(Entry(key, val.value, val.span, key_span, depth))
        if val.pairs is not None:
            _emit(val.pairs, key, out, depth + 1)


def _read_text(path: Path) -> str:
    """The file's text, decoded as the loaders decode it (UTF-8), or _Fatal saying why not."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise _Fatal("not read: not a regular file", _START)
        if info.st_size > MAX_BYTES:
            raise _Fatal(f"not read: the file is {info.st_size / 1e6:.1f} MB, over the {MAX_BYTES // 2**20} MB "
                         f"limit for a config file", _START)
        raw = path.read_bytes()
    except FileNotFoundError:
        raise _Fatal("not read: file not found", _START) from None
    except PermissionError:
        raise _Fatal("not read: permission denied", _START) from None
    except OSError as exc:
        raise _Fatal(f"not read: {exc.strerror or exc}", _START) from None
    if len(raw) > MAX_BYTES:  # it grew between stat and read
        raise _Fatal(f"not read: the file is over the {MAX_BYTES // 2**20} MB limit for a config file", _START)
    if raw.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):  # before UTF-16: UTF-32-LE starts like it
        raise _Fatal("not read: the file is UTF-32 encoded; transformers, TRL and accelerate open configs as "
                     "UTF-8, so save it as UTF-8", _START)
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise _Fatal("not read: the file is UTF-16 encoded; transformers, TRL and accelerate open configs as "
                     "UTF-8, so save it as UTF-8", _START)
    if b"\x00" in raw:
        prefix = raw[: raw.index(b"\x00")].decode("utf-8", "replace")
        raise _Fatal("not read: binary file (it contains NUL bytes), not a JSON or YAML config",
                     _Lines(prefix, _JSON_BREAKS).point(len(prefix)))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        prefix = raw[: exc.start].decode("utf-8", "replace")
        line, col = _Lines(prefix, _JSON_BREAKS).pos(len(prefix))
        raise _Fatal(f"not read: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at line {line}, column {col}); "
                     f"the loaders open configs as UTF-8", Span(line, col, line, col + 1)) from None


# --- JSON ---------------------------------------------------------------------------------------------------------

_scanstring = json.decoder.scanstring  # the C accelerated one when available
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_BLANKS = re.compile(r"[ \t\r\n]*")
_LITERALS = {"true": True, "false": False, "null": None, "NaN": float("nan"), "Infinity": float("inf"),
             "-Infinity": float("-inf")}  # the last three: Python's json accepts them, so the loaders do
_LITERAL = re.compile(r"-Infinity|Infinity|NaN|true|false|null")
_AFTER_VALUE = set(" \t\r\n,]}/#")


class _Json:
    """Strict JSON with exact positions, plus the comments and trailing commas hjson (DeepSpeed) allows, noted."""

    def __init__(self, text: str, lines: _Lines, notes: _Notes) -> None:
        self.text = text
        self.lines = lines
        self.notes = notes

    def fail(self, message: str, offset: int) -> _Fatal:
        line, col = self.lines.pos(offset)
        return _Fatal(f"JSON syntax error at line {line}, column {col}: {message}", self.lines.point(offset))

    def document(self) -> _Val | None:
        i = self.skip(0)
        if i >= len(self.text):
            raise self.fail("the file is empty (no JSON value)", i)
        root, i = self.value(i, 0, "")
        i = self.skip(i)
        if i < len(self.text):
            raise self.fail("extra data after the top-level value", i)
        if root.pairs is None:
            raise _Fatal(f"not an args or config file: the top level is {_describe(root.value)}, not a mapping of "
                         f"keys", root.span)
        return root

    def skip(self, i: int) -> int:
        text, n = self.text, len(self.text)
        while i < n:
            i = _BLANKS.match(text, i).end()
            c = text[i] if i < n else ""
            if c == "#" or text.startswith("//", i):
                end = _JSON_BREAKS.search(text, i)
                self.comment(i)
                i = end.start() if end else n
            elif text.startswith("/*", i):
                end = text.find("*/", i + 2)
                if end < 0:
                    raise self.fail("unterminated /* comment", i)
                self.comment(i)
                i = end + 2
            else:
                break
        return i

    def comment(self, offset: int) -> None:
        line, col = self.lines.pos(offset)
        self.notes.add(f"comment at line {line}, column {col}: comments are not JSON; DeepSpeed's own reader (hjson) "
                       f"accepts them, but transformers and accelerate read the file with json.load and refuse it",
                       self.lines.point(offset))

    def trailing_comma(self, offset: int) -> None:
        line, col = self.lines.pos(offset)
        self.notes.add(f"trailing comma at line {line}, column {col}: not JSON; DeepSpeed's own reader (hjson) "
                       f"accepts it, but transformers and accelerate read the file with json.load and refuse it",
                       self.lines.span(offset, offset + 1))

    def value(self, i: int, depth: int, path: str) -> tuple[_Val, int]:
        text = self.text
        if depth > MAX_DEPTH:
            raise self.fail(f"nested more than {MAX_DEPTH} levels deep; not read", i)
        c = text[i] if i < len(text) else ""
        if c == "{":
            return self.mapping(i, depth, path)
        if c == "[":
            return self.sequence(i, depth)
        if c == '"':
            value, end = self.string(i)
            return _Val(value, self.lines.span(i, end)), end
        match = _NUMBER.match(text, i) if c in "-0123456789" else None
        if match and not text.startswith("-Infinity", i):
            end = match.end()
            if end < len(text) and text[end] not in _AFTER_VALUE:
                raise self.fail(f"invalid number {text[i:end + 1]!r}", i)
            token = match.group()
            try:  # as json.scanner does: int for an integer, float when there is a fraction or an exponent
                value = float(token) if match.group(1) or match.group(2) else int(token)
            except ValueError as exc:  # over Python's 4300-digit limit for int()
                raise self.fail(f"number cannot be read: {exc}", i) from None
            return _Val(value, self.lines.span(i, end)), end
        match = _LITERAL.match(text, i)
        if match and (match.end() >= len(text) or text[match.end()] in _AFTER_VALUE):
            return _Val(_LITERALS[match.group()], self.lines.span(i, match.end())), match.end()
        if not c:
            raise self.fail("unexpected end of file, a value was expected", i)
        if c == "'":
            raise self.fail("strings must be in double quotes", i)
        raise self.fail(f"unexpected {c!r}, a value was expected", i)

    def string(self, i: int) -> tuple[str, int]:
        try:
            # The stdlib's own string decoder (what json.loads runs): escapes, surrogate pairs, control characters.
            return _scanstring(self.text, i + 1, True)
        except json.JSONDecodeError as exc:
            if exc.pos < len(self.text) and self.text[exc.pos] in "\r\n":
                raise self.fail("unterminated string (a line break before the closing quote)", i) from None
            if exc.msg.startswith("Unterminated string"):
                raise self.fail("unterminated string", i) from None
            raise self.fail(exc.msg, exc.pos) from None

    def mapping(self, start: int, depth: int, path: str) -> tuple[_Val, int]:
        text = self.text
        pairs: list[tuple[str, Span, _Val]] = []
        index: dict[str, int] = {}
        result: dict[str, Any] = {}
        i = self.skip(start + 1)
        if i < len(text) and text[i] == "}":
            return _Val(result, self.lines.span(start, i + 1), pairs), i + 1
        while True:
            if i >= len(text) or text[i] != '"':
                what = "end of file" if i >= len(text) else repr(text[i])
                raise self.fail(f"expected a key in double quotes, found {what}", i)
            key, key_end = self.string(i)
            key_span = self.lines.span(i, key_end)
            i = self.skip(key_end)
            if i >= len(text) or text[i] != ":":
                raise self.fail(f"expected ':' after the key {key!r}", i)
            val, i = self.value(self.skip(i + 1), depth + 1, _dotted(path, key))
            if key in index:
                first = pairs[index[key]][1]
                self.notes.add(f"duplicate key {_dotted(path, key)!r} (line {first.line} and line {key_span.line}): "
                               f"json.load keeps the last value; DeepSpeed's own reader refuses the file", key_span)
                pairs[index[key]] = (key, key_span, val)
            else:
                index[key] = len(pairs)
                pairs.append((key, key_span, val))
            result[key] = val.value
            i = self.skip(i)
            if i < len(text) and text[i] == ",":
                comma = i
                i = self.skip(i + 1)
                if i < len(text) and text[i] == "}":
                    self.trailing_comma(comma)
                    return _Val(result, self.lines.span(start, i + 1), pairs), i + 1
                continue
            if i < len(text) and text[i] == "}":
                return _Val(result, self.lines.span(start, i + 1), pairs), i + 1
            raise self.fail("expected ',' or '}' after a value in an object", i)

    def sequence(self, start: int, depth: int) -> tuple[_Val, int]:
        text = self.text
        items: list[Any] = []
        i = self.skip(start + 1)
        if i < len(text) and text[i] == "]":
            return _Val(items, self.lines.span(start, i + 1)), i + 1
        while True:
            val, i = self.value(i, depth + 1, "")
            items.append(val.value)
            i = self.skip(i)
            if i < len(text) and text[i] == ",":
                comma = i
                i = self.skip(i + 1)
                if i < len(text) and text[i] == "]":
                    self.trailing_comma(comma)
                    return _Val(items, self.lines.span(start, i + 1)), i + 1
                continue
            if i < len(text) and text[i] == "]":
                return _Val(items, self.lines.span(start, i + 1)), i + 1
            raise self.fail("expected ',' or ']' after a value in a list", i)


def _describe(value: Any) -> str:
    if value is None:
        return "empty (null)"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return f"a {type(value).__name__}"


# --- YAML ---------------------------------------------------------------------------------------------------------

_MERGE_TAG = "tag:yaml.org,2002:merge"


@functools.lru_cache(maxsize=1)
def _loader_class() -> type:
    import yaml  # lazily: the lint path must start fast, and most runs read no YAML

    class Loader(yaml.SafeLoader):
        """SafeLoader that also remembers where each alias (`*name`) is written, which the node graph forgets."""

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            # (id(parent node), id(key node) or list index) -> (start, end) offsets of the alias token
            self.alias_at: dict[tuple[int, int], tuple[int, int]] = {}

        def compose_node(self, parent: Any, index: Any) -> Any:
            if parent is not None and index is not None and self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                node = super().compose_node(parent, index)
                slot = id(index) if isinstance(index, yaml.Node) else index
                self.alias_at[(id(parent), slot)] = (event.start_mark.index, event.end_mark.index)
                return node
            return super().compose_node(parent, index)

    return Loader


def _read_yaml(text: str, lines: _Lines, notes: _Notes) -> _Val | None:
    try:
        import yaml
        from yaml.nodes import MappingNode, ScalarNode, SequenceNode
    except ImportError:  # PyYAML is what every loader of these files uses; without it there is no faithful reading
        raise _Fatal("not read: PyYAML is not installed, so YAML configs cannot be read (pip install pyyaml)",
                     _START) from None

    def at_mark(mark: Any) -> Span:
        return lines.point(min(mark.index, len(text))) if mark is not None else _START

    def yaml_error(exc: Exception) -> _Fatal:
        if isinstance(exc, yaml.reader.ReaderError):
            offset = min(exc.position, len(text))
            line, col = lines.pos(offset)
            char = exc.character if isinstance(exc.character, str) else chr(exc.character)
            return _Fatal(f"YAML error at line {line}, column {col}: the character U+{ord(char):04X} is not allowed "
                          f"in YAML (the safe loader refuses the file)", lines.point(offset))
        if isinstance(exc, yaml.MarkedYAMLError):
            mark = exc.problem_mark or exc.context_mark
            what = exc.problem or exc.context or "cannot be read"
            if exc.problem and exc.context:
                where = ""
                if exc.context_mark is not None:
                    where = " at line {} column {}".format(*lines.pos(min(exc.context_mark.index, len(text))))
                what = f"{exc.problem} ({exc.context}{where})"
            if "could not determine a constructor" in what:
                what += " (the safe loader builds only plain data; yaml.safe_load refuses this file too)"
            if mark is None:
                return _Fatal(f"YAML error: {what}", _START)
            line, col = lines.pos(min(mark.index, len(text)))
            return _Fatal(f"YAML error at line {line}, column {col}: {what}", at_mark(mark))
        return _Fatal(f"YAML error: {exc}", _START)

    try:
        loader = _loader_class()(text)
    except yaml.YAMLError as exc:
        raise yaml_error(exc) from None
    try:
        try:
            if not loader.check_node():
                raise _Fatal("not an args or config file: it holds no YAML document (empty, or only comments)", _START)
            root = loader.get_node()
        except RecursionError:
            raise _Fatal(f"not read: nested too deeply (over {MAX_DEPTH} levels)", _START) from None
        except yaml.YAMLError as exc:
            raise yaml_error(exc) from None
        try:
            more = loader.check_node()
            next_mark = loader.peek_event().start_mark if more else None
        except (yaml.YAMLError, RecursionError):
            more, next_mark = True, None
        if more:
            where = f" (another starts at line {lines.pos(next_mark.index)[0]})" if next_mark is not None else ""
            notes.add(f"the file holds more than one YAML document{where}; yaml.safe_load, which transformers, TRL "
                      f"and accelerate use, refuses such a file; only the first document is read here",
                      at_mark(next_mark) if next_mark is not None else _START)

        spans = _yaml_spans(root, text, lines, loader.alias_at, MappingNode, SequenceNode)
        if not isinstance(root, MappingNode):
            kind = "a list" if isinstance(root, SequenceNode) else "a single value"
            if isinstance(root, ScalarNode) and root.tag == "tag:yaml.org,2002:null":
                kind = "empty (null)"
            raise _Fatal(f"not an args or config file: the top level is {kind}, not a mapping of keys", spans[id(root)])
        # Snapshot every mapping's own pairs before the constructor flattens merge keys into them.
        own = {id(node): list(node.value) for node in _mapping_nodes(root, MappingNode, SequenceNode)}
        try:
            loader.construct_object(root, deep=True)
        except yaml.YAMLError as exc:
            raise yaml_error(exc) from None
        except Exception as exc:  # e.g. `2024-13-01` (date out of range), ints over Python's digit limit
            raise _unconstructable(loader, root, exc, lines, ScalarNode, SequenceNode, MappingNode) from None
        objects = loader.constructed_objects
        if not isinstance(objects[root], dict):  # `!!set {a, b}` is a mapping node but not a dict
            raise _Fatal(f"not an args or config file: the top level is {_describe(objects[root])}, not a mapping "
                         f"of keys", spans[id(root)])
        return _Val(objects[root], spans[id(root)],
                    _yaml_pairs(root, "", objects, spans, lines, loader.alias_at, own, notes, MappingNode))
    finally:
        loader.dispose()


def _children(node: Any, mapping: type, sequence: type) -> list[Any]:
    if isinstance(node, mapping):
        return [part for pair in node.value for part in pair]
    if isinstance(node, sequence):
        return list(node.value)
    return []


def _yaml_spans(root: Any, text: str, lines: _Lines, alias_at: dict, mapping: type, sequence: type) -> dict[int, Span]:
    """Every node's span, after checking the graph: depth, recursion and alias expansion (all before constructing)."""
    ends: dict[int, int] = {}
    size: dict[int, int] = {}  # nodes each node expands to, aliases followed
    on_path: set[int] = set()
    stack: list[tuple[Any, list[Any]]] = [(root, _children(root, mapping, sequence))]
    on_path.add(id(root))
    while stack:
        node, todo = stack[-1]
        if todo:
            child = todo.pop()
            if id(child) in on_path:
                line, col = lines.pos(child.start_mark.index)
                raise _Fatal(f"not read: recursive YAML alias (the node anchored at line {line}, column {col} "
                             f"contains itself)", lines.point(child.start_mark.index))
            if id(child) not in ends:
                if len(stack) >= MAX_DEPTH:
                    raise _Fatal(f"not read: nested more than {MAX_DEPTH} levels deep",
                                 lines.point(child.start_mark.index))
                on_path.add(id(child))
                stack.append((child, _children(child, mapping, sequence)))
            continue
        stack.pop()
        on_path.discard(id(node))
        size[id(node)] = 1 + sum(size[id(c)] for c in _children(node, mapping, sequence))
        ends[id(node)] = _yaml_end(node, text, ends, alias_at, mapping, sequence)
    expanded, written = size[id(root)], len(size)
    if expanded - written > MAX_ALIAS_EXPANSION:
        raise _Fatal(f"not read: YAML aliases expand {written:,} written nodes to {expanded:,}, over the "
                     f"{MAX_ALIAS_EXPANSION:,} limit (an alias bomb?)", _START)
    return {key: lines.span(min(_content_start(text, node), ends[key]), ends[key])
            for key, node in _walk_unique(root, mapping, sequence)}


def _node_start(node: Any) -> int:
    return node.start_mark.index


def _content_start(text: str, node: Any) -> int:
    """Where a node's value begins: its mark, past an anchor (`&base`), which names the value but is not part of it."""
    i = node.start_mark.index
    anchor = _ANCHOR.match(text, i)  # a plain scalar cannot start with `&`, so this is an anchor
    if anchor is None:
        return i
    i = anchor.end()
    while i < len(text):  # blanks, line breaks and comments between the anchor and the value
        if text[i] in _YAML_SPACE:
            i += 1
        elif text[i] == "#":
            found = _YAML_BREAKS.search(text, i)
            i = found.start() if found else len(text)
        else:
            break
    return i


def _yaml_end(node: Any, text: str, ends: dict[int, int], alias_at: dict, mapping: type, sequence: type) -> int:
    start, end = node.start_mark.index, min(node.end_mark.index, len(text))
    if isinstance(node, (mapping, sequence)) and not node.flow_style and node.value:
        # A block collection's end mark is where the next token starts, past comments and blank lines: end it
        # where its last value ends instead (the alias token if that value is written as one).
        if isinstance(node, mapping):
            key, last = node.value[-1]
            slot: Any = id(key)
        else:
            last, slot = node.value[-1], len(node.value) - 1
        alias = alias_at.get((id(node), slot))
        return alias[1] if alias else ends[id(last)]
    if getattr(node, "style", None) in ("|", ">") and "+" in text[start:end].split(None, 1)[0]:
        return end  # "keep" chomping (`|+`): the trailing line breaks are part of the value
    while end > start and text[end - 1] in _YAML_SPACE:  # other block scalars end after their line breaks
        end -= 1
    return end


def _walk_unique(root: Any, mapping: type, sequence: type) -> list[tuple[int, Any]]:
    seen: dict[int, Any] = {}
    todo = [root]
    while todo:
        node = todo.pop()
        if id(node) not in seen:
            seen[id(node)] = node
            todo.extend(_children(node, mapping, sequence))
    return list(seen.items())


def _mapping_nodes(root: Any, mapping: type, sequence: type) -> list[Any]:
    return [node for _, node in _walk_unique(root, mapping, sequence) if isinstance(node, mapping)]


def _unconstructable(loader: Any, root: Any, exc: Exception, lines: _Lines, scalar: type, sequence: type,
                     mapping: type) -> _Fatal:
    """Find which scalar the safe constructor could not build (only on this failure path) and say where it is."""
    scalars = sorted((node for _, node in _walk_unique(root, mapping, sequence) if isinstance(node, scalar)),
                     key=_node_start)
    for node in scalars:
        loader.recursive_objects = {}  # the failed construction left its nodes marked as in progress
        try:
            loader.construct_object(node)
        except Exception as inner:
            line, col = lines.pos(node.start_mark.index)
            return _Fatal(f"YAML error at line {line}, column {col}: the value {node.value[:40]!r} cannot be built "
                          f"({inner})", lines.point(node.start_mark.index))
    return _Fatal(f"YAML error: a value cannot be built ({type(exc).__name__}: {exc})", _START)


def _yaml_pairs(node: Any, prefix: str, objects: dict, spans: dict[int, Span], lines: _Lines, alias_at: dict,
                own: dict[int, list], notes: _Notes, mapping: type) -> list[tuple[str, Span, _Val]]:
    """A mapping node's pairs as the constructed dict has them: merged keys first, a repeated key's last value wins."""
    written = [k for k, _ in own.get(id(node), node.value) if k.tag != _MERGE_TAG]
    first_line: dict[Any, int] = {}
    for key_node in written:
        key = objects[key_node]
        if key in first_line:
            name = _dotted(prefix, _key_name(key_node, key))
            line = lines.pos(key_node.start_mark.index)[0]
            notes.add(f"duplicate key {name!r} (line {first_line[key]} and line {line}): yaml.safe_load keeps the "
                      f"last value", spans[id(key_node)])
        else:
            first_line[key] = lines.pos(key_node.start_mark.index)[0]
    pairs: list[tuple[str, Span, _Val]] = []
    index: dict[Any, int] = {}
    for key_node, value_node in node.value:  # flattened by the constructor: merged pairs first, as the dict has them
        key = objects[key_node]
        name = _key_name(key_node, key)
        alias = alias_at.get((id(node), id(key_node)))
        span = lines.span(*alias) if alias else spans[id(value_node)]
        value = objects[value_node]
        children = None
        if isinstance(value_node, mapping) and isinstance(value, dict):
            children = _yaml_pairs(value_node, _dotted(prefix, name), objects, spans, lines, alias_at, own, notes,
                                   mapping)
        pair = (name, spans[id(key_node)], _Val(value, span, children))
        if key in index:
            pairs[index[key]] = pair
        else:
            index[key] = len(pairs)
            pairs.append(pair)
    return pairs


def _key_name(key_node: Any, key: Any) -> str:
    # A key YAML 1.1 reads as something else (`on:` is True, `1:` is 1) is named as written.
    if isinstance(key, str):
        return key
    return str(getattr(key_node, "value", key))


def _dotted(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


# --- what kind of file ---------------------------------------------------------------------------------------------

# Top-level keys only a DeepSpeed config has (deepspeed 0.19.8 runtime/constants.py, runtime/zero/config.py,
# runtime/activation_checkpointing/config.py); none is a TrainingArguments, TRL, axolotl or LLaMA-Factory argument.
_DEEPSPEED_ONLY = frozenset({
    "zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size", "steps_per_print",
    "wall_clock_breakdown", "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer", "gradient_clipping",
    "prescale_gradients", "gradient_predivide_factor", "flops_profiler", "activation_checkpointing", "aio",
    "communication_data_type", "data_efficiency", "curriculum_learning", "compression_training", "comms_logger",
    "tensorboard", "wandb", "csv_monitor", "zero_quantized_weights", "sparse_gradients",
})
_ARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")


def config_kind(reading: ConfigReading) -> str:
    """"accelerate" | "deepspeed" | "args" | "unknown", decided by the top-level keys alone.

    - accelerate: `distributed_type` or `compute_environment` at the top (accelerate 1.15.0
      commands/config/config_args.py: `process_config` requires `distributed_type`; `compute_environment` is the
      first field of every config `accelerate config` writes). Checked first: those are nobody's argument names.
    - deepspeed: a DeepSpeed-only key (`zero_optimization`, `train_micro_batch_size_per_gpu`, ...), or `fp16` /
      `bf16` / `bfloat16` written as a mapping with `enabled`, or `optimizer` / `scheduler` as a mapping with `type`
      (in an args file these are booleans and strings).
    - args: any other non-empty mapping whose keys all look like argument names: an HfArgumentParser JSON/YAML, a TRL
      recipe, an axolotl or LLaMA-Factory config. Nested mappings (`gradient_checkpointing_kwargs`, an inline
      `deepspeed: {...}`) are allowed; they are the values of arguments.
    - unknown: nothing was read, or keys that are not argument names (spaces, dots, non-string keys).
    """
    top = reading.top_level()
    if not top:
        return "unknown"
    names = {e.key: e.value for e in top}
    if "distributed_type" in names or "compute_environment" in names:
        return "accelerate"
    if names.keys() & _DEEPSPEED_ONLY:
        return "deepspeed"
    for key in ("fp16", "bf16", "bfloat16"):
        if isinstance(names.get(key), dict) and "enabled" in names[key]:
            return "deepspeed"
    for key in ("optimizer", "scheduler"):
        if isinstance(names.get(key), dict) and "type" in names[key]:
            return "deepspeed"
    if all(_ARG_NAME.fullmatch(key) for key in names):
        return "args"
    return "unknown"


# The interpretations live in their own modules; they are part of this module's API.
from trainlint.launch.accelerate import (  # noqa: E402
    AccelerateDeepSpeed,
    AccelerateFsdp,
    AccelerateSettings,
    accelerate_settings,
)
from trainlint.launch.deepspeed import (  # noqa: E402
    AUTO_FROM_MODEL,
    AUTO_FROM_TRAINING_ARGS,
    DeepSpeedSettings,
    auto_values,
    deepspeed_settings,
)

__all__ = [
    "MAX_BYTES", "MAX_DEPTH", "MAX_ALIAS_EXPANSION", "read_config", "config_kind",
    "DeepSpeedSettings", "deepspeed_settings", "AUTO_FROM_TRAINING_ARGS", "AUTO_FROM_MODEL", "auto_values",
    "AccelerateSettings", "AccelerateDeepSpeed", "AccelerateFsdp", "accelerate_settings",
]
