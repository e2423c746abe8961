"""Hydra / OmegaConf configs composed statically into bindings (facts.HydraSource says what the script reads).

What is read, as Hydra 1.3 composes (hydra/_internal/defaults_list.py, config_loader_impl.py; read, not run):
- the primary config `<config_path>/<config_name>.yaml`, config_path relative to the script's folder;
- its `defaults:` list, in order, recursively: `- model: llama3` (group `model`, file `model/llama3.yaml`, package
  `model`), `- optim/adamw` (the config `optim/adamw.yaml`, package `optim`), `- base` (a config of the same group),
  `- _self_` (where the file's own keys are merged; when absent, last, as with version_base >= 1.1),
  `- override model: qwen`, `- optional model: x` (a missing file is no error), `- model@backbone: x` and
  `- model@_global_: x` (the package), `- /abs/group: x`, `model: null` (nothing), and a `# @package <pkg>`
  header line; groups nested in a group config are relative to its group;
- the launch's words: `group=option` (a config group: the option chosen), `a.b=value`, `+a.b=value`, `++a.b=value`,
  `~a.b`, `--config-name`/`-cn`, `--config-path`/`-cp`; `hydra.*` keys and `-m`/`--multirun` are Hydra's own;
- `${a.b}` interpolations of plain keys (relative `${.x}`, `${..x}` too), whole or inside a string. An interpolation
  with a resolver (`${oc.env:HOME}`, `${now:%H}`, a custom one) is decided at run time: the value is unknown. `???`
  (OmegaConf's MISSING) is unknown.
Values are read as OmegaConf's YAML loader builds them: PyYAML's SafeLoader plus floats written without a dot
(`1e-5` is the float 1e-05; omegaconf 2.3 `_utils.py` get_yaml_loader's float resolver).

A value keeps the span it is written at (the YAML value, or the launch word after `=` for an override); a config
that cannot be read, a missing group option, an unknown group or a cyclic interpolation is a LaunchProblem
(TL005 in that file); whatever could still be read is bound. Nothing is executed, and nothing of Hydra or OmegaConf
is imported."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainlint.diagnostics import Span
from trainlint.discovery import display as _display
from trainlint.facts.model import HydraSource, ScriptFacts
from trainlint.facts.values import Value
from trainlint.launch.model import LaunchProblem, Word, hydra_binding

_MAX_CONFIGS = 200  # a defaults tree of real repositories has tens of configs; this bounds a loop of includes
_FLOAT = re.compile(r"^[-+]?(?:\d[\d_]*(?:\.\d*)?|\.\d+)[eE][-+]?\d+$")
_INTERPOLATION = re.compile(r"\$\{([^${}]*)\}")
_MISSING = "???"


@dataclass
class Leaf:
    value: Any
    span: Span | None  # in `file`
    file: str  # display path, or the launcher's
    known: bool = True
    assumed: tuple[str, ...] = ()
    why: str = ""


@dataclass
class Composition:
    tree: dict = field(default_factory=dict)  # nested dicts of Leaf
    problems: list[LaunchProblem] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # configs read, in order (display paths)
    notes: list[str] = field(default_factory=list)


def _omegaconf_scalar(value: Any) -> Any:
    if isinstance(value, str) and _FLOAT.match(value):
        return float(value.replace("_", ""))
    return value


def _tree_of(reading, display: str) -> dict:
    """A file's keys as nested dicts of Leaf (the `defaults` list left out)."""
    root: dict = {}
    for entry in reading.entries:
        parts = entry.key.split(".")
        if len(parts) != entry.depth + 1 or (entry.depth == 0 and entry.key == "defaults"):
            continue  # a key with a dot of its own: ambiguous, not read
        node = root
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        if isinstance(entry.value, dict) and entry.value:
            node.setdefault(parts[-1], {})
            continue
        node[parts[-1]] = Leaf(_omegaconf_scalar(entry.value), entry.span, display)
    return root


def _merge(into: dict, other: dict) -> None:
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = _copy(value)


def _copy(value):
    return {k: _copy(v) for k, v in value.items()} if isinstance(value, dict) else value


def _at(tree: dict, package: str, create: bool = True) -> dict | None:
    node = tree
    for part in [p for p in package.split(".") if p]:
        child = node.get(part)
        if not isinstance(child, dict):
            if not create:
                return None
            child = node[part] = {}
        node = child
    return node


