"""Reading a file as text the way Python would (BOM, PEP 263 cookie), or saying why it cannot be."""

from __future__ import annotations

import codecs
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

MAX_BYTES = 20 * 1024 * 1024  # larger files are reported (TL002), not read


@dataclass(frozen=True)
class Source:
    text: str
    encoding: str
    raw: bytes


@dataclass(frozen=True)
class Unreadable:
    reason: str
    line: int = 1
    col: int = 1


def read_source(path: Path) -> Source | Unreadable:
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            return Unreadable(f"file is {size / 1e6:.0f} MB, over the {MAX_BYTES // 2**20} MiB limit; not linted")
        raw = path.read_bytes()
    except PermissionError:
        return Unreadable("permission denied")
    except OSError as exc:
        return Unreadable(f"cannot read file: {exc.strerror or exc}")
    return decode(raw)


def decode(raw: bytes) -> Source | Unreadable:
    if b"\x00" in raw[:8192]:
        return Unreadable("binary file (contains NUL bytes); not Python source")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        return Unreadable(f"bad encoding declaration: {exc.msg if hasattr(exc, 'msg') else exc}")
    try:
        codecs.lookup(encoding)
        text = raw.decode(encoding)
    except LookupError:
        return Unreadable(f"unknown encoding {encoding!r} in the coding cookie")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        return Unreadable(f"not valid {encoding}: byte 0x{raw[exc.start]:02x} at offset {exc.start} "
                          f"(declare the encoding with a `# -*- coding: ... -*-` line)", line, col)
    if text.startswith("\ufeff"):
        text = text[1:]
    return Source(text, encoding, raw)


# Lines as Python counts them (edits.py, facts/walk.py and the reports place columns on them).
def newline_of(text: str) -> str:
    m = _NEWLINE.search(text)
    return m.group() if m else "\n"


_NEWLINE = re.compile(r"\r\n|\r|\n")


def source_lines(text: str) -> list[str]:
    """Lines as Python (and LibCST's positions) count them: split on \r\n, \r or \n only (str.splitlines
    also splits on form feeds and other separators, which would shift every row after them)."""
    return _NEWLINE.split(text)


def line_starts(text: str) -> list[int]:
    """Offset of the first character of each line, same line breaks as source_lines."""
    return [0] + [m.end() for m in _NEWLINE.finditer(text)]
