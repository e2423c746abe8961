"""A compiled-code cache for the methods `dataclasses` generates, so that `trainlint check` starts faster.

Every `@dataclass` class builds its `__init__`, `__repr__`, `__eq__` (and, frozen, `__setattr__`/`__delattr__`,
`__hash__`) as source text and `exec`s it; compiling that text is most of the cost of creating the class.
LibCST's ~230 node classes are dataclasses, and building them is most of `import libcst` (~0.13 s of a one-file
run on the project's 2-core machine; ~0.06 s with this cache, bench/README.md). This module gives the
`dataclasses` module an `exec` that compiles each distinct source text once and keeps the code object, marshalled,
next to the interpreter's own bytecode cache (`trainlint/__pycache__/`, see default_path), keyed by the source text itself: a text
seen before runs the code compiled from exactly that text, anything else is compiled as before. What the
generated methods do is unchanged; only the compile is skipped.

It follows the bytecode cache's rules: read when present, written only when bytecode writing is on
(`sys.dont_write_bytecode`, PYTHONDONTWRITEBYTECODE) and the folder is writable, written atomically, and a file
that does not load (truncated, another Python's) is ignored. Only the command line's entry points install it
(`trainlint`, `python -m trainlint`: trainlint/__main__.py), and it caches only the classes of LibCST, click and
trainlint, so a library imported later in that process (verify's torch) builds its classes as it always does.
"""

from __future__ import annotations

import atexit
import builtins
import marshal
import os
import sys

_PACKAGES = ("libcst", "trainlint", "click")  # the classes a lint run builds; any other module's are compiled as usual
_MAX_ENTRIES = 8192  # a cache grown past this (many upgrades) starts again
_cache: dict[str, object] = {}
_added = 0
_path: str | None = None


def default_path() -> str:
    """trainlint/__pycache__/ when it can be written (or already holds the file), like the bytecode next to it;
    else the interpreter's pycache prefix (PYTHONPYCACHEPREFIX), else the user cache ($XDG_CACHE_HOME or
    ~/.cache, /trainlint), for a package installed read-only."""
    # v2: code compiled without this module's `from __future__ import annotations` (v1 files held code compiled
    # with it, whose __init__ annotations were strings: they are not read)
    name = f"dataclass-code-v2.{sys.implementation.cache_tag or 'python'}-{sys.hexversion:x}.marshal"
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__")
    if sys.pycache_prefix:
        return os.path.join(sys.pycache_prefix, "trainlint", name)
    if os.path.exists(os.path.join(here, name)) or os.access(here if os.path.isdir(here) else os.path.dirname(here),
                                                             os.W_OK):
        return os.path.join(here, name)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "trainlint", name)


def _exec(source, globals=None, locals=None, /, **kwargs):
    global _added
    module = globals.get("__name__", "") if isinstance(globals, dict) else ""
    if isinstance(source, str) and not kwargs and module.startswith(_PACKAGES):
        code = _cache.get(source)
        if code is None:
            # dont_inherit: compiled as dataclasses' own exec compiles it, not with this module's __future__ flags
            # (`annotations` would turn the generated __init__'s annotations into strings)
            code = compile(source, "<string>", "exec", dont_inherit=True)
            _cache[source] = code
            _added += 1
        source = code
    return builtins.exec(source, globals, locals, **kwargs)


def install(path: str | None = None) -> None:
    """Route `dataclasses`' exec through the cache at `path` (default: trainlint/__pycache__/); save new entries at
    exit. Safe to call twice."""
    import dataclasses

    global _path
    if getattr(dataclasses, "exec", None) is _exec:
        return
    _path = path or default_path()
    _cache.clear()
    _cache.update(load(_path))
    dataclasses.exec = _exec
    atexit.register(save)


def uninstall() -> None:
    import dataclasses

    if getattr(dataclasses, "exec", None) is _exec:
        del dataclasses.exec
    atexit.unregister(save)


def load(path: str) -> dict[str, object]:
    try:
        with open(path, "rb") as f:
            data = marshal.loads(f.read())
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(data, dict) or len(data) > _MAX_ENTRIES:
        return {}
    code_type = type(load.__code__)
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, code_type)}


def save() -> None:
    """Write the cache if this process compiled something new (atomically; silently not, where it cannot)."""
    global _added
    if not _added or _path is None or sys.dont_write_bytecode:
        return
    data = dict(_cache) if len(_cache) <= _MAX_ENTRIES else {}
    tmp = f"{_path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(_path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(marshal.dumps(data))
        os.replace(tmp, _path)
        _added = 0
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