def _package_header(path: Path) -> str | None:
    """`# @package _global_` (or a dotted package) on the file's first lines."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for _ in range(5):
                line = handle.readline()
                match = re.match(r"\s*#\s*@package\s+(\S+)", line)
                if match:
                    return match.group(1)
    except OSError:
        return None
    return None


class _Composer:
    def __init__(self, root: Path, read, choices: dict[str, tuple[str, Word | None]], documented: bool = True) -> None:
        self.documented = documented
        self.root = root
        self.read = read  # path -> ConfigReading (launch/configs.py read_config)
        self.choices = choices  # group -> (option, the launch word that chose it) from the command line
        self.out = Composition()
        self.count = 0

    def problem(self, path: Path, span: Span | None, message: str) -> None:
        self.out.problems.append(LaunchProblem(path, span or Span.point(1), message))

    def load(self, group: str, name: str, package: str, optional: bool = False, where: tuple[Path, Span] | None = None,
             explicit_package: bool = False) -> None:
        self.count += 1
        if self.count > _MAX_CONFIGS:
            if self.count == _MAX_CONFIGS + 1:
                self.problem(where[0] if where else self.root, where[1] if where else None,
                             f"more than {_MAX_CONFIGS} configs in the defaults tree (a loop?): the rest is not read")
            return
        rel = f"{group}/{name}" if group else name
        path = self.root / f"{rel}.yaml"
        if not path.is_file() and (self.root / f"{rel}.yml").is_file():
            path = self.root / f"{rel}.yml"
        if not path.is_file():
            if not optional:
                if where is not None and self.documented:
                    self.problem(where[0], where[1], f"config {rel}.yaml is not in {_display(self.root)}: Hydra "
                                                     f"fails with MissingConfigException")
                else:
                    self.out.notes.append(f"config {rel}.yaml is not in {_display(self.root)}")
            return
        reading = self.read(path)
        display = _display(path)
        self.out.files.append(display)
        for problem in reading.problems:
            self.out.problems.append(problem)
        if not explicit_package:
            header = _package_header(path)
            if header is not None:
                package = "" if header == "_global_" else group.replace("/", ".") if header == "_group_" else header
        own = _tree_of(reading, display)
        entry = reading.get("defaults")
        items = entry.value if entry is not None and entry.depth == 0 else []
        if not isinstance(items, list):
            self.problem(path, entry.span, "the defaults list is not a list")
            items = []
        span = entry.span if entry is not None else None
        overrides = {}
        for item in items:
            if isinstance(item, dict) and len(item) == 1:
                key, value = next(iter(item.items()))
                if isinstance(key, str) and key.startswith("override "):
                    overrides[self._group(group, key[len("override "):].strip().split("@")[0])] = value
        merged_self = False
        for item in items:
            if item == "_self_":
                self._merge_own(own, package)
                merged_self = True
                continue
            self._default(item, group, package, overrides, path, span)
        if not merged_self:
            self._merge_own(own, package)

    def _merge_own(self, own: dict, package: str) -> None:
        _merge(_at(self.out.tree, package), own)

    @staticmethod
    def _group(parent: str, group: str) -> str:
        if group.startswith("/"):
            return group.strip("/")
        return f"{parent}/{group}".strip("/") if parent else group.strip("/")

    def _default(self, item, parent: str, parent_package: str, overrides: dict, path: Path, span: Span | None) -> None:
        where = (path, span or Span.point(1))
        if isinstance(item, str):
            rel = self._group(parent, item)
            group, _, name = rel.rpartition("/")
            self.load(group, name, group.replace("/", "."), where=where)
            return
        if not (isinstance(item, dict) and len(item) == 1):
            self.problem(path, span, f"a defaults entry Hydra does not read: {item!r}")
            return
        key, option = next(iter(item.items()))
        if not isinstance(key, str):
            return
        optional = False
        words = key.split()
        if words and words[0] == "override":
            return  # applied where the group is first listed (above)
        if words and words[0] == "optional":
            optional, key = True, " ".join(words[1:])
        group_key, _, package = key.partition("@")
        group = self._group(parent, group_key)
        if group in self.choices:
            option = self.choices[group][0]
        elif group in overrides:
            option = overrides[group]
        if option is None:
            return
        if not isinstance(option, str):
            self.out.notes.append(f"defaults entry {key}: {option!r} (several options) is not composed")
            return
        if package:
            pkg = "" if package == "_global_" else group.replace("/", ".") if package == "_group_" else \
                ".".join(p for p in (parent_package, package) if p)
        else:
            pkg = group.replace("/", ".")
        self.load(group, option, pkg, optional, where, explicit_package=bool(package))


def _parse_override_value(text: str) -> tuple[bool, Any]:
    """A value as Hydra's override grammar reads it: null, true/false, int, float, quoted and plain strings,
    `[a,b]` lists and `{a:1}` dicts (read as YAML flow)."""
    lowered = text.strip().lower()
    if lowered == "null":
        return True, None
    if lowered in ("true", "false"):
        return True, lowered == "true"
    try:
        return True, int(text.replace("_", ""))
    except ValueError:
        pass
    try:
        number = float(text)
        return True, number
    except ValueError:
        pass
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return True, text[1:-1]
    if text.startswith(("[", "{")):
        try:
            import yaml

            return True, yaml.safe_load(text)
        except Exception:  # noqa: BLE001 - a value Hydra's grammar reads and YAML does not: unknown
            return False, None
    if any(c in text for c in "*?,") and not text.startswith("${"):
        return False, None  # a sweep (`lr=1e-4,1e-5`) or a glob: several runs
    return True, text


def _value_span(word: Word) -> Span:
    """Where the value of `key=value` is written: after the `=` when the word is written plainly (as
    launch/bind.py `_inline` places `--flag=value`), else the word's own origin or span."""
    name, _, _ = word.text.partition("=")
    if word.raw == word.text and word.origin is None:
        return Span(word.span.line, word.span.col + len(name) + 1, word.span.end_line, word.span.end_col)
    return word.origin or word.span


