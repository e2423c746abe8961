"""Generate src/trainlint/knowledge/arguments.json: the fields of transformers' / TRL's argument dataclasses, per version.

A dev tool, never on the lint path. It reads the library *source files* with `ast` (nothing is imported, so any
release can be read): transformers' `training_args.py` / `training_args_seq2seq.py` and TRL's `*_config.py`,
`model_config.py` and the `ScriptArguments` module, following base classes, `field(...)` calls and annotations. Each
field gets the kind HfArgumentParser gives it (its `_parse_dataclass_field` rules, emulated on the annotation), its
default (a JSON value, or a marker) and the line it is declared on.

    python bench/gen_argument_fields.py                 # download (pip download --no-deps) what is missing, write JSON
    python bench/gen_argument_fields.py --check         # exit 1 when the checked-in JSON differs from a fresh run
    PYTHONPATH=src python bench/gen_argument_fields.py --verify-imported   # vs the transformers/trl importable here

--verify-imported checks, for every class read for the imported trl version (and TrainingArguments /
Seq2SeqTrainingArguments): the field set and literal defaults against `dataclasses.fields()`, the argparse actions
HfArgumentParser builds (option strings, nargs, const, choices, `--no_` complements, parser defaults),
`convert_cli` against `parse_known_args` for a few words per kind, and `effective_values` against the constructed
object. Older releases are checked by installing them aside, e.g.

    pip install --no-deps --target /tmp/old transformers==4.46.3 trl==0.12.2 huggingface_hub==0.26.5 \
        tokenizers==0.20.3 datasets==4.0.0 requests urllib3 idna charset_normalizer certifi
    PYTHONPATH=/tmp/old:src python bench/gen_argument_fields.py --verify-imported

TRL before 0.12 was checked the same way, with releases of that time beside it (the current datasets / peft need a
newer huggingface_hub), e.g. for trl 0.8.6:

    pip install --no-deps --target /tmp/old-086 trl==0.8.6 transformers==4.38.2 huggingface_hub==0.21.4 \
        tokenizers==0.15.2 tyro==0.8.3 docstring_parser shtab datasets==2.18.0 pyarrow_hotfix peft==0.10.0 \
        aiohttp aiosignal frozenlist multidict yarl propcache aiohappyeyeballs attrs \
        requests urllib3 idna charset_normalizer certifi

(trl 0.7.0 imports peft's `prepare_model_for_int8_training`: peft==0.7.1 there; trl 0.9.6-0.11.4 with
transformers 4.44.2, huggingface_hub 0.24.6, tokenizers 0.19.1.)

Sources are cached under $TRAINLINT_ARGSRC (default /tmp/trainlint-argsrc/<lib>-<version>/). Each version is stored
as its differences from the previous one (the first in full); the output depends only on the source text.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import importlib
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "trainlint" / "knowledge" / "arguments.json"
CACHE = Path(os.environ.get("TRAINLINT_ARGSRC", "/tmp/trainlint-argsrc"))

# Every release from transformers 4.36.0 / trl 0.7.0 on, as `pip index versions` lists them, plus the yanked X.Y.0
# releases it leaves out (transformers 4.46.0, 4.52.0, 4.57.0, 5.10.0, which `pip download` still fetches; no trl
# release from 0.7.0 on is yanked, and `pip download --no-deps trl==` 0.9.0, 0.9.1, 0.9.5, 0.10.0 finds nothing): patch
# releases change fields too (transformers 4.57.0-4.57.4 `lr_scheduler_kwargs: Union[dict[str, Any], str]`, which
# HfArgumentParser turns into type=dict, fixed in 4.57.5), and a range pin resolved to "X.Y.0"
# (versions.resolve_spec) must be answered by that very release.
TRANSFORMERS_VERSIONS = [
    "4.36.0", "4.36.1", "4.36.2", "4.37.0", "4.37.1", "4.37.2", "4.38.0", "4.38.1", "4.38.2", "4.39.0", "4.39.1",
    "4.39.2", "4.39.3", "4.40.0", "4.40.1", "4.40.2", "4.41.0", "4.41.1", "4.41.2", "4.42.0", "4.42.1", "4.42.2",
    "4.42.3", "4.42.4", "4.43.0", "4.43.1", "4.43.2", "4.43.3", "4.43.4", "4.44.0", "4.44.1", "4.44.2", "4.45.0",
    "4.45.1", "4.45.2", "4.46.0", "4.46.1", "4.46.2", "4.46.3", "4.47.0", "4.47.1", "4.48.0", "4.48.1", "4.48.2",
    "4.48.3", "4.49.0", "4.50.0", "4.50.1", "4.50.2", "4.50.3", "4.51.0", "4.51.1", "4.51.2", "4.51.3", "4.52.0",
    "4.52.1", "4.52.2", "4.52.3", "4.52.4", "4.53.0", "4.53.1", "4.53.2", "4.53.3", "4.54.0", "4.54.1", "4.55.0",
    "4.55.1", "4.55.2", "4.55.3", "4.55.4", "4.56.0", "4.56.1", "4.56.2", "4.57.0", "4.57.1", "4.57.2", "4.57.3",
    "4.57.4", "4.57.5", "4.57.6", "5.0.0", "5.1.0", "5.2.0", "5.3.0", "5.4.0", "5.5.0", "5.5.1", "5.5.2", "5.5.3",
    "5.5.4", "5.6.0", "5.6.1", "5.6.2", "5.7.0", "5.8.0", "5.8.1", "5.9.0", "5.10.0", "5.10.1", "5.10.2", "5.10.4",
    "5.11.0", "5.12.0", "5.12.1", "5.13.0", "5.13.1", "5.14.0", "5.14.1", "5.15.0", "5.15.1", "5.16.0", "5.16.1",
    "5.17.0", "5.18.0", "5.19.0", "5.20.0", "5.20.1", "5.20.2", "5.21.0", "5.21.1", "5.22.0", "5.22.1", "5.22.2",
    "5.23.0", "5.24.0", "5.25.0",
]
TRL_VERSIONS = [
    "0.7.0", "0.7.1", "0.7.2", "0.7.3", "0.7.4", "0.7.5", "0.7.6", "0.7.7", "0.7.8", "0.7.9", "0.7.10", "0.7.11",
    "0.8.0", "0.8.1", "0.8.2", "0.8.3", "0.8.4", "0.8.5", "0.8.6", "0.9.2", "0.9.3", "0.9.4", "0.9.6", "0.10.1",
    "0.11.0", "0.11.1", "0.11.2", "0.11.3", "0.11.4",
    "0.12.0", "0.12.1", "0.12.2", "0.13.0", "0.14.0", "0.15.0", "0.15.1", "0.15.2", "0.16.0", "0.16.1", "0.17.0",
    "0.18.0", "0.18.1", "0.18.2", "0.19.0", "0.19.1", "0.20.0", "0.21.0", "0.22.0", "0.22.1", "0.22.2", "0.23.0",
    "0.23.1", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.26.1", "0.26.2", "0.27.0", "0.27.1", "0.27.2", "0.28.0",
    "0.29.0", "0.29.1", "1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0", "1.5.0", "1.5.1", "1.6.0", "1.7.0", "1.7.1",
    "1.8.0", "1.9.0", "1.9.1", "1.9.2", "1.10.0", "1.11.0", "1.12.0", "1.13.0", "1.14.0", "1.14.1", "1.14.2",
    "1.15.0", "1.16.0",
]
VERSIONS = {"transformers": TRANSFORMERS_VERSIONS, "trl": TRL_VERSIONS}

# Which classes are read. transformers: these two, by file. TRL: every dataclass in these files (globs relative to
# the wheel root), plus any dataclass a read class inherits from (trl 0.9.2-0.9.6 trainer/utils.py
# OnpolicyRuntimeConfig, 0.10.1-0.11.4 OnPolicyConfig there). A file a release lacks gives nothing for that release:
# trainer/training_configs.py holds RewardConfig in 0.7.2-0.7.9 only (trainer/reward_config.py from 0.7.10),
# trainer/model_config.py starts in 0.7.11, commands/cli_utils.py (the ScriptArguments dataclasses) in 0.8.0,
# trl/utils.py ScriptArguments in 0.12.0; 0.7.0 and 0.7.1 have only PPOConfig and DDPOConfig.
TRANSFORMERS_CLASSES = {"TrainingArguments": "transformers/training_args.py",
                        "Seq2SeqTrainingArguments": "transformers/training_args_seq2seq.py"}
TRL_FILES = ("trl/trainer/*_config.py", "trl/trainer/training_configs.py", "trl/experimental/**/*_config.py", "trl/scripts/utils.py",
             "trl/commands/cli_utils.py", "trl/utils.py")
ENUM_BASES = {"Enum", "ExplicitEnum", "IntEnum", "StrEnum"}


def vkey(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


# --------------------------------------------------------------------------------------------------------------
# Getting the sources
# --------------------------------------------------------------------------------------------------------------

def source_root(lib: str, version: str, download: bool) -> Path:
    root = CACHE / f"{lib}-{version}"
    marker = root / ".complete"
    if marker.exists():
        return root
    if not download:
        raise SystemExit(f"missing sources for {lib} {version} under {root} (run without --no-download)")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", f"{lib}=={version}", "-d", tmp],
                       check=True)
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            for name in zf.namelist():
                if not name.endswith(".py"):
                    continue
                parts = name.split("/")
                if lib == "transformers" and not (len(parts) == 2 or (len(parts) == 3 and parts[1] == "utils")):
                    continue  # the top-level modules and utils/ hold every class and enum read here
                if parts[0] != lib:
                    continue
                zf.extract(name, root)
    marker.write_text(version)
    return root


# --------------------------------------------------------------------------------------------------------------
# Modules, classes and names
# --------------------------------------------------------------------------------------------------------------

@dataclass
class Module:
    rel: str                      # "transformers/training_args.py"
    tree: ast.Module
    text: str
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)   # local name -> (module dotted, name)
    consts: dict[str, Any] = field(default_factory=dict)                # module-level literal assignments
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)


class Package:
    """The parsed modules of one release of one library, parsed on demand."""

    def __init__(self, lib: str, version: str, root: Path) -> None:
        self.lib, self.version, self.root = lib, version, root
        self._mods: dict[str, Module | None] = {}

    def module(self, rel: str) -> Module | None:
        if rel not in self._mods:
            path = self.root / rel
            if not path.is_file():
                self._mods[rel] = None
            else:
                text = path.read_text(encoding="utf-8")
                mod = Module(rel, ast.parse(text), text)
                dotted = rel[:-3].replace("/", ".")
                package = dotted.rsplit(".", 1)[0] if not rel.endswith("__init__.py") else dotted[: -len(".__init__")]
                for node in mod.tree.body:
                    _collect_top(mod, node, package)
                self._mods[rel] = mod
        return self._mods[rel]

    def rel_of(self, dotted: str) -> str | None:
        for cand in (dotted.replace(".", "/") + ".py", dotted.replace(".", "/") + "/__init__.py"):
            if (self.root / cand).is_file():
                return cand
        return None

    def glob(self, pattern: str) -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.glob(pattern) if p.is_file())


def _collect_top(mod: Module, node: ast.stmt, package: str) -> None:
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
            base = ".".join(parts + ([node.module] if node.module else []))
        for alias in node.names:
            mod.imports[alias.asname or alias.name] = (base, alias.name)
    elif isinstance(node, ast.ClassDef):
        mod.classes[node.name] = node
    elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        try:
            mod.consts[node.targets[0].id] = ast.literal_eval(node.value)
        except (ValueError, SyntaxError, TypeError):
            pass
    elif isinstance(node, (ast.If, ast.Try, ast.With)):
        for sub in [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                    *[s for h in getattr(node, "handlers", []) for s in h.body]]:
            if isinstance(sub, (ast.ImportFrom, ast.ClassDef, ast.If, ast.Try, ast.With)):
                _collect_top(mod, sub, package)


def _name_of(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


@dataclass(frozen=True)
class ClassRef:
    lib: str
    rel: str
    name: str


def resolve_class(pkgs: dict[str, Package], lib: str, mod: Module, name: str, depth: int = 0) -> ClassRef | None:
    """Where the class called `name` in module `mod` is defined (following imports and re-exports)."""
    if depth > 8:
        return None
    if name in mod.classes:
        return ClassRef(lib, mod.rel, name)
    if name not in mod.imports:
        return None
    dotted, orig = mod.imports[name]
    top = dotted.split(".")[0]
    if top not in pkgs:
        return None
    pkg = pkgs[top]
    if not pkg.root.is_dir():
        return ClassRef(top, "?", orig)  # another library, referred to but not read here
    rel = pkg.rel_of(dotted)
    if rel is None:
        # `from transformers.x import Y` where x is a package: try the submodule named Y's file
        return None
    target = pkg.module(rel)
    if target is None:
        return None
    if orig in target.classes:
        return ClassRef(top, rel, orig)
    if orig in target.imports:
        return resolve_class(pkgs, top, target, orig, depth + 1)
    # lazy `_import_structure` packages (transformers/__init__.py, trl/__init__.py): find "module": [... name ...]
    found = _lazy_export(pkg, rel, orig)
    if found:
        sub = pkg.module(found)
        if sub is not None:
            return resolve_class(pkgs, top, sub, orig, depth + 1)
    return None


def _lazy_export(pkg: Package, rel: str, name: str) -> str | None:
    mod = pkg.module(rel)
    if mod is None or not rel.endswith("__init__.py"):
        return None
    base = rel[: -len("__init__.py")]
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.List):
                    if any(isinstance(e, ast.Constant) and e.value == name for e in v.elts):
                        cand = base + k.value.replace(".", "/")
                        for c in (cand + ".py", cand + "/__init__.py"):
                            if (pkg.root / c).is_file():
                                return c
    return None


def is_dataclass_def(node: ast.ClassDef) -> bool:
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if _name_of(target) == "dataclass":
            return True
    return False


# --------------------------------------------------------------------------------------------------------------
# Enums
# --------------------------------------------------------------------------------------------------------------

def enum_values(pkgs: dict[str, Package], ref: ClassRef, depth: int = 0) -> list[Any] | None:
    """The member values of an Enum class, or None when `ref` is not an enum whose values are literals."""
    mod = pkgs[ref.lib].module(ref.rel)
    node = mod.classes[ref.name]
    is_enum = False
    for base in node.bases:
        bname = _name_of(base)
        if bname in ENUM_BASES:
            is_enum = True
        elif bname and depth < 4:
            bref = resolve_class(pkgs, ref.lib, mod, bname)
            if bref and bref.rel != "?" and enum_values(pkgs, bref, depth + 1) is not None:
                is_enum = True
    if not is_enum:
        return None
    values = []
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            if stmt.targets[0].id.startswith("_"):
                continue
            try:
                values.append(ast.literal_eval(stmt.value))
            except (ValueError, SyntaxError):
                return None
    return values


def enum_member(pkgs: dict[str, Package], ref: ClassRef, member: str) -> tuple[bool, Any]:
    node = pkgs[ref.lib].module(ref.rel).classes[ref.name]
    for stmt in node.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id == member):
            try:
                return True, ast.literal_eval(stmt.value)
            except (ValueError, SyntaxError):
                return False, None
    return False, None


# --------------------------------------------------------------------------------------------------------------
# Annotations -> the kind HfArgumentParser gives a field
# --------------------------------------------------------------------------------------------------------------
# A type is modelled as a tuple: ("name", "bool"|"int"|"float"|"str"|"dict"|"list"|"tuple"|"Path"|"Any"|...),
# ("none",), ("enum", ClassRef-as-str, values), ("literal", values), ("union", [types]), ("generic", base, [args]),
# ("class", name) for any other class.

BUILTIN_NAMES = {"bool": "bool", "int": "int", "float": "float", "str": "str", "dict": "dict", "list": "list",
                 "tuple": "tuple", "List": "list", "Dict": "Dict", "Tuple": "tuple", "Any": "Any", "set": "set",
                 "bytes": "bytes", "Path": "Path"}


class TypeReader:
    def __init__(self, pkgs: dict[str, Package], lib: str, mod: Module) -> None:
        self.pkgs, self.lib, self.mod = pkgs, lib, mod

    def read(self, node: ast.expr) -> tuple:
        if isinstance(node, ast.Constant):
            if node.value is None:
                return ("none",)
            if isinstance(node.value, str):  # a string annotation: get_type_hints evaluates it
                return self.read(ast.parse(node.value, mode="eval").body)
            return ("unknown", repr(node.value))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self._union([self.read(node.left), self.read(node.right)])
        if isinstance(node, ast.Subscript):
            head = _name_of(node.value)
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if head == "Optional":
                return self._union([self.read(elts[0]), ("none",)])
            if head == "Union":
                return self._union([self.read(e) for e in elts])
            if head == "Literal":
                vals = []
                for e in elts:
                    try:
                        vals.append(ast.literal_eval(e))
                    except ValueError:
                        return ("unknown", ast.unparse(node))
                return ("literal", vals)
            if head in ("ClassVar", "InitVar"):
                return ("classvar",)
            base = BUILTIN_NAMES.get(head or "", head or "?")
            return ("generic", base, [self.read(e) for e in elts])
        name = _name_of(node)
        if name in BUILTIN_NAMES and not (name in self.mod.classes):
            return ("name", BUILTIN_NAMES[name])
        if name in ("ClassVar", "InitVar"):
            return ("classvar",)
        if name:
            ref = resolve_class(self.pkgs, self.lib, self.mod, name)
            if ref is not None and ref.rel == "?":
                return ("class", f"{ref.lib}:{ref.name}")
            if ref is not None:
                vals = enum_values(self.pkgs, ref)
                if vals is not None:
                    return ("enum", f"{ref.lib}:{ref.name}", vals)
                return ("class", name)
            return ("class", name)
        return ("unknown", ast.unparse(node))

    @staticmethod
    def _union(parts: list[tuple]) -> tuple:
        flat: list[tuple] = []
        for p in parts:
            for q in (p[1] if p[0] == "union" else [p]):
                if q not in flat:
                    flat.append(q)
        return flat[0] if len(flat) == 1 else ("union", flat)


def _is(t: tuple, name: str) -> bool:
    return t == ("name", name)


def parser_kind(t: tuple) -> dict[str, Any]:
    """HfArgumentParser._parse_dataclass_field (same rules in 4.36.0-5.24.0, hf_argparser.py), on a modelled type.

    Returns {"k": kind, ...}: "c" choices, "i" list item kind, "e" enum class, "why" for kind "other"."""
    if t[0] == "union":
        args = t[1]
        none = ("none",) in args
        if ("name", "str") not in args and (len(args) != 2 or not none):
            return {"k": "other", "fatal": True,
                    "why": "HfArgumentParser raises ValueError: only Union[X, NoneType] is allowed"}
        if not none:
            t = args[0] if _is(args[1], "str") else args[1]
        elif ("name", "bool") not in args:
            # `field.type.__args__[0] if isinstance(None, field.type.__args__[1]) else field.type.__args__[1]`:
            # isinstance() with a subscripted generic (list[str], dict[str, str], Literal[...]) raises TypeError.
            if args[1][0] in ("generic", "literal"):
                return {"k": "other", "fatal": True,
                        "why": "HfArgumentParser raises TypeError: isinstance(None, " + describe(args[1]) + ")"}
            t = args[0] if args[1] == ("none",) else args[1]
        elif len(args) == 2:
            return {"k": "optional_bool"}
        else:
            return {"k": "other", "why": "a Union with bool and other types: argparse gets the Union itself as type"}
    if t[0] == "literal":
        return {"k": "enum", "c": t[1]}
    if t[0] == "enum":
        return {"k": "enum", "c": t[2], "e": t[1]}
    if _is(t, "bool"):
        return {"k": "bool"}
    if t[0] == "generic" and t[1] == "list":
        item = t[2][0]
        if _is(item, "str") or _is(item, "int") or _is(item, "float"):
            return {"k": "list", "i": item[1]}
        if _is(item, "bool"):
            return {"k": "list", "i": "bool"}  # argparse type=bool: bool("False") is True
        if item[0] == "enum":
            return {"k": "list", "i": "enum", "ic": item[2], "e": item[1]}
        return {"k": "list", "i": "other"}
    if t[0] == "name" and t[1] == "list":
        return {"k": "other", "fatal": True,
                "why": "bare `list`: HfArgumentParser reads field.type.__args__[0] and raises AttributeError"}
    if t[0] == "name" and t[1] in ("int", "float", "str"):
        return {"k": t[1]}
    if (t[0] == "name" and t[1] == "dict") or (t[0] == "generic" and t[1] == "dict"):
        return {"k": "dict"}
    if t[0] in ("name", "generic") and t[1] == "Dict":
        # argparse calls typing.Dict[...] (or typing.Dict): "Type Dict cannot be instantiated" -> every word fails
        return {"k": "dict", "tg": 1}
    return {"k": "other", "why": f"argparse type {describe(t)}"}


def describe(t: tuple) -> str:
    if t[0] == "name":
        return t[1]
    if t[0] == "class":
        return t[1]
    if t[0] == "generic":
        return f"{t[1]}[{', '.join(describe(a) for a in t[2])}]"
    if t[0] == "union":
        return " | ".join(describe(a) for a in t[1])
    if t[0] == "none":
        return "None"
    if t[0] == "enum":
        return t[1].split(":")[1]
    return str(t[-1])


def refine_dict_or_str(t: tuple, info: dict[str, Any]) -> dict[str, Any]:
    """A field whose annotation holds both a dict and str, resolved by HfArgumentParser to str: 'dict_or_str'."""
    if info["k"] == "str" and t[0] == "union":
        if any(a[0] in ("name", "generic") and a[1] in ("dict", "Dict") for a in t[1]):
            return {"k": "dict_or_str"}
    return info


# --------------------------------------------------------------------------------------------------------------
# Defaults
# --------------------------------------------------------------------------------------------------------------

def jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: jsonable(v) for k, v in value.items()}
        raise ValueError("non-str keys")
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        raise ValueError("non-finite")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(type(value).__name__)


class DefaultReader:
    def __init__(self, pkgs: dict[str, Package], lib: str, mod: Module, class_ns: dict[str, Any]) -> None:
        self.pkgs, self.lib, self.mod, self.class_ns = pkgs, lib, mod, class_ns

    def value(self, node: ast.expr) -> Any:
        """A JSON value or a marker dict: {"$expr": src} | {"$cond": [[cond, value], ...], "else": value}."""
        try:
            return jsonable(ast.literal_eval(node))
        except (ValueError, SyntaxError, TypeError):
            pass
        if isinstance(node, ast.Name):
            if node.id in self.class_ns:
                return self.class_ns[node.id]
            if node.id in self.mod.consts:
                try:
                    return jsonable(self.mod.consts[node.id])
                except ValueError:
                    pass
        if isinstance(node, ast.Attribute):
            inner = node.value if node.attr == "value" and isinstance(node.value, ast.Attribute) else node
            if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name):
                ref = resolve_class(self.pkgs, self.lib, self.mod, inner.value.id)
                if ref is not None and ref.rel != "?" and enum_values(self.pkgs, ref) is not None:
                    ok, v = enum_member(self.pkgs, ref, inner.attr)
                    if ok:
                        return jsonable(v)
        return {"$expr": ast.unparse(node)}

    def factory(self, node: ast.expr) -> Any:
        name = _name_of(node)
        if isinstance(node, ast.Name) and name in ("list", "dict", "tuple", "set"):
            return {"$factory": name, "value": {"list": [], "dict": {}, "tuple": [], "set": []}[name]}
        if isinstance(node, ast.Lambda) and not node.args.args:
            v = self.value(node.body)
            if not (isinstance(v, dict) and ("$expr" in v or "$cond" in v)):
                return {"$factory": ast.unparse(node), "value": v}
        return {"$factory": ast.unparse(node)}


def class_namespace(node: ast.ClassDef, reader_for: Any) -> dict[str, Any]:
    """Literal class-level assignments, including `if` branches (recorded as conditional values)."""
    ns: dict[str, Any] = {}

    def walk(stmts: list[ast.stmt], conds: list[str]) -> None:
        for s in stmts:
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
                v = reader_for(ns).value(s.value)
                name = s.targets[0].id
                if conds:
                    prev = ns.get(name, {"$expr": "<unset>"})
                    ns[name] = {"$cond": [[" and ".join(conds), v]], "else": prev}
                else:
                    ns[name] = v
            elif isinstance(s, ast.If):
                walk(s.body, conds + [ast.unparse(s.test)])
                if s.orelse:
                    walk(s.orelse, conds + [f"not ({ast.unparse(s.test)})"])

    walk(node.body, [])
    return ns


# --------------------------------------------------------------------------------------------------------------
# Classes -> records
# --------------------------------------------------------------------------------------------------------------

def metadata_value(pkgs: dict[str, Package], mod: Module, key: str, node: ast.expr) -> Any:
    """A literal metadata value; for `choices=trainer_log_levels.keys()` (TrainingArguments.log_level), the keys of
    transformers/utils/logging.py `log_levels` plus "passive", after checking that training_args.py builds it as
    `trainer_log_levels = dict(**log_levels, passive=-1)` from `log_levels = logging.get_log_levels_dict().copy()`."""
    try:
        return jsonable(ast.literal_eval(node))
    except (ValueError, SyntaxError, TypeError):
        pass
    if key == "choices" and ast.unparse(node) == "trainer_log_levels.keys()":
        want = {"trainer_log_levels": "dict(**log_levels, passive=-1)",
                "log_levels": "logging.get_log_levels_dict().copy()"}
        found = {}
        for stmt in mod.tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                if stmt.targets[0].id in want:
                    found[stmt.targets[0].id] = ast.unparse(stmt.value)
        logging_mod = pkgs["transformers"].module("transformers/utils/logging.py")
        if found == want and logging_mod is not None:
            getter = next((f for f in logging_mod.tree.body if isinstance(f, ast.FunctionDef)
                           and f.name == "get_log_levels_dict"), None)
            returns = getter is not None and ast.unparse(getter.body[-1]) == "return log_levels"
            for stmt in logging_mod.tree.body:
                if (returns and isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                        and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == "log_levels"
                        and isinstance(stmt.value, ast.Dict)
                        and all(isinstance(k, ast.Constant) for k in stmt.value.keys)):
                    return [k.value for k in stmt.value.keys] + ["passive"]
    return {"$expr": ast.unparse(node)}


def read_class(pkgs: dict[str, Package], ref: ClassRef, todo: list[ClassRef]) -> dict[str, Any]:
    pkg = pkgs[ref.lib]
    mod = pkg.module(ref.rel)
    node = mod.classes[ref.name]
    bases: list[Any] = []
    for b in node.bases:
        bname = _name_of(b)
        bref = resolve_class(pkgs, ref.lib, mod, bname) if bname else None
        if bref is None:
            bases.append(f"?{ast.unparse(b)}")
        elif bref.lib != ref.lib:
            bases.append(f"{bref.lib}:{bref.name}")
        else:
            bases.append(bref)  # replaced by its key once every class read is known
            todo.append(bref)
    ns = class_namespace(node, lambda n: DefaultReader(pkgs, ref.lib, mod, n))
    dreader = DefaultReader(pkgs, ref.lib, mod, ns)
    treader = TypeReader(pkgs, ref.lib, mod)
    fields: dict[str, dict[str, Any]] = {}
    lines: list[int] = []
    for stmt in node.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        t = treader.read(stmt.annotation)
        if t == ("classvar",):
            continue
        rec: dict[str, Any] = {"a": ast.unparse(stmt.annotation)}
        argparse_meta: dict[str, Any] = {}
        default: Any = {"$required": True}
        aliases = None
        init = True
        if stmt.value is not None:
            call = stmt.value
            if isinstance(call, ast.Call) and _name_of(call.func) in ("field", "HfArg"):
                kw = {k.arg: k.value for k in call.keywords if k.arg}
                if "default" in kw:
                    default = dreader.value(kw["default"])
                elif "default_factory" in kw:
                    default = dreader.factory(kw["default_factory"])
                if "init" in kw and isinstance(kw["init"], ast.Constant) and kw["init"].value is False:
                    init = False
                meta = kw.get("metadata")
                if isinstance(meta, ast.Dict):
                    for k, v in zip(meta.keys, meta.values):
                        key = k.value if isinstance(k, ast.Constant) else None
                        if key == "aliases":
                            try:
                                aliases = ast.literal_eval(v)
                            except ValueError:
                                aliases = ast.unparse(v)
                        elif key in ("choices", "nargs", "const"):
                            argparse_meta[key] = metadata_value(pkgs, mod, key, v)
                        elif key not in ("help", None):
                            argparse_meta[key] = {"$expr": ast.unparse(v)}  # passed to add_argument as well
                if "aliases" in kw:
                    aliases = ast.literal_eval(kw["aliases"])
            else:
                default = dreader.value(call)
        if not init:
            continue  # HfArgumentParser skips `init=False` fields, and the constructor does not take them
        if isinstance(default, dict) and "$factory" in default:
            rec["f"] = 1  # a default_factory: the list branch of HfArgumentParser uses it, a plain default it ignores
        info = refine_dict_or_str(t, parser_kind(t))
        rec.update(info)
        # metadata other than "help" / "aliases" goes to parser.add_argument too (hf_argparser.py:155
        # `kwargs = dict(field.metadata)`): metadata choices stay unless the Enum/Literal branch sets its own, and
        # nargs/const stay unless the list branch (nargs="+") or the bool branch with a default sets them.
        if "choices" in argparse_meta and info["k"] != "enum":
            rec["c"] = argparse_meta.pop("choices")
        argparse_meta.pop("choices", None)
        if "nargs" in argparse_meta:
            rec["na"] = argparse_meta.pop("nargs")
        if "const" in argparse_meta:
            rec["co"] = argparse_meta.pop("const")
        if argparse_meta:
            rec["meta"] = argparse_meta
        rec["d"] = default
        if aliases is not None:
            rec["x"] = [aliases] if isinstance(aliases, str) else aliases
        fields[stmt.target.id] = rec
        lines.append(stmt.lineno)
    out: dict[str, Any] = {"module": ref.rel, "line": node.lineno, "bases": bases, "fields": fields,
                           "order": list(fields), "lines": lines}
    post_init = read_post_init(node)
    if post_init is not None:
        out["post_init"] = post_init
    dict_fields = read_dict_fields(node, mod)
    if dict_fields is not None:
        out["dict_fields"] = dict_fields
    return out


# The fields whose __post_init__ rewrites are recorded (the ones trainlint's rules decide on).
POST_INIT_FIELDS = frozenset({
    "per_device_train_batch_size", "gradient_accumulation_steps", "gradient_checkpointing",
    "gradient_checkpointing_kwargs", "activation_checkpointing", "activation_checkpointing_kwargs",
    "use_liger_kernel", "use_liger", "use_liger_loss", "liger_kernel_config", "bf16", "fp16", "max_length",
    "max_seq_length", "packing", "padding_free", "auto_find_batch_size", "torch_compile", "model_name_or_path",
    "attn_implementation", "dtype", "torch_dtype", "use_peft", "lora_r", "lora_alpha", "lora_target_modules",
    "lora_task_type", "load_in_4bit", "load_in_8bit",
})


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


class PostInitReader:
    """The `self.<field> = ...` statements of a __post_init__ for POST_INIT_FIELDS and the `if`s around them, as
    small JSON expression trees (see trainlint.knowledge.post_init._eval), in source order; and where
    `super().__post_init__()` is called. `for a, b in ((...), ...)` loops over literals are unrolled."""

    def expr(self, e: ast.expr, sub: dict[str, Any]) -> dict[str, Any]:
        if isinstance(e, ast.Attribute) and _is_self(e.value):
            return {"self": e.attr}
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "getattr" and len(e.args) == 2 \
                and _is_self(e.args[0]):
            name = self._const(e.args[1], sub)
            if isinstance(name, str):
                return {"self": name}
        if isinstance(e, ast.Name) and e.id in sub:
            return {"const": sub[e.id]}
        if isinstance(e, ast.Constant):
            return {"const": e.value}
        if isinstance(e, (ast.Dict, ast.List, ast.Tuple)):
            try:
                return {"const": jsonable(ast.literal_eval(e))}
            except (ValueError, SyntaxError):
                pass
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            return {"not": self.expr(e.operand, sub)}
        if isinstance(e, ast.BoolOp):
            return {"and" if isinstance(e.op, ast.And) else "or": [self.expr(v, sub) for v in e.values]}
        if isinstance(e, ast.IfExp):
            return {"ifelse": [self.expr(e.test, sub), self.expr(e.body, sub), self.expr(e.orelse, sub)]}
        if isinstance(e, ast.Compare) and len(e.ops) == 1:
            lib_version = self._version_compare(e)
            if lib_version is not None:
                return lib_version
            left, op, right = self.expr(e.left, sub), e.ops[0], e.comparators[0]
            if isinstance(right, ast.Constant) and right.value is None and isinstance(op, (ast.Is, ast.IsNot)):
                return {"is_none": left} if isinstance(op, ast.Is) else {"not": {"is_none": left}}
            if isinstance(op, (ast.Eq, ast.NotEq)):
                cmp = {"eq": [left, self.expr(right, sub)]}
                return cmp if isinstance(op, ast.Eq) else {"not": cmp}
            if isinstance(op, (ast.In, ast.NotIn)):
                cmp = {"in": [left, self.expr(right, sub)]}
                return cmp if isinstance(op, ast.In) else {"not": cmp}
        if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant):
            return {"index": [self.expr(e.value, sub), e.slice.value]}
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and not e.keywords:
            if e.func.id == "len" and len(e.args) == 1:
                return {"len": self.expr(e.args[0], sub)}
            if e.func.id == "hasattr" and len(e.args) == 2 and isinstance(e.args[1], ast.Constant):
                return {"hasattr": [self.expr(e.args[0], sub), e.args[1].value]}
            if e.func.id == "isinstance" and len(e.args) == 2:
                names = e.args[1].elts if isinstance(e.args[1], ast.Tuple) else [e.args[1]]
                types = [_name_of(n) for n in names]
                if all(t in ("bool", "int", "float", "str", "dict", "list", "tuple") for t in types):
                    return {"isinstance": [self.expr(e.args[0], sub), types]}
        return {"opaque": ast.unparse(e)}

    @staticmethod
    def _version_compare(e: ast.Compare) -> dict[str, Any] | None:
        """`Version(transformers.__version__) < Version("5.0.0")` -> {"version": ["transformers", "<", "5.0.0"]}."""
        def lib_of(x: ast.expr) -> str | None:
            if isinstance(x, ast.Call) and _name_of(x.func) in ("Version", "parse") and len(x.args) == 1:
                a = x.args[0]
                if isinstance(a, ast.Attribute) and a.attr == "__version__" and isinstance(a.value, ast.Name):
                    return a.value.id
            return None

        def const_of(x: ast.expr) -> str | None:
            if isinstance(x, ast.Call) and _name_of(x.func) in ("Version", "parse") and len(x.args) == 1 \
                    and isinstance(x.args[0], ast.Constant) and isinstance(x.args[0].value, str):
                return x.args[0].value
            return None

        ops = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
        lib, ver = lib_of(e.left), const_of(e.comparators[0])
        if lib in ("transformers", "trl", "torch", "peft") and ver and type(e.ops[0]) in ops:
            return {"version": [lib, ops[type(e.ops[0])], ver]}
        return None

    @staticmethod
    def _const(e: ast.expr, sub: dict[str, Any]) -> Any:
        if isinstance(e, ast.Constant):
            return e.value
        if isinstance(e, ast.Name):
            return sub.get(e.id)
        return None

    def walk(self, body: list[ast.stmt], sub: dict[str, Any]) -> list[dict[str, Any]]:
        """A small program: {"set": name | [names], "value", "line"}, {"setdefault": name, "key", "value", "line"},
        {"super": true, "line"}, {"if": cond, "then": [...], "else": [...], "line"} (ifs without recorded steps
        dropped). An `if` condition is evaluated once, as Python does."""
        out: list[dict[str, Any]] = []
        for s in body:
            if isinstance(s, ast.Assign):
                names = [t.attr for t in s.targets if isinstance(t, ast.Attribute) and _is_self(t.value)
                         and t.attr in POST_INIT_FIELDS]
                if names:
                    out.append({"set": names[0] if len(names) == 1 else names, "value": self.expr(s.value, sub),
                                "line": s.lineno})
            elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
                call = s.value
                if (isinstance(call.func, ast.Attribute) and call.func.attr == "__post_init__"
                        and isinstance(call.func.value, ast.Call) and _name_of(call.func.value.func) == "super"):
                    out.append({"super": True, "line": s.lineno})
                elif (isinstance(call.func, ast.Attribute) and call.func.attr == "__post_init__"
                        and isinstance(call.func.value, ast.Name) and call.args and _is_self(call.args[0])):
                    # `_BaseConfig.__post_init__(self)`: a named base's, skipping the ones in between
                    out.append({"super": call.func.value.id, "line": s.lineno})
                elif (isinstance(call.func, ast.Attribute) and call.func.attr == "setdefault" and len(call.args) == 2
                        and isinstance(call.func.value, ast.Attribute) and _is_self(call.func.value.value)
                        and isinstance(call.args[0], ast.Constant)
                        and call.func.value.attr in POST_INIT_FIELDS):
                    out.append({"setdefault": call.func.value.attr, "key": call.args[0].value,
                                "value": self.expr(call.args[1], sub), "line": s.lineno})
                elif isinstance(call.func, ast.Name) and call.func.id == "setattr" and len(call.args) == 3 \
                        and _is_self(call.args[0]):
                    name = self._const(call.args[1], sub)
                    if isinstance(name, str) and name in POST_INIT_FIELDS:
                        out.append({"set": name, "value": self.expr(call.args[2], sub), "line": s.lineno})
            elif isinstance(s, ast.If):
                then, other = self.walk(s.body, sub), self.walk(s.orelse, sub)
                if then or other:
                    out.append({"if": self.expr(s.test, sub), "then": then, "else": other, "line": s.lineno})
            elif isinstance(s, ast.For) and isinstance(s.iter, (ast.Tuple, ast.List)):
                try:
                    items = ast.literal_eval(s.iter)
                except ValueError:
                    continue
                names = [n.id for n in (s.target.elts if isinstance(s.target, ast.Tuple) else [s.target])
                         if isinstance(n, ast.Name)]
                for item in items:
                    values = item if isinstance(item, tuple) else (item,)
                    if len(values) == len(names):
                        out.extend(self.walk(s.body, {**sub, **dict(zip(names, values))}))
            elif isinstance(s, (ast.With, ast.Try)):
                out.extend(self.walk(s.body, sub))
        return out


def read_post_init(node: ast.ClassDef) -> list[dict[str, Any]] | None:
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__post_init__":
            return PostInitReader().walk(stmt.body, {})
    return None


def read_dict_fields(node: ast.ClassDef, mod: Module) -> dict[str, Any] | None:
    """`_VALID_DICT_FIELDS`: the fields TrainingArguments.__post_init__ json-loads from a '{...}' string."""
    for stmt in ast.walk(node):
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_VALID_DICT_FIELDS"
                                                for t in stmt.targets):
            v = stmt.value
            if isinstance(v, ast.List):
                return {"scope": "class", "list": ast.literal_eval(v), "line": stmt.lineno}
            if isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add) and isinstance(v.right, ast.List):
                base = v.left.value.id if isinstance(v.left, ast.Attribute) and isinstance(v.left.value, ast.Name) \
                    else ast.unparse(v.left)
                return {"scope": "class", "base": base, "add": ast.literal_eval(v.right), "line": stmt.lineno}
    return None


def module_dict_fields(mod: Module) -> dict[str, Any] | None:
    for stmt in mod.tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_VALID_DICT_FIELDS"
                                                for t in stmt.targets) and isinstance(stmt.value, ast.List):
            return {"scope": "module", "list": ast.literal_eval(stmt.value), "line": stmt.lineno}
    return None


def read_hf_argparser(mod: Module | None) -> dict[str, Any] | None:
    """The option strings `HfArgumentParser._parse_dataclass_field` registers, as written in this release:
    the main option and its dash alias (`long_options`), and the `--no_...` complement of a bool field."""
    if mod is None:
        return None
    cls = mod.classes.get("HfArgumentParser")
    func = next((n for n in ast.walk(cls) if isinstance(n, ast.FunctionDef) and n.name == "_parse_dataclass_field"),
                None) if cls else None
    if func is None:
        return None
    out: dict[str, Any] = {"line": func.lineno, "dash_alias": None, "negative": None}
    for node in ast.walk(func):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "long_options"):
            out["dash_alias"] = {"src": ast.unparse(node.args[0]), "line": node.lineno}
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
                and any(k.arg == "action" and isinstance(k.value, ast.Constant) and k.value.value == "store_false"
                        for k in node.keywords)):
            out["negative"] = {"options": [ast.unparse(a) for a in node.args if isinstance(a, ast.JoinedStr)],
                               "line": node.lineno}
    stb = next((n for n in mod.tree.body if isinstance(n, ast.FunctionDef) and n.name == "string_to_bool"), None)
    if stb is not None:
        words = [ast.literal_eval(c.comparators[0]) for c in ast.walk(stb)
                 if isinstance(c, ast.Compare) and isinstance(c.ops[0], ast.In)]
        out["string_to_bool"] = {"true": list(words[0]), "false": list(words[1]), "line": stb.lineno}
    out["allow_abbrev_set"] = "allow_abbrev" in mod.text
    return out


def read_version(lib: str, version: str, roots: dict[str, Path]) -> dict[str, Any]:
    pkgs = {name: Package(name, version if name == lib else "?", root) for name, root in roots.items()}
    todo: list[ClassRef] = []
    if lib == "transformers":
        for name, rel in TRANSFORMERS_CLASSES.items():
            mod = pkgs[lib].module(rel)
            if mod is not None and name in mod.classes:
                todo.append(ClassRef(lib, rel, name))
    else:
        for pattern in TRL_FILES:
            for rel in pkgs[lib].glob(pattern):
                mod = pkgs[lib].module(rel)
                for cname, node in mod.classes.items():
                    if is_dataclass_def(node):
                        todo.append(ClassRef(lib, rel, cname))
    records: dict[ClassRef, dict[str, Any]] = {}
    while todo:
        ref = todo.pop(0)
        if ref in records:
            continue
        node = pkgs[lib].module(ref.rel).classes[ref.name]
        if not is_dataclass_def(node):
            continue
        records[ref] = read_class(pkgs, ref, todo)
    # Two modules may define the same name (trl 0.26-0.28: trl/trainer/cpo_config.py `class CPOConfig(_CPOConfig)`
    # re-exports trl/experimental/cpo/cpo_config.py's CPOConfig). The one outside experimental/ (the one `trl`
    # exports) is keyed by its name, the others by "dotted.module.Name".
    keys: dict[ClassRef, str] = {}
    by_name: dict[str, list[ClassRef]] = {}
    for ref in records:
        by_name.setdefault(ref.name, []).append(ref)
    for name, refs in by_name.items():
        refs.sort(key=lambda r: ("experimental" in r.rel, len(r.rel), r.rel))
        keys[refs[0]] = name
        for r in refs[1:]:
            keys[r] = r.rel[:-3].replace("/", ".") + "." + name
    classes: dict[str, dict[str, Any]] = {}
    for ref, rec in records.items():
        rec["bases"] = [keys.get(b, f"?{b.name}") if isinstance(b, ClassRef) else b for b in rec["bases"]]
        classes[keys[ref]] = rec
    snap: dict[str, Any] = {"classes": dict(sorted(classes.items()))}
    if lib == "transformers":
        parser = read_hf_argparser(pkgs[lib].module("transformers/hf_argparser.py"))
        if parser is not None:
            snap["parser"] = parser
        mod = pkgs[lib].module(TRANSFORMERS_CLASSES["TrainingArguments"])
        mdf = module_dict_fields(mod)
        if mdf is not None:
            snap["module_dict_fields"] = mdf
    return snap


# --------------------------------------------------------------------------------------------------------------
# Differences between versions
# --------------------------------------------------------------------------------------------------------------

def _differ(a: Any, b: Any) -> bool:
    """JSON values compared with their types: `0 == 0.0` and `1 == True` in Python, but trl 0.10.1 DPOConfig
    `label_smoothing: float = 0` (dpo_config.py:108) and 0.11.0 `= 0.0` (:134) are different defaults."""
    return json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True)


def diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    d: dict[str, Any] = {}
    oc, nc = old["classes"], new["classes"]
    cls_diff: dict[str, Any] = {}
    for name in sorted(set(oc) | set(nc)):
        if name not in nc:
            cls_diff[name] = None
        elif name not in oc:
            cls_diff[name] = nc[name]
        elif _differ(oc[name], nc[name]):
            a, b = oc[name], nc[name]
            cd: dict[str, Any] = {"$diff": True}
            for key in ("module", "line", "bases", "order", "lines", "dict_fields", "post_init"):
                if _differ(a.get(key), b.get(key)):
                    cd[key] = b.get(key)
            fd = {}
            for fname in sorted(set(a["fields"]) | set(b["fields"])):
                if _differ(a["fields"].get(fname), b["fields"].get(fname)):
                    fd[fname] = b["fields"].get(fname)
            if fd:
                cd["fields"] = fd
            cls_diff[name] = cd
    if cls_diff:
        d["classes"] = cls_diff
    for key in ("module_dict_fields", "parser"):
        if _differ(old.get(key), new.get(key)):
            d[key] = new.get(key)
    return d


def apply_diff(base: dict[str, Any], d: dict[str, Any]) -> dict[str, Any]:
    """The same algorithm as trainlint.knowledge.arguments._apply (kept in step by a test)."""
    out = json.loads(json.dumps(base))
    for name, cd in d.get("classes", {}).items():
        if cd is None:
            out["classes"].pop(name, None)
        elif not cd.get("$diff"):
            out["classes"][name] = cd
        else:
            c = out["classes"][name]
            for key, value in cd.items():
                if key == "fields":
                    for fname, rec in value.items():
                        if rec is None:
                            c["fields"].pop(fname, None)
                        else:
                            c["fields"][fname] = rec
                elif key != "$diff":
                    if value is None:
                        c.pop(key, None)
                    else:
                        c[key] = value
    for key in ("module_dict_fields", "parser"):
        if key in d:
            if d[key] is None:
                out.pop(key, None)
            else:
                out[key] = d[key]
    return out


def build(download: bool, only: dict[str, list[str]] | None = None,
          roots_override: dict[tuple[str, str], Path] | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {
        "format": 1,
        "generated_by": "bench/gen_argument_fields.py (ast over the released wheels' source; nothing imported)",
        "libraries": {},
    }
    for lib, versions in VERSIONS.items():
        versions = only.get(lib, []) if only is not None else versions
        stored: list[str] = []
        data: dict[str, Any] = {}
        prev: dict[str, Any] | None = None
        for v in versions:
            def root(name: str, ver: str) -> Path:
                if roots_override and (name, ver) in roots_override:
                    return roots_override[(name, ver)]
                return source_root(name, ver, download)
            roots = {lib: root(lib, v)}
            if lib == "trl":
                # TRL classes name transformers' TrainingArguments as a base; it is only referred to, not read.
                roots["transformers"] = Path("/nonexistent")
            snap = read_version(lib, v, roots)
            data[v] = snap if prev is None else diff(prev, snap)
            stored.append(v)
            prev = snap
        result["libraries"][lib] = {"stored": stored, "data": data}
    return result


def append(lib: str, version: str, out: Path = OUT, download: bool = True,
           root: Path | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read one release newer than those in `out` and store it as its difference from the last one read there.
    Returns (the last snapshot before, the new snapshot). What a full `build()` would write for the same list of
    versions (the lists above must name `version` too: scripts/refresh_knowledge.py adds it)."""
    data = json.loads(out.read_text(encoding="utf-8"))
    entry = data["libraries"][lib]
    if version in entry["stored"]:
        raise SystemExit(f"{lib} {version} is already in {out}")
    last = None
    for v in entry["stored"]:
        last = entry["data"][v] if last is None else apply_diff(last, entry["data"][v])
    roots = {lib: root or source_root(lib, version, download)}
    if lib == "trl":
        roots["transformers"] = Path("/nonexistent")
    snap = read_version(lib, version, roots)
    entry["stored"].append(version)
    entry["data"][version] = diff(last, snap)
    out.write_text(dumps(data), encoding="utf-8")
    return last, snap


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=False, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------------------------------------------
# Checking against an imported release
# --------------------------------------------------------------------------------------------------------------

