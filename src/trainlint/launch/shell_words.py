"""The values of shell words: pieces that remember where each character is written, fields, and Words.

Every character keeps two places: `src`, where it is written (an assignment's value, a heredoc line), and the
reference it arrived through in the command (`$MODEL`). A Word's span is the second, its origin the first, so
a fix edits the value where it is written. Anything that depends on the world outside the file (`$1`, `$(cmd)`,
an unset variable, a glob) is a piece with text None and a note saying why: unknown, never guessed.
"""

from __future__ import annotations

import posixpath
import re
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from trainlint.diagnostics import Span
from trainlint.launch.model import Assumption, Word

_IFS = re.compile(r"[^ \t\n]+")
_GLOB = re.compile(r"[*?]|\[[^\]]+\]")
_BRACE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
PLACEHOLDER_MARK = "\ue0ff"  # brackets of a README placeholder (`<your_path>`), see markdown.py


class Piece(NamedTuple):
    text: str | None  # None: unknown
    src: int | None  # offset where text[0] is written, its characters following one another; None: elsewhere
    rs: int  # the range of the command text it arrived through
    re: int
    lit: bool  # written literally at rs..re (so a partial slice has its own position)
    quoted: bool  # not split, not globbed
    note: str = ""
    ext: bool = False  # unknown only because the caller (arguments, environment) decides it
    assumed: Assumption | None = None  # a default the caller could override (the text is an assumption)


BREAK = Piece("", None, -1, -1, False, True, "<field break>")  # between elements of "$@" / "${A[@]}"


def unknown(note: str, ext: bool = False, rs: int = 0, re_: int = 0, quoted: bool = False) -> Piece:
    return Piece(None, None, rs, re_, False, quoted, note, ext)


@dataclass(frozen=True, slots=True)
class Value:
    pieces: tuple[Piece, ...]
    at: tuple[int, int] | None = None  # where the assignment's value is written in this file

    @property
    def text(self) -> str | None:
        if any(p.text is None for p in self.pieces):
            return None
        return "".join(p.text for p in self.pieces if p is not BREAK)

    @property
    def note(self) -> str:
        return next((p.note for p in self.pieces if p.text is None), "") or \
            next((p.note for p in self.pieces if p.note and p is not BREAK), "")

    @property
    def ext(self) -> bool:
        bad = [p for p in self.pieces if p.text is None]
        return bool(bad) and all(p.ext for p in bad)


def unknown_value(note: str, ext: bool = False) -> Value:
    return Value((unknown(note, ext),))


def text_value(text: str) -> Value:
    return Value((Piece(text, None, 0, 0, False, True),))


@dataclass(frozen=True, slots=True)
class Var:
    value: Value | None  # a scalar
    items: tuple[Value, ...] | None = None  # an array
    exported: bool = False

    def key(self) -> tuple:
        if self.items is not None:
            return ("array", tuple(v.text for v in self.items), self.exported)
        return ("scalar", self.value.text if self.value else None, self.exported,
                self.value.note if self.value and self.value.text is None else "")


class Doc:
    """One file's text and line table: offsets to Spans."""

    def __init__(self, text: str, file: Path):
        self.text, self.file = text, file
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self._last = (0, 0, 0)

    def line_col(self, offset: int) -> tuple[int, int]:
        lo, hi, line = self._last
        if not lo <= offset < hi:  # words are asked for in order: most fall on the line asked last
            line = bisect_right(self.starts, offset) - 1
            lo = self.starts[line]
            hi = self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text) + 1
            self._last = (lo, hi, line)
        return line + 1, offset - lo + 1

    def span(self, start: int, end: int) -> Span:
        line, col = self.line_col(start)
        if end <= start:
            return Span(line, col, line, col)
        end_line, end_col = self.line_col(end - 1)
        return Span(line, col, end_line, end_col + 1)

    def line(self, offset: int) -> int:
        return bisect_right(self.starts, offset) - 1 + 1