def _set(tree: dict, path: str, leaf: Leaf, delete: bool = False) -> None:
    parts = path.split(".")
    node = _at(tree, ".".join(parts[:-1]))
    if delete:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = leaf


def _leaves(tree: dict, prefix: str = ""):
    for key, value in tree.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            yield from _leaves(value, path)
        else:
            yield path, value


def _lookup(tree: dict, path: str):
    node: Any = tree
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


class _Interpolator:
    def __init__(self, tree: dict, out: Composition, root: Path) -> None:
        self.tree = tree
        self.out = out
        self.root = root
        self.done: set[str] = set()
        self.visiting: list[str] = []

    def leaf(self, path: str, leaf: Leaf) -> Leaf:
        if path in self.done or not leaf.known:
            return leaf
        if isinstance(leaf.value, str) and leaf.value == _MISSING:
            leaf.known, leaf.value, leaf.why = False, None, f"{path} is ??? (a value the run must be given)"
        elif isinstance(leaf.value, str) and "${" in leaf.value:
            if path in self.visiting:
                cycle = " -> ".join(self.visiting[self.visiting.index(path):] + [path])
                self.out.problems.append(LaunchProblem(Path(leaf.file), leaf.span or Span.point(1),
                                                       f"cyclic interpolation {cycle}: OmegaConf fails resolving it"))
                leaf.known, leaf.value, leaf.why = False, None, "cyclic interpolation"
                return leaf
            self.visiting.append(path)
            try:
                self._resolve(path, leaf)
            finally:
                self.visiting.pop()
        self.done.add(path)
        return leaf

    def _resolve(self, path: str, leaf: Leaf) -> None:
        text = leaf.value
        matches = list(_INTERPOLATION.finditer(text))
        whole = len(matches) == 1 and matches[0].group(0) == text
        if not matches or text.count("${") != len(matches):
            leaf.known, leaf.value, leaf.why = False, None, f"{text!r}: a nested interpolation, decided at run time"
            return
        pieces: list[str] = []
        last = 0
        for match in matches:
            ref = match.group(1).strip()
            if ":" in ref or not ref:
                leaf.known, leaf.value, leaf.why = False, None, f"{text!r}: a resolver, decided at run time"
                return
            target_path = self._target(path, ref)
            target = _lookup(self.tree, target_path) if target_path else None
            if target is None:
                leaf.known, leaf.value, leaf.why = False, None, f"{text!r}: {ref} is not in the config"
                return
            if isinstance(target, dict):
                leaf.known, leaf.value, leaf.why = False, None, f"{text!r}: a node, not read"
                return
            target = self.leaf(target_path, target)
            if not target.known:
                leaf.known, leaf.value, leaf.why = False, None, target.why or f"{ref} is not known"
                return
            if whole:
                leaf.value, leaf.span, leaf.file = target.value, target.span, target.file
                leaf.assumed = tuple(dict.fromkeys(leaf.assumed + target.assumed))
                return
            pieces.append(text[last:match.start()])
            value = target.value
            pieces.append("None" if value is None else str(value).lower() if isinstance(value, bool) else str(value))
            leaf.assumed = tuple(dict.fromkeys(leaf.assumed + target.assumed))
            last = match.end()
        pieces.append(text[last:])
        leaf.value = "".join(pieces)

    @staticmethod
    def _target(path: str, ref: str) -> str | None:
        if not ref.startswith("."):
            return ref
        dots = len(ref) - len(ref.lstrip("."))
        base = path.split(".")[:-1]  # the node holding the key
        if dots - 1 > len(base):
            return None
        base = base[:len(base) - (dots - 1)]
        rest = ref[dots:]
        return ".".join(base + ([rest] if rest else [])) or None