SAMPLES = {
    "bool": [[], ["True"], ["false"], ["1"], ["yes"], ["N"], ["maybe"], ["0", "x"]],
    "optional_bool": [[], ["True"], ["off"], ["no"]],
    "int": [["4"], ["-1"], ["4.0"], ["1_000"], []],
    "float": [["1e-4"], ["2"], ["x"], ["-.5"]],
    "str": [["abc"], ["None"], []],
    "list": [["a"], ["a", "b"], [], ["1", "2"]],
    "dict": [[""], ['{"a": 1}']],
    "dict_or_str": [["ds.json"], ['{"a": 1}']],
    "enum": [["steps"], ["no"], ["bogus"], ["adamw_torch"], ["cosine"], ["auto"], ["bfloat16"]],
    "other": [],
}


def same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


EFFECTIVE = ("bf16", "fp16", "gradient_checkpointing", "gradient_checkpointing_kwargs", "activation_checkpointing",
             "activation_checkpointing_kwargs", "max_length", "max_seq_length", "use_liger_kernel", "dtype",
             "torch_dtype", "torch_compile", "per_device_train_batch_size", "gradient_accumulation_steps", "packing",
             "padding_free", "lora_target_modules")


def check_effective(key: str, cls: Any, fields: dict, versions: Any, report: Any) -> None:
    from trainlint.knowledge import arg_parsers as P
    from trainlint.knowledge import arguments as A
    from trainlint.knowledge import post_init as PI

    """effective_values() against the constructed object, with the defaults and with a few deciding values given."""
    base = {k: v for k, v in (("output_dir", "/tmp/trainlint-check"), ("use_cpu", True)) if k in fields}
    if "bf16" in fields and fields["bf16"].kind == "optional_bool":
        pass  # left to __post_init__ (TRL: not fp16)
    for given in ({}, {"gradient_checkpointing": True}, {"max_seq_length": 2048}, {"torch_dtype": "bfloat16"},
                  {"lora_target_modules": ["all-linear"]}, {"gradient_checkpointing_kwargs": {"use_reentrant": True}}):
        if any(k not in fields for k in given):
            continue
        try:
            obj = cls(**base, **given)
        except Exception:
            continue  # e.g. a trainer config whose __post_init__ needs an optional dependency
        eff = PI.effective_values(key, versions, {**base, **given})
        for name in EFFECTIVE:
            if name in fields and hasattr(obj, name):
                have = getattr(obj, name)
                have = have.value if hasattr(have, "value") and not isinstance(have, (str, int, float)) else have
                if not (isinstance(eff[name], A.Unresolved) or same(eff[name], have) or eff[name] == have):
                    report(key, "effective", given, name, "real", repr(have), "mine", repr(eff[name]))


