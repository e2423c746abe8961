"""A disk cache of what launchers hold (their invocations and problems), so a pre-commit run that finds the
launchers unchanged neither imports the shell reader nor lexes them again.

Records are JSON (never pickle: a cache directory in a repository must not be a way to run code), keyed by the
launcher's path and bytes; a record also lists the other files the reading used (`source env.sh`) with their
size and mtime, and is ignored when one of them changed. Only the types of launch/model.py are decoded."""

from __future__ import annotations

import json
from dataclasses import fields, is_dataclass
from pathlib import Path

from trainlint._hash import sha256
from trainlint.diagnostics import Span
from trainlint.discovery import file_stamp as _stamp
from trainlint.launch.model import Assumption, Invocation, LaunchProblem, Word

_TYPES = {cls.__name__: cls for cls in (Span, Word, Invocation, LaunchProblem, Assumption)}
_FORMAT = b"2\0"  # changes when what a record holds changes (2: a Word's assumptions), so older ones are not read
_FOLDER: Path | None = None  # set by the runner when the cache is on


def use(folder: Path | None) -> None:
    global _FOLDER
    _FOLDER = folder


def folder() -> Path | None:
    """The cache folder when the cache is on (launch/tree.py keeps its index there too), else None."""
    return _FOLDER


def _encode(obj):
    if isinstance(obj, Path):
        return {"$path": str(obj)}
    if is_dataclass(obj) and type(obj).__name__ in _TYPES:
        return {"$type": type(obj).__name__, **{f.name: _encode(getattr(obj, f.name)) for f in fields(obj)}}
    if isinstance(obj, (tuple, list)):
        return [_encode(x) for x in obj]
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    raise TypeError(f"not stored: {type(obj).__name__}")


def _decode(data):
    if isinstance(data, list):
        return tuple(_decode(x) for x in data)
    if isinstance(data, dict):
        if "$path" in data:
            return Path(data["$path"])
        cls = _TYPES[data["$type"]]  # KeyError on anything else: the record is ignored
        return cls(**{k: _decode(v) for k, v in data.items() if k != "$type"})
    return data




def _entry(path: Path, raw: bytes) -> Path | None:
    if _FOLDER is None:
        return None
    key = sha256(_FORMAT + str(path.resolve()).encode() + b"\0" + raw).hexdigest()
    return _FOLDER / "launchers" / key[:2] / f"{key}.json"


def load(path: Path, raw: bytes):
    """(invocations, problems) stored for this launcher's bytes, or None."""
    entry = _entry(path, raw)
    if entry is None:
        return None
    try:
        record = json.loads(entry.read_text(encoding="utf-8"))
        if any(_stamp(p) != s for p, s in record["read"].items()):
            return None
        return _decode(record["invocations"]), _decode(record["problems"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save(path: Path, raw: bytes, invocations, problems, read: list[str]) -> None:
    entry = _entry(path, raw)
    if entry is None:
        return
    try:
        record = {"invocations": _encode(invocations), "problems": _encode(problems),
                  "read": {p: _stamp(p) for p in read}}
        from trainlint.atomic import write_bytes_atomic

        entry.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(entry, json.dumps(record).encode("utf-8"))
    except (OSError, TypeError):
        pass  # a read-only tree, or a value the store does not know: simply not cached