def _config_root(source: HydraSource, script: Path, config_path: str | None) -> Path | None:
    if config_path is None:
        return None
    if config_path.startswith(("pkg://", "file://")):
        config_path = config_path.split("://", 1)[1] if config_path.startswith("file://") else ""
        if not config_path:
            return None
    path = Path(config_path)
    return path if path.is_absolute() else (script.parent / path)


def compose(source: HydraSource, script: Path, words: list[Word], file: str, base_dir: Path, read,
            documented: bool = True) -> Composition:
    """The config `source` reads under a launch whose script words are `words` (written in `file`). `documented`:
    False when no launch was found and the config is composed as the script names it; a group option that is not
    there is then a note, not a problem (a defaults list may name a placeholder every documented run overrides)."""
    out = Composition()
    if not source.known:
        out.notes.append(f"{source.variable}: the config's path or name is not a literal; not composed")
        return out
    config_path, config_name = source.config_path, source.config_name
    overrides: list[tuple[str, Word | None]] = [(o, None) for o in source.overrides]
    unknown_keys: list[tuple[str, Word]] = []
    if source.cli:
        i = 0
        while i < len(words):
            word = words[i]
            text = word.text
            i += 1
            if text is None:
                key = word.raw.split("=", 1)[0].lstrip("+~") if "=" in (word.raw or "") else ""
                if key and "$" not in key and not key.startswith("-"):
                    unknown_keys.append((key, word))  # `model._target_=${TARGET}`: that key is not known
                else:
                    out.notes.append(f"an argument is not known here ({word.note or 'set at run time'})")
                continue
            flag, eq, rest = text.partition("=")
            if flag in ("--config-name", "-cn", "--config-path", "-cp", "--config-dir", "-cd"):
                value = rest if eq else (words[i].text if i < len(words) else None)
                i += 0 if eq else 1
                if flag in ("--config-name", "-cn"):
                    config_name = value
                elif flag in ("--config-path", "-cp"):
                    config_path = value
                continue
            if text.startswith("-"):
                continue  # -m / --multirun, --cfg, --info...: Hydra's own
            if "=" in text or text.startswith("~"):
                overrides.append((text, word))
    if source.kind == "load":
        composition = Composition()
        for name in source.files:
            reading = read(name)
            if reading is None:
                composition.problems.append(LaunchProblem(Path(base_dir) / name, Span.point(1),
                                                          f"OmegaConf.load({name!r}): the file does not exist"))
                continue
            display = _display(reading.file)
            composition.files.append(display)
            composition.problems.extend(reading.problems)
            _merge(composition.tree, _tree_of(reading, display))
        root = base_dir
    else:
        if config_name is not None and config_name.endswith((".yaml", ".yml")):
            config_name = config_name.rsplit(".", 1)[0]  # Hydra drops the extension (`config_name="train.yaml"`)
        root = _config_root(source, script, config_path)
        if root is None or config_name is None:
            out.notes.append(f"{source.variable}: no config_path / config_name to compose")
            return out
        choices: dict[str, tuple[str, Word | None]] = {}
        plain: list[tuple[str, Word | None]] = []
        for text, word in overrides:
            key, _, value = text.lstrip("+").partition("=")
            if not text.startswith("~") and (root / key).is_dir() and "." not in key:
                choices[key] = (value, word)
            else:
                plain.append((text, word))
        overrides = plain
        composer = _Composer(root, lambda p: read(str(p)), choices, documented)
        if not (root / f"{config_name}.yaml").is_file() and not (root / f"{config_name}.yml").is_file():
            if not documented:
                out.notes.append(f"the Hydra config {config_name}.yaml is not in {_display(root)}")
                return out
            composer.out.problems.append(LaunchProblem(script, source.span or Span.point(1),
                                                       f"the Hydra config {config_name}.yaml is not in "
                                                       f"{_display(root)}: Hydra fails with MissingConfigException"))
        else:
            composer.load("", config_name, "")
            for group, (option, word) in choices.items():  # `+group=option` for a group the defaults do not list
                if _lookup(composer.out.tree, group.replace("/", ".")) is None and option:
                    composer.load(group, option, group.replace("/", "."), optional=True)
        composition = composer.out
    for text, word in overrides:
        delete = text.startswith("~")
        key, eq, value = text.lstrip("~+").partition("=")
        if not key or key.startswith("hydra.") or key == "hydra":
            continue
        if delete:
            _set(composition.tree, key, Leaf(None, None, ""), delete=True)
            continue
        ok, parsed = _parse_override_value(value)
        if word is not None:
            leaf = Leaf(parsed, _value_span(word), file, ok, _assumed(word), "" if ok else f"{text}: not read")
        else:
            leaf = Leaf(parsed, source.span, "", ok, (), "" if ok else f"{text}: not read")
        _set(composition.tree, key, leaf)
    for key, word in unknown_keys:
        if not key.startswith("hydra."):
            if source.kind != "load" and "." not in key and (root / key).is_dir():
                composition.notes.append(f"{key}: the config group's option is not known here; not composed")
                for path, leaf in _leaves(_at(composition.tree, key)):
                    leaf.known, leaf.value, leaf.why = False, None, f"{key} is chosen by {word.raw}"
                continue
            _set(composition.tree, key, Leaf(None, word.origin or word.span, file, False, (),
                                             word.note or f"{word.raw}: not known here"))
    interpolator = _Interpolator(composition.tree, composition, root)
    for path, leaf in list(_leaves(composition.tree)):
        interpolator.leaf(path, leaf)
    composition.notes = out.notes + composition.notes
    return composition