def verify_imported() -> int:
    """Check arguments.json against the transformers / trl this interpreter imports (see the module docstring)."""
    from trainlint.knowledge import arg_parsers as P
    from trainlint.knowledge import arguments as A
    from trainlint.knowledge import post_init as PI
    from trainlint.knowledge.versions import LibraryVersion, Versions

    warnings.filterwarnings("ignore")
    import transformers
    import trl

    versions = Versions(LibraryVersion("transformers", transformers.__version__, "imported"),
                        LibraryVersion("trl", trl.__version__, "imported"), LibraryVersion("peft", "0", ""))
    print(f"transformers {transformers.__version__} (answered by {A.snapshot_version('transformers', transformers.__version__)}), "
          f"trl {trl.__version__} (answered by {A.snapshot_version('trl', trl.__version__)})")
    stored = A.snapshot_version("trl", trl.__version__)
    keys = [("transformers", "TrainingArguments"), ("transformers", "Seq2SeqTrainingArguments")]
    keys += [("trl", k) for k in A._snapshot("trl", stored)["classes"]]
    bad = checked = 0

    def report(*parts: object) -> None:
        nonlocal bad
        bad += 1
        print("DIFF", *parts)

    for lib, key in keys:
        lib_, ver, rec, _ = A._class_chain(lib, A.snapshot_version(lib, getattr(versions, lib).version), key,
                                           versions)[-1]
        module, name = rec["module"][:-3].replace("/", "."), key.split(".")[-1]
        try:
            cls = getattr(importlib.import_module(module), name)
        except Exception as exc:  # an optional dependency of that trainer is missing here
            print(f"skip {key}: {type(exc).__name__}: {str(exc)[:80]}")
            continue
        fields = A.library_fields(key, versions)
        real = {f.name: f for f in dataclasses.fields(cls) if f.init}
        if list(fields) != list(real):
            report(key, "field set/order", set(fields) ^ set(real) or "order")
            continue
        for fname, f in real.items():
            want = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else A.REQUIRED)
            want = want.value if hasattr(want, "value") and not isinstance(want, (str, int, float)) else want
            want = list(want) if isinstance(want, tuple) else want
            mine = fields[fname].default
            if isinstance(mine, A.EnvDependent):
                if want not in {v for _, v in mine.cases} | {mine.otherwise}:
                    report(key, fname, "env default", mine, want)
            elif not isinstance(mine, A.Unresolved) and not same(mine, want) and mine != want:
                report(key, fname, "default", repr(mine), repr(want))
        check_effective(key, cls, fields, versions, report)
        try:
            parser = transformers.HfArgumentParser(cls)
        except Exception as exc:
            if not any(i.parser_error for i in fields.values()):
                report(key, "parser fails but no field is marked parser_error:", exc)
            continue
        broken = [n for n, i in fields.items() if isinstance(P.parser_default(i), P.ArgparseError)]
        if broken:
            err = io.StringIO()
            try:
                with contextlib.redirect_stderr(err):
                    parser.parse_known_args([w for n, i in fields.items() if P.parser_default(i) is A.REQUIRED
                                             for w in (f"--{n}", "x")])
                report(key, "expected every parse to fail (str default rejected by its type):", broken)
            except SystemExit:
                print(f"ok   {key}: every parse fails, as predicted ({broken[0]}: "
                      f"{P.parser_default(fields[broken[0]]).message[:60]})")
            continue
        required = [f"--{n}" for n, i in fields.items() if P.parser_default(i) is A.REQUIRED]
        base_words = [w for flag in required for w in (flag, "x")]  # e.g. output_dir, required before 4.50
        by_dest: dict[str, list] = {}
        for action in parser._actions:
            by_dest.setdefault(action.dest, []).append(action)
        for fname, info in fields.items():
            checked += 1
            main_action, *negs = by_dest[fname]
            problems = []
            if tuple(main_action.option_strings) != info.flags:
                problems.append(("flags", main_action.option_strings, info.flags))
            if main_action.nargs != info.nargs:
                problems.append(("nargs", main_action.nargs, info.nargs))
            if main_action.nargs == "?" and main_action.const != info.const:
                problems.append(("const", main_action.const, info.const))
            choices = tuple(main_action.choices) if main_action.choices is not None else None
            if choices != info.choice_values:
                problems.append(("choices", choices, info.choice_values))
            if tuple(s for a in negs for s in a.option_strings) != info.negative_flags:
                problems.append(("negative", [a.option_strings for a in negs], info.negative_flags))
            if problems:
                report(key, fname, info.kind, problems)
            for raw in SAMPLES[info.kind]:
                err = io.StringIO()
                try:
                    with contextlib.redirect_stderr(err):
                        ns, rest = parser.parse_known_args(base_words + [f"--{fname}", *raw])
                    ok, value = (not rest), getattr(ns, fname)
                except SystemExit:
                    ok, value = False, None
                mine_ok, mine = P.convert_cli(info, raw)
                if info.json_dict and ok and isinstance(value, str) and value.startswith("{"):
                    continue  # the JSON step runs in __post_init__, not in the parser
                if mine_ok and (isinstance(mine, A.Unresolved) or (
                        isinstance(mine, list) and any(isinstance(m, A.Unresolved) for m in mine))):
                    continue  # not decidable statically (kind "other"): said so, not compared
                if mine_ok != ok or (ok and not same(value, mine)):
                    report(key, fname, info.kind, raw, "real", (ok, value), "mine", (mine_ok, mine))
    print(f"{checked} fields checked, {bad} disagreements")
    return 1 if bad else 0



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the checked-in JSON; write nothing")
    ap.add_argument("--no-download", action="store_true", help="use only the cached sources")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--verify-imported", action="store_true",
                    help="compare the JSON with the transformers / trl this interpreter imports; write nothing")
    ns = ap.parse_args(argv)
    if ns.verify_imported:
        return verify_imported()
    text = dumps(build(download=not ns.no_download))
    if ns.check:
        same = ns.out.exists() and ns.out.read_text(encoding="utf-8") == text
        print("arguments.json is up to date" if same else "arguments.json differs from a fresh run")
        return 0 if same else 1
    ns.out.write_text(text, encoding="utf-8")
    print(f"wrote {ns.out} ({len(text) / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