def glob_regex(pattern: str) -> str:
    """A bash pattern (`*`, `?`, `[...]`) as a regular expression."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[" and "]" in pattern[i + 2:]:
            j = pattern.index("]", i + 2)
            body = pattern[i + 1:j]
            body = "^" + body[1:] if body[:1] in "!^" and body else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = j
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def slice_value(v: Value, start: int, end: int) -> Value:
    out, pos = [], 0
    for p in v.pieces:
        t = p.text or ""
        a, b = max(start - pos, 0), min(end - pos, len(t))
        if a < b or (not t and start <= pos <= end):
            out.append(slice_piece(p, a, b) if t else p)
        pos += len(t)
    return Value(tuple(out) or (Piece("", None, 0, 0, False, True),), v.at)


def slice_piece(p: Piece, a: int, b: int) -> Piece:
    text = (p.text or "")[a:b]
    src = None if p.src is None else p.src + a
    if p.lit:
        return Piece(text, src, p.rs + a, p.rs + b, True, p.quoted, p.note, p.ext, p.assumed)
    return Piece(text, src, p.rs, p.re, False, p.quoted, p.note, p.ext, p.assumed)


def ifs_segments(t: str, ifs: str | None) -> tuple[list[tuple[int, int]], bool, bool]:
    """Where the fields of `t` lie when split on IFS (None: the default, space tab newline), and whether `t`
    starts / ends with a separator. IFS whitespace collapses and is trimmed; every other IFS character ends a
    field, so `a,,b` is three fields and `a,` one, as in bash."""
    if ifs is None or ifs == " \t\n":
        segs = [(m.start(), m.end()) for m in _IFS.finditer(t)]
        return segs, bool(t) and t[0] in " \t\n", bool(t) and t[-1] in " \t\n"
    if ifs == "":
        return ([(0, len(t))] if t else []), False, False
    ws = "".join(c for c in ifs if c in " \t\n")
    other = "".join(c for c in ifs if c not in " \t\n")
    w = f"[{re.escape(ws)}]" if ws else ""
    o = f"[{re.escape(other)}]" if other else ""
    delim = re.compile(f"{w}*{o}{w}*|{w}+" if ws and other else f"{w}+" if ws else o)
    matches = list(delim.finditer(t))
    segs, prev = [], 0
    for m in matches:
        if m.start() == 0 and not (other and any(c in other for c in m.group())):
            prev = m.end()  # leading IFS whitespace: trimmed, no empty field
            continue
        segs.append((prev, m.start()))
        prev = m.end()
    if prev < len(t):
        segs.append((prev, len(t)))
    return segs, bool(matches) and matches[0].start() == 0, bool(matches) and matches[-1].end() == len(t)


def split(pieces: list[Piece], ifs: str | None = None) -> list[list[Piece]]:
    """Field splitting on IFS, only where characters came from an unquoted expansion."""
    fields: list[list[Piece]] = []
    cur: list[Piece] = []
    for p in pieces:
        if p is BREAK:
            if cur:
                fields.append(cur)
            cur = []
            continue
        if p.quoted or p.lit or p.text is None:
            cur.append(p)
            continue
        t = p.text
        segs, lead, trail = ifs_segments(t, ifs)
        if not segs:
            if t and cur:
                fields.append(cur)
                cur = []
            continue
        if lead and cur:
            fields.append(cur)
            cur = []
            if segs[0] == (0, 0):  # `a$X` with X=",b": the separator ends "a", it makes no empty field
                segs = segs[1:]
        for k, (a, b) in enumerate(segs):
            if k:
                fields.append(cur)
                cur = []
            cur.append(slice_piece(p, a, b))
        if trail:
            fields.append(cur)
            cur = []
    if cur:
        fields.append(cur)
    return fields


class Field:
    """One word of a command after expansion and splitting."""

    __slots__ = ("pieces", "tok", "_text")

    def __init__(self, pieces: list[Piece], tok: tuple[int, int] | None = None):
        self.pieces, self.tok = pieces, tok
        self._text = _UNSET

    @property
    def text(self) -> str | None:
        if self._text is _UNSET:
            self._text = field_text(self.pieces)
        return self._text

    def after(self, sep: str) -> tuple[str, "Field"] | None:
        """(`--opt`, value field) for `--opt=value`: the name must be known, the value may not be."""
        pos = 0
        for k, p in enumerate(self.pieces):
            if p.text is None:
                return None
            j = p.text.find(sep)
            if j >= 0:
                head = "".join(x.text for x in self.pieces[:k]) + p.text[:j]
                rest = [slice_piece(p, j + 1, len(p.text))] + self.pieces[k + 1:]
                return head, Field(rest)
            pos += len(p.text)
        return None

    def word(self, doc: Doc) -> Word:
        return make_word(self.pieces, doc, self.tok)


_UNSET = object()


def field_text(pieces: list[Piece]) -> str | None:
    return _text_and_note(pieces)[0]


def _text_and_note(pieces: list[Piece]) -> tuple[str | None, str]:
    """The word's text, or None with why: an unknown piece, an unquoted glob, a brace expansion."""
    text, note = _text_and_note_(pieces)
    if text is not None and PLACEHOLDER_MARK in text:
        return None, "a placeholder for the reader to fill in"
    return text, note


