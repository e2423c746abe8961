"""Facts from the repository's own modules a script imports: the argument dataclasses it parses but does
not define (`from fastchat.train.train import ModelArguments, TrainingArguments`). Each module is read
once per run, never imported or executed; a module that cannot be found or read leaves those classes
unknown, as before."""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from trainlint.diagnostics import Span
from trainlint.facts.model import ClassDef, Evidence, Param, ScriptFacts
from trainlint.facts.names import ACCUM_NAMES, BATCH_NAMES, NOT_REPOSITORY_MODULES, SEQ_NAMES
from trainlint.facts.relocate import Relocator
from trainlint.facts.values import Value



def module_file(module: str, script: Path, root: Path) -> Path | None:
    """The file of a dotted module of the repository (see find_module)."""
    return find_module(module, script, root)


def find_module(module: str, script: Path, root: Path) -> Path | None:
    """The file of a dotted module, never a library's: relative to the script's package (`.actor`), beside
    the script, under the repository root or its src/ layout, under the package folders pyproject.toml /
    setup.py declare, or under a folder the script adds with `sys.path.insert/append`."""
    if module.startswith("."):
        level = len(module) - len(module.lstrip("."))
        base = script.parent
        for _ in range(level - 1):
            base = base.parent
        rest = module.lstrip(".")
        if _installed(base) or _library_package(base):
            return None  # a library's own modules: the file is part of torch, installed or in a checkout of it
        return _in(base, Path(*rest.split(".")) if rest else None)
    if not module or module.split(".")[0] in NOT_REPOSITORY_MODULES:
        return None
    rel = Path(*module.split("."))
    for base in (script.parent, *_search_path(script), root, *_package_roots(root)):
        found = _in(base, rel)
        if found is not None:
            return found
    return None


def _installed(folder: Path) -> bool:
    """`folder` is inside an installed-packages folder (site-packages, dist-packages): a file of an installed
    library, linted in place, whose relative imports are that library's own modules, never followed."""
    return "site-packages" in folder.parts or "dist-packages" in folder.parts


_LIBRARIES = NOT_REPOSITORY_MODULES - frozenset(getattr(__import__("sys"), "stdlib_module_names", ()))


@lru_cache(maxsize=256)
def _library_package(folder: Path) -> bool:
    """`folder` is inside a package whose top level (the outermost folder with an __init__.py above it) is a
    library trainlint models rather than follows (trl, accelerate, ...): a checkout of that library, whose
    relative imports are its own modules, as its absolute imports (`from accelerate.utils import ...`) are."""
    top = None
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        top, folder = folder.name, folder.parent
    return top in _LIBRARIES


def _in(base: Path, rel: Path | None) -> Path | None:
    candidates = (base / "__init__.py",) if rel is None else (base / rel.with_suffix(".py"), base / rel / "__init__.py")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    return None


_SYS_PATH = re.compile(r"sys\.path\.(?:insert\(\s*-?\d+\s*,|append\()\s*(.+)\)\s*$", re.M)


@lru_cache(maxsize=256)
def _search_path(script: Path) -> tuple[Path, ...]:
    """Folders `sys.path.insert(0, ...)` / `.append(...)` adds: a literal path (relative to the script's
    folder, as it is usually run from there), or one built from `__file__` (os.path / pathlib)."""
    try:
        text = script.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    out = []
    for match in _SYS_PATH.finditer(text):
        folder = _path_expr(match.group(1).strip(), script)
        if folder is not None and folder.is_dir():
            out.append(folder)
    return tuple(out)