def _assumed(word: Word) -> tuple[str, ...]:
    """The defaults the word rests on, said (as launch/bind.py `assumed`)."""
    return tuple(dict.fromkeys(a.said(_display(Path(a.file))) for a in word.assumed))


def hydra_bindings(facts: ScriptFacts, script: Path | None, words: list[Word], file: str, base_dir: Path,
                   read, facts_file: str, documented: bool = True
                   ) -> tuple[list[tuple[str, Value]], list[LaunchProblem], list[str], list[str]]:
    """The bindings of every config the script reads, composed under the launch's words: (bindings, problems,
    files read, notes)."""
    script = script if script is not None else Path(facts.path).resolve()
    bindings: list[tuple[str, Value]] = []
    problems: list[LaunchProblem] = []
    files: list[str] = []
    notes: list[str] = []
    for source in facts.hydra:
        composition = compose(source, script, words, file, base_dir, read, documented)
        problems += composition.problems
        files += composition.files
        notes += composition.notes
        for path, leaf in _leaves(composition.tree):
            where = leaf.file or facts_file
            origin = leaf.span.in_file(where) if leaf.span is not None and where != facts_file else leaf.span
            via = f"hydra config {leaf.file}" if leaf.file and leaf.file != file else f"launch {file or 'override'}"
            if leaf.known:
                bindings.append((hydra_binding(source.variable, path), Value("known", leaf.value, origin, via,
                                                                            leaf.assumed)))
            else:
                bindings.append((hydra_binding(source.variable, path), Value("unknown", None, origin, via)))
                if leaf.why:
                    notes.append(f"{source.variable}.{path}: {leaf.why}")
    return bindings, problems, list(dict.fromkeys(files)), notes