def _text_and_note_(pieces: list[Piece]) -> tuple[str | None, str]:
    if len(pieces) == 1:  # most words: one literal or one value
        p = pieces[0]
        if p.text is None:
            return None, p.note
        if p.quoted or not ("*" in p.text or "?" in p.text or "[" in p.text or "{" in p.text):
            return p.text, p.note
    if any(p.text is None for p in pieces):
        return None, next(p.note for p in pieces if p.text is None)
    text = "".join(p.text for p in pieces)
    masked = "".join(p.text if not p.quoted else "\0" * len(p.text) for p in pieces)
    if _GLOB.search(masked):
        return None, f"{text!r} is an unquoted glob: bash replaces it with the matching file names"
    lit = "".join(p.text if p.lit and not p.quoted else "\0" * len(p.text) for p in pieces)
    if "{" in lit and _BRACE.search(lit):
        return None, f"brace expansion in {text!r} makes several words"
    return text, next((p.note for p in pieces if p.note), "")


def make_word(pieces: list[Piece], doc: Doc, tok: tuple[int, int] | None = None) -> Word:
    if tok is not None and len(pieces) == 1 and pieces[0].lit:  # a word written as it is: the common case
        text, note = _text_and_note(pieces)
        return Word(text, doc.span(*tok), doc.text[tok[0]:tok[1]], None, note, assumptions(pieces, text))
    real = [p for p in pieces if p is not BREAK]
    if tok is not None:
        rs, re_ = tok
    elif real:
        rs, re_ = min(p.rs for p in real), max(p.re for p in real)
    else:
        rs = re_ = 0
    text, note = _text_and_note(real)
    origin = None
    relevant = [p for p in real if not (p.lit and not p.text)]
    if relevant and all(not p.lit and p.src is not None for p in relevant) and \
            len({(p.rs, p.re) for p in relevant}) == 1 and \
            all(b.src == a.src + len(a.text or "") for a, b in zip(relevant, relevant[1:])):
        # one variable's value, written in one place: a fix can edit it there
        origin = doc.span(relevant[0].src, relevant[-1].src + len(relevant[-1].text or ""))
    return Word(text, doc.span(rs, re_), doc.text[rs:re_], origin, note, assumptions(real, text))


def value_word(value: Value, doc: Doc, fallback: tuple[int, int]) -> Word:
    """A Word for an environment variable's value, placed where it is assigned."""
    at = value.at or fallback
    text = value.text
    return Word(text, doc.span(*at), doc.text[at[0]:at[1]], doc.span(*at) if value.at else None,
                value.note if text is None or value.note else "", assumptions(value.pieces, text))


def assumptions(pieces, text: str | None) -> tuple[Assumption, ...]:
    """The defaults a word's known text rests on, in order (none for an unknown text: nothing is assumed)."""
    if text is None:
        return ()
    return tuple(dict.fromkeys(p.assumed for p in pieces if p.assumed is not None))


def normjoin(cwd: str | None, target: str) -> str | None:
    if target.startswith("/"):
        return posixpath.normpath(target)
    if cwd is None:
        return None
    joined = posixpath.normpath(posixpath.join(cwd, target)) if cwd else posixpath.normpath(target)
    return "" if joined == "." else joined