def _path_expr(expr: str, script: Path) -> Path | None:
    import ast

    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return None

    def ev(n) -> Path | None:
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            return (script.parent / n.value).resolve() if not Path(n.value).is_absolute() else Path(n.value)
        if isinstance(n, ast.Name) and n.id == "__file__":
            return script.resolve()
        if isinstance(n, ast.Call):
            name = ast.unparse(n.func)
            inner = [ev(a) for a in n.args]
            if name in ("os.path.dirname", "dirname") and len(inner) == 1 and inner[0] is not None:
                return inner[0].parent
            if name in ("os.path.abspath", "os.path.realpath", "abspath", "realpath", "str", "Path",
                        "pathlib.Path", "os.fspath") and len(inner) == 1 and inner[0] is not None:
                return inner[0]
            if name in ("os.path.join", "join") and inner and all(x is not None for x in inner[:1]):
                parts = [a.value for a in n.args[1:] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                if len(parts) != len(n.args) - 1:
                    return None
                return (inner[0].joinpath(*parts)).resolve()
            if isinstance(n.func, ast.Attribute) and n.func.attr in ("resolve", "absolute") and not n.args:
                return ev(n.func.value)
        if isinstance(n, ast.Attribute) and n.attr == "parent":
            inner = ev(n.value)
            return inner.parent if inner is not None else None
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div):
            left = ev(n.left)
            if left is not None and isinstance(n.right, ast.Constant) and isinstance(n.right.value, str):
                return (left / n.right.value).resolve()
        return None

    return ev(node)


@lru_cache(maxsize=64)
def _package_roots(root: Path) -> tuple[Path, ...]:
    """root/src, and the folders pyproject.toml (setuptools `where` / `package-dir`, poetry `from`) or setup.py
    (`package_dir={"": "lib"}`, `find_packages("lib")`) declare the packages in."""
    found = [root / "src"]
    texts = []
    for name in ("pyproject.toml", "setup.py", "setup.cfg"):
        try:
            texts.append((root / name).read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    for text in texts:
        for pattern in (r"where\s*=\s*\[?\s*[\"']([^\"']+)[\"']", r"package[-_]dir\s*=\s*\{\s*[\"']{2}\s*[:=]\s*[\"']([^\"']+)",
                        r"find_packages\(\s*[\"']([^\"']+)[\"']", r"from\s*=\s*[\"']([^\"']+)[\"']"):
            for m in re.finditer(pattern, text):
                folder = root / m.group(1)
                if folder.is_dir() and folder not in found:
                    found.append(folder)
    return tuple(f for f in found if f.is_dir())


@lru_cache(maxsize=256)
def module_facts(path: Path) -> ScriptFacts | None:
    """The facts of one repository module, read once per run; None when it cannot be read or parsed
    (a C extension, a binary, a syntax error: its names stay unknown)."""
    from trainlint.facts import extract_facts
    from trainlint.source import Source, decode

    if path.suffix != ".py":
        return None
    raw = _bytes(path)  # the bytes _mentions / _may_parse_args already read
    source = decode(raw) if raw is not None else None
    if not isinstance(source, Source):
        return None
    import libcst as cst

    try:
        module = cst.parse_module(source.text)
        return extract_facts(module, str(path), source.text)
    except Exception:  # noqa: BLE001 - a module we cannot read stays unknown, never an error
        return None


def _module_classes(path: Path) -> tuple[ClassDef, ...]:
    facts = module_facts(path)
    return facts.classes if facts is not None else ()


def with_imported_classes(facts: ScriptFacts, script: Path, root: Path, display) -> ScriptFacts:
    """`facts` plus the ClassDefs of parsed dataclasses (and their bases) imported from the repository's own
    modules; their defaults' spans name the module's file, so a finding decided there is reported there."""
    imports = dict(facts.imports)
    # a parsed class imported from a module of the repository is named by its module from here on (read
    # below when the module can be found, unknown otherwise, never taken for the library class of that name)
    facts = replace(facts, parsed=tuple(
        replace(p, class_name=imports[p.class_name]) if p.class_name and facts.class_def(p.class_name) is None
        and p.class_name in imports and imports[p.class_name].split(".")[0] not in ("transformers", "trl", "peft")
        else p for p in facts.parsed))
    have = {(c.module, c.name) for c in facts.classes}
    added: list[ClassDef] = []
    todo = [(None, p.class_name) for p in facts.parsed if p.class_name]
    for klass in facts.classes:
        todo += [(None, b) for b in klass.bases]
    seen: set[str] = set()
    while todo:
        owner, name = todo.pop()
        qual = name if "." in name else imports.get(name) if owner is None else f"{owner}.{name}"
        if not qual or "." not in qual or qual in seen or qual.split(".")[0] in ("transformers", "trl", "peft"):
            continue
        seen.add(qual)
        module, _, short = qual.rpartition(".")
        if (module, short) in have or (owner is None and facts.class_def(short) is not None and "." not in name):
            continue
        path = module_file(module, script, root)
        if path is None:
            continue
        shown = display(path)
        for klass in _module_classes(path):
            if klass.name == short:
                fields = tuple(replace(f, default=_located(f.default, shown)) for f in klass.fields)
                added.append(replace(klass, fields=fields, module=module))
                have.add((module, short))
                todo += [(module, b) for b in klass.bases if "." not in b] + [(None, b) for b in klass.bases
                                                                               if "." in b]
    if not added:
        return facts
    # the fields that bear on sequence length, batch or accumulation, as the facts pass records a script's own
    seq, batch, accum = list(facts.seq_evidence), list(facts.batch_evidence), list(facts.accum_evidence)
    for klass in added:
        for f in klass.fields:
            if f.default.unset:
                continue
            lowered = f.name.lower()
            bucket = seq if lowered in SEQ_NAMES else batch if lowered in BATCH_NAMES else \
                accum if lowered in ACCUM_NAMES else None
            if bucket is not None:
                span = f.default.origin or Span.point(1).in_file(display(module_file(klass.module, script, root)))
                param = Param(f"class {klass.module}.{klass.name}", f.name)
                bucket.append(Evidence(Value("param", param, span, "param"), f"{f.name} =", span))
    return replace(facts, classes=facts.classes + tuple(added), seq_evidence=tuple(seq),
                   batch_evidence=tuple(batch), accum_evidence=tuple(accum))


def absolute(relative: str, path: Path, root: Path) -> str:
    """".actor.Actor" imported in pkg/models/__init__.py -> "pkg.models.actor.Actor"."""
    level = len(relative) - len(relative.lstrip("."))
    try:
        package = path.parent.resolve().relative_to(root.resolve()).parts
    except ValueError:
        package = ()
    if package and package[0] == "src":
        package = package[1:]
    base = package[: len(package) - (level - 1)] if level > 1 else package
    rest = relative.lstrip(".")
    return ".".join((*base, rest)) if rest else ".".join(base)


def resolve(qual: str, here: Path, root: Path, has, read=None) -> tuple[ScriptFacts, Path, str] | tuple[str, str]:
    """Where the repository defines `pkg.mod.name`, through re-exports (`from .configs import Name` in a
    package's __init__.py): (that module's facts, its file, the name there) when `has(facts, name)`; else
    ("missing", module) / ("unreadable", file) / ("undefined", qual). `read` reads a module's facts (default:
    module_facts; the follower's records the modules it reached)."""
    read = read or module_facts
    for _ in range(4):
        module, _, short = qual.rpartition(".")
        path = find_module(module, here, root) if module else None
        if path is None:
            return "missing", module
        if not _mentions(path, short):
            return "undefined", qual  # neither defined nor re-exported there: not worth a parse
        facts = read(path)
        if facts is None:
            return "unreadable", str(path)
        if has(facts, short):
            return facts, path, short
        again = dict(facts.imports).get(short)
        if again is None:
            return "undefined", qual
        qual = absolute(again, path, root) if again.startswith(".") else again
        here = path
    return "undefined", qual


def find_class(qual: str, script: Path, root: Path) -> tuple[ScriptFacts, Path, ClassDef] | None:
    """The class `pkg.mod.Name` of a repository module; None when it is not the repository's or cannot be read."""
    found = resolve(qual, script, root, lambda facts, name: facts.class_def(name) is not None)
    if len(found) != 3:
        return None
    facts, path, short = found
    return facts, path, facts.class_def(short)


def _parser_base(facts: ScriptFacts, klass: ClassDef, depth: int = 0) -> str | None:
    """"hf" / "trl" when the class derives from HfArgumentParser / TrlParser (through its module's classes)."""
    for base in klass.bases:
        short, root = base.split(".")[-1], base.split(".")[0]
        if short == "HfArgumentParser" and root in ("transformers", "HfArgumentParser"):
            return "hf"
        if short == "TrlParser" and root in ("trl", "TrlParser"):
            return "trl"
        local = facts.class_def(base) if "." not in base else None
        if local is not None and depth < 8 and local.name != klass.name:
            found = _parser_base(facts, local, depth + 1)
            if found:
                return found
    return None


def confirm_parsers(facts: ScriptFacts, script: Path, root: Path, text: str) -> ScriptFacts:
    """Parse calls of a parser class the repository defines (facts.params.CANDIDATE): kept as HfArgumentParser /
    TrlParser calls when the class derives from one, with the args-file branch its own parse method reads
    (`sys.argv[1].endswith(".yaml")`, and `sys.argv[2:]` overrides after it); dropped (unknown) otherwise."""
    from trainlint.facts.params import CANDIDATE

    kept, branch, overrides = [], facts.json_argv_branch, facts.argv_config_overrides
    for parsed in facts.parsed:
        if parsed.parser != CANDIDATE:
            kept.append(parsed)
            continue
        qual = parsed.parser_class or ""
        if "." not in qual:
            klass = facts.class_def(qual)
            found = (facts, script, klass) if klass is not None else None
        else:
            found = find_class(qual, script, root)
        kind = _parser_base(found[0], found[2]) if found is not None else None
        if kind is None:
            continue  # not a parser trainlint can read: what it fills stays unknown
        kept.append(replace(parsed, parser=kind, parser_class=None))
        module_text = text if found[1] == script else _text(found[1])
        branch = branch or found[0].json_argv_branch
        overrides = overrides or "sys.argv[2:]" in module_text
    return replace(facts, parsed=tuple(kept), json_argv_branch=branch, argv_config_overrides=overrides)


def parse_helpers(facts: ScriptFacts, script: Path, root: Path) -> dict[str, ScriptFacts]:
    """The names this file imports of functions of a repository module that return `parser.parse_args()`
    there (`from utils import get_args; args = get_args()`), with that module's facts (its argparse options)."""
    imports = dict(facts.imports)
    out: dict[str, ScriptFacts] = {}
    for hop in facts.hops:
        if hop.target is None or "." in hop.short or hop.short not in imports:
            continue
        qual = imports[hop.short]
        module, _, name = qual.rpartition(".")
        path = find_module(module, script, root) if module else None
        found = module_facts(path) if path is not None and _may_parse_args(path, name) else None
        if found is not None and name in found.parse_functions and found.argparse_params:
            out[hop.short] = found
    return out


def with_parse_helpers(facts: ScriptFacts, helpers: dict[str, ScriptFacts], display) -> ScriptFacts:
    """The argparse options of the modules whose parse helpers the file calls, as if the file declared them;
    their defaults' spans name the module."""
    params = list(facts.argparse_params)
    for module in helpers.values():
        relocate = Relocator(display(Path(module.path)))
        params += [relocate.walk(p) for p in module.argparse_params]
    return replace(facts, argparse_params=tuple(params))


@lru_cache(maxsize=256)
def _bytes(path: Path) -> bytes | None:
    """A module's bytes, read once per run (the text checks below, then module_facts); None when it cannot be
    read or is over source.MAX_BYTES (read_source's limit)."""
    from trainlint.source import MAX_BYTES

    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        return path.read_bytes()
    except OSError:
        return None


def _mentions(path: Path, name: str) -> bool:
    """The module's text names `name` (a definition, an import, an assignment) or star-imports: what resolve()
    needs before it parses the module. A module that cannot be read says yes (module_facts then says unreadable)."""
    data = _bytes(path)
    return not data or b"import *" in data or re.search(rb"\b%s\b" % re.escape(name.encode()), data) is not None


def _may_parse_args(path: Path, name: str) -> bool:
    """A parse helper needs argparse options and a parse call in its module (and its own name there)."""
    data = _bytes(path)
    return not data or (b"add_argument" in data and b"parse_" in data and name.encode() in data)


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _located(value: Value, file: str) -> Value:
    if value.origin is None or value.origin.file:
        return value
    return Value(value.state, value.value, value.origin.in_file(file), value.via)


def clear_cache() -> None:
    module_facts.cache_clear()
    _bytes.cache_clear()
    _library_package.cache_clear()
    _search_path.cache_clear()
    _package_roots.cache_clear()
