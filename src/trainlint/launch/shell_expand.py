"""What a shell word evaluates to without running anything: the file's own variables, parameter expansion,
arithmetic, and strings lexed again (`bash -c`) with every character mapped back to the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from trainlint.launch.shell_lex import Arith, Lit, Param, Sub, Tilde, W
from trainlint.launch.model import Assumption
from trainlint.launch.shell_words import (BREAK, Doc, Field, Piece, Value, Var, glob_regex, slice_value, split,
                                          text_value, unknown, unknown_value)

_DYNAMIC = frozenset(("RANDOM", "SRANDOM", "SECONDS", "EPOCHSECONDS", "EPOCHREALTIME", "BASHPID", "LINENO"))
_SPECIAL_NOTES = {"?": "$? is the exit status of the last command", "$": "$$ is the shell's process id",
                  "!": "$! is the process id of the last background job", "-": "$- is the shell's option flags",
                  "0": "$0 is the path the script is run as"}
PLACEHOLDER = 0xE100  # private-use characters stand for unknown pieces inside a string lexed again (bash -c)


class Frame:
    """The text a lexer read and how its offsets map to the file: the file itself, or a string lexed again
    (`bash -c "..."`, `eval`) whose characters each remember where they came from."""

    def __init__(self, text: str, cmap: list | None = None):
        self.text, self.cmap = text, cmap

    def ref(self, a: int, b: int) -> tuple[int, int]:
        if self.cmap is None:
            return a, b
        entries = self.cmap[a:b] or self.cmap[max(0, min(a, len(self.cmap)) - 1):a] or [_NOWHERE]
        return min(e[1] for e in entries), max(e[2] for e in entries)

    def lit(self, part: Lit) -> list[Piece]:
        if self.cmap is None:
            return [Piece(part.text, part.src, part.src, part.src + len(part.text), True, part.quoted)]
        out: list[Piece] = []
        if not part.text:
            rs, re_ = self.ref(part.src, part.src)
            return [Piece("", None, rs, re_, False, part.quoted)]
        run: list = []
        for i, ch in enumerate(part.text):
            e = self.cmap[part.src + i] if part.src + i < len(self.cmap) else _NOWHERE
            if e[4] is not None:  # an unknown piece of the outer word
                _flush(run, out, part.quoted)
                run = []
                p = e[4]
                out.append(Piece(None, None, p.rs, p.re, False, part.quoted or p.quoted, p.note, p.ext))
                continue
            if run and not _continues(run[-1][1], e):
                _flush(run, out, part.quoted)
                run = []
            run.append((ch, e))
        _flush(run, out, part.quoted)
        return out


_NOWHERE = (None, 0, 0, False, None, "", None)  # cmap entry: (src, rs, re, literal, unknown piece, note, assumed)


def _continues(prev: tuple, e: tuple) -> bool:
    if prev[3] != e[3] or (prev[0] is None) != (e[0] is None) or prev[5] != e[5] or prev[6] != e[6]:
        return False
    if prev[0] is not None and e[0] != prev[0] + 1:
        return False
    return prev[3] or (prev[1], prev[2]) == (e[1], e[2])


def _flush(run: list, out: list, quoted: bool) -> None:
    if not run:
        return
    text = "".join(ch for ch, _ in run)
    first, last = run[0][1], run[-1][1]
    if first[3]:
        out.append(Piece(text, first[0], first[1], last[2], True, quoted, first[5], False, first[6]))
    else:
        out.append(Piece(text, first[0], first[1], first[2], False, quoted, first[5], False, first[6]))


def nested_frame(pieces: list[Piece]) -> Frame:
    """The string a `bash -c` / `eval` runs, each character mapped back to the file."""
    chars: list[str] = []
    cmap: list = []
    unknowns = 0
    for p in pieces:
        if p is BREAK:
            chars.append(" ")
            cmap.append(_NOWHERE)
        elif p.text is None:
            chars.append(chr(PLACEHOLDER + unknowns % 6000))
            unknowns += 1
            cmap.append((None, p.rs, p.re, False, p, p.note, None))
        else:
            for i in range(len(p.text)):
                if p.lit:
                    cmap.append((p.src + i, p.rs + i, p.rs + i + 1, True, None, p.note, p.assumed))
                else:
                    cmap.append((None if p.src is None else p.src + i, p.rs, p.re, False, None, p.note, p.assumed))
            chars.append(p.text)
    return Frame("".join(chars), cmap)


@dataclass
class State:
    """What the shell knows at one point of the file. Copied into branches and subshells, merged after."""

    vars: dict[str, Var] = field(default_factory=dict)
    positional: tuple[Value, ...] | None = None  # None: the caller's arguments (unknown)
    cwd: str | None = ""
    dirstack: list = field(default_factory=list)
    funcs: dict = field(default_factory=dict)
    unread: tuple[str, ...] = ()  # sourced files that could not be read: they may set anything
    slurm: dict[str, Value] = field(default_factory=dict)  # SLURM_* as the #SBATCH header sets them
    file: str = ""  # the launcher's path, for $(dirname "$0")
    doc: Doc | None = None  # the text being read, for the line an assumed default is written on

    def copy(self) -> "State":
        return State(dict(self.vars), self.positional, self.cwd, list(self.dirstack), dict(self.funcs),
                     self.unread, self.slurm, self.file, self.doc)

    def assumption(self, name: str, value: str | None, offset: int) -> Assumption | None:
        """`name` takes `value`, a default written at `offset` of this file, unless the caller says otherwise."""
        if value is None or self.doc is None:
            return None
        return Assumption(name, value, self.file, self.doc.line(offset))

    def ifs(self) -> str | None:
        """IFS when the file sets it to a known value; None for bash's default."""
        value = self.scalar("IFS")
        return None if value is None or value.text is None else value.text

    def scalar(self, name: str) -> Value | None:
        var = self.vars.get(name)
        if var is None:
            return None
        if var.items is not None:
            return var.items[0] if var.items else Value(())
        return var.value

    def assign(self, name: str, value: Value, exported: bool | None = None) -> None:
        old = self.vars.get(name)
        keep = old.exported if old else False
        self.vars[name] = Var(value, None, keep if exported is None else exported)

    def unset_note(self, name: str) -> str:
        if name.startswith("SLURM_"):
            return f"{name} is set by Slurm when the job runs"
        note = f"{name} is not set in this file"
        if self.unread:
            note += f" (it may come from {self.unread[-1]}, which could not be read)"
        return note


# ---- expansion --------------------------------------------------------------------------------------------------
class Expander:
    """Expands word parts under one State; `frame` maps offsets. `subst` evaluates the few command
    substitutions that are pure functions of the file's own values (dirname "$0", pwd after a cd)."""

    def __init__(self, st: State, frame: Frame, subst=None):
        self.st, self.frame, self.subst = st, frame, subst

    def parts(self, parts: list, quoted: bool = False) -> list[Piece]:
        out: list[Piece] = []
        for part in parts:
            kind = type(part)
            if kind is Lit:
                pieces = self.frame.lit(part)
                if quoted:
                    pieces = [p._replace(quoted=True) for p in pieces]
                out.extend(pieces)
            elif kind is Param:
                out.extend(self.param(part, quoted))
            elif kind is Sub:
                rs, re_ = self.frame.ref(part.start, part.end)
                value = self.subst(part, self) if self.subst else None
                if value is None:
                    note = "the output of a command (`$(...)`)" if part.kind != "`" else \
                        "the output of a command (backquotes)"
                    if part.kind in ("<(", ">("):
                        note = "a process substitution (a /dev/fd path)"
                    out.append(unknown(note, False, rs, re_, part.quoted or quoted))
                else:
                    out.append(Piece(value, None, rs, re_, False, part.quoted or quoted))
            elif kind is Arith:
                rs, re_ = self.frame.ref(part.start, part.end)
                number, note = self.arith(part.text)
                if number is None:
                    out.append(unknown(note, False, rs, re_, part.quoted or quoted))
                else:
                    out.append(Piece(str(number), None, rs, re_, False, part.quoted or quoted, note))
            elif kind is Tilde:
                rs, re_ = self.frame.ref(part.start, part.end)
                out.append(unknown("~ is the home directory of whoever runs it", True, rs, re_, quoted))
        return out

    def word(self, tok: W) -> Value:
        """A word where bash neither splits nor globs (assignments, `case` subjects)."""
        rs, re_ = self.frame.ref(tok.start, tok.end)
        return Value(tuple(self.parts(tok.parts)), (rs, re_))

    def fields(self, tok: W) -> list["Field"]:
        pieces = self.parts(tok.parts)
        # every word a token expands to is written as that token (`$cmd`, `"${ARGS[@]}"`); origin says where
        # each one's value is
        where = self.frame.ref(tok.start, tok.end)
        return [Field(f, where) for f in split(pieces, self.st.ifs())]

    # ---- parameters -------------------------------------------------------------------------------------------
    def lookup(self, name: str) -> tuple[list[Value] | None, bool]:
        """(values, is_set): one value for a scalar, several for an array or "$@"; None values: unset."""
        st = self.st
        if _positional(name) or name == "#":
            if st.positional is None:
                what = {"@": "$@ is the caller's arguments (any number of words)",
                        "*": "$* is the caller's arguments (any number of words)",
                        "#": "$# is the number of the caller's arguments"}.get(name, f"${name} is set by the caller")
                return [unknown_value(what, True)], True
            if name == "#":
                return [text_value(str(len(st.positional)))], True
            if name in "@*":
                return list(st.positional), True
            k = int(name)
            return ([st.positional[k - 1]], True) if k <= len(st.positional) else (None, False)
        if name in _SPECIAL_NOTES:
            return [unknown_value(_SPECIAL_NOTES[name])], True
        if name in _DYNAMIC:
            return [unknown_value(f"${name} changes on every run")], True
        var = st.vars.get(name)
        if var is None:
            if name in st.slurm:
                return [st.slurm[name]], True
            return None, False
        if var.items is not None:
            return list(var.items), True
        return [var.value], True

    def param(self, p: Param, quoted: bool) -> list[Piece]:
        quoted = quoted or p.quoted
        rs, re_ = self.frame.ref(p.start, p.end)
        values, is_set = self.lookup(p.name)
        var = self.st.vars.get(p.name)
        is_array, star = p.name in "@*", p.name == "*"
        if p.index is not None:
            pieces = self.parts(p.index) if p.index else []
            index = None if any(x.text is None for x in pieces) else "".join(x.text for x in pieces)
            if index in ("@", "*"):
                is_array, star = True, index == "*"
            else:
                number, _ = self.arith(index) if index else (None if index is None else 0, "")
                if number is None:
                    return [unknown(f"${{{p.name}[{index}]}} has a subscript trainlint cannot evaluate",
                                    False, rs, re_, quoted)]
                if values is not None:
                    number += len(values) if number < 0 else 0
                    values = [values[number]] if 0 <= number < len(values) else None
                    is_set = values is not None
        elif var is not None and var.items is not None and values is not None:
            values = values[:1]  # `$ARR` is its first element
        op = p.op
        if op in ("", "#len") or op.startswith(("#", "%", "/")) and op != "#len" or op in ("^^", "^", ",,", ","):
            if values is None:
                if _positional(p.name):  # a function's argument it was not given: empty
                    return [Piece("0", None, rs, re_, False, quoted)] if op == "#len" else []
                return [unknown(self.st.unset_note(p.name), True, rs, re_, quoted)]
            if op == "#len":
                if is_array:
                    return [Piece(str(len(values)), None, rs, re_, False, quoted)]
                t = values[0].text
                return [Piece(str(len(t)), None, rs, re_, False, quoted) if t is not None else
                        unknown(values[0].note, values[0].ext, rs, re_, quoted)]
            if op:
                values = [self.transform(v, op, p.arg) for v in values]
            return self.join(values, is_array, star, rs, re_, quoted)
        if op in (":-", "-", ":=", "=", ":+", "+", ":?", "?"):
            v = values[0] if values else None
            colon = op.startswith(":")
            empty = v is not None and v.text == ""
            use_arg = False
            caller = False  # whoever runs the file could set it instead: the default is an assumption
            note = ""
            if not is_set or v is None:
                if op.endswith(("-", "=")):
                    use_arg, note = True, f"the default of ${{{p.name}{op}...}}: " + self.st.unset_note(p.name)
                    caller = not _positional(p.name)  # (a function's missing argument is certain)
            elif v.text is None and v.ext and op.endswith(("-", "=")):
                use_arg, caller = True, True
                note = f"the default of ${{{p.name}{op}...}}; the caller may set {p.name} instead ({v.note})"
            elif v.text is None:
                return [unknown(v.note, v.ext, rs, re_, quoted)]
            elif empty and colon and op.endswith(("-", "=")):
                use_arg, caller = True, _assumed(v) is not None  # empty unless the caller passes an option
                note = f"the default of ${{{p.name}{op}...}}; the caller may set {p.name} instead ({p.name} is " \
                       f"empty unless it does)" if caller else f"the default of ${{{p.name}{op}...}}: {p.name} is empty"
            if op.endswith("+"):
                if is_set and v is not None and not (colon and empty):
                    return self.arg_pieces(p, quoted, rs, re_, "")
                return []
            if op.endswith("?"):
                if use_arg or not is_set or v is None or (colon and empty):
                    return [unknown(f"{p.name} is unset here (the script stops with an error)", True, rs, re_,
                                    quoted)]
                return self.join(values, is_array, star, rs, re_, quoted)
            if use_arg:
                pieces = self.arg_pieces(p, quoted, rs, re_, note)
                if caller:
                    text = "".join(x.text for x in pieces) if all(x.text is not None for x in pieces) else None
                    assumed = self.st.assumption(p.name, text, rs)
                    pieces = [x._replace(assumed=assumed) for x in pieces]
                if op.endswith("=") and not p.name.isdigit():
                    self.st.assign(p.name, Value(tuple(x._replace(note="") for x in pieces)))
                return pieces
            return self.join(values, is_array, star, rs, re_, quoted)
        if op == "!":
            return [unknown(f"${{!{p.name}}} is an indirect reference", False, rs, re_, quoted)]
        if op == ":" and values is not None and not is_array and p.arg is not None:
            return self.substring(values[0], p.arg, rs, re_, quoted)
        if values is None:
            return [unknown(self.st.unset_note(p.name), True, rs, re_, quoted)]
        return [unknown(f"${{{p.name}{op}...}} is an expansion trainlint does not evaluate", False, rs, re_,
                        quoted)]

    def arg_pieces(self, p: Param, quoted: bool, rs: int, re_: int, note: str) -> list[Piece]:
        pieces = self.parts(p.arg or [], quoted)
        out = [Piece(x.text, x.src, rs, re_, False, x.quoted or quoted, note or x.note, x.ext, x.assumed)
               if x.lit else x._replace(note=note or x.note) for x in pieces]
        return out or [Piece("", None, rs, re_, False, True, note)]

    def join(self, values: list[Value], is_array: bool, star: bool, rs: int, re_: int, quoted: bool) -> list[Piece]:
        out: list[Piece] = []
        for k, v in enumerate(values):
            if k:
                out.append(Piece(" ", None, rs, re_, False, True) if (star and quoted) else BREAK)
            for x in v.pieces:
                if x is BREAK:
                    out.append(x)
                else:
                    out.append(Piece(x.text, x.src, rs, re_, False, quoted, x.note, x.ext, x.assumed))
            if not v.pieces:
                out.append(Piece("", None, rs, re_, False, quoted))
        return out

    def transform(self, v: Value, op: str, arg: list | None) -> Value:
        t = v.text
        if t is None:
            return v
        if op in ("^^", ",,", "^", ","):
            new = {"^^": t.upper(), ",,": t.lower(), "^": t[:1].upper() + t[1:], ",": t[:1].lower() + t[1:]}[op]
            return Value((Piece(new, None, 0, 0, False, True, "", False, _assumed(v)),))
        pattern = "".join("\0" if x.text is None else x.text for x in self.parts(arg or [])) if arg else ""
        if "\0" in pattern:
            return unknown_value(f"the pattern of ${{...{op}...}} is not known")
        if op.startswith("/"):  # ${X/pat/rep}, ${X//pat/rep}, ${X/#pat/rep}, ${X/%pat/rep}
            pat, _, rep = pattern.partition("/")
            rx = glob_regex(pat)
            if not pat:
                return v
            if op == "/#":
                rx = "^(?:" + rx + ")"
            elif op == "/%":
                rx = "(?:" + rx + ")$"
            new = re.sub(rx, lambda _: rep, t, count=0 if op == "//" else 1, flags=re.S)
            return Value((Piece(new, None, 0, 0, False, True, "", False, _assumed(v)),))
        rx = re.compile(glob_regex(pattern), re.S)
        cuts = [i for i in range(len(t) + 1)]
        if op in ("#", "##"):
            ends = [i for i in cuts if rx.fullmatch(t, 0, i)]
            if not ends:
                return v
            cut = min(ends) if op == "#" else max(ends)
            return slice_value(v, cut, len(t))
        starts = [i for i in cuts if rx.fullmatch(t, i, len(t))]
        if not starts:
            return v
        cut = max(starts) if op == "%" else min(starts)
        return slice_value(v, 0, cut)

    def substring(self, v: Value, arg: list, rs: int, re_: int, quoted: bool) -> list[Piece]:
        spec = "".join("\0" if x.text is None else x.text for x in self.parts(arg))
        m = re.fullmatch(r"\s*(-?\d+)\s*(?::\s*(\d+)\s*)?", spec)
        if v.text is None or not m:
            return [unknown("a substring ${X:offset:length} trainlint does not evaluate", False, rs, re_, quoted)]
        start = int(m.group(1))
        start = max(0, len(v.text) + start) if start < 0 else min(start, len(v.text))
        end = len(v.text) if m.group(2) is None else min(len(v.text), start + int(m.group(2)))
        sliced = slice_value(v, start, end)
        return [Piece(x.text, x.src, rs, re_, False, quoted, x.note, x.ext, x.assumed) for x in sliced.pieces]

    # ---- arithmetic -------------------------------------------------------------------------------------------
    def arith(self, text: str) -> tuple[int | None, str]:
        """Integer arithmetic over literals and the file's known variables: `$((GPUS_PER_NODE * NNODES))`."""
        toks = re.findall(r"\s*(0[xX][0-9a-fA-F]+|\d+|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\$[0-9#@*]|[A-Za-z_]"
                          r"[A-Za-z0-9_]*|\*\*|<<|>>|[-+*/%()]|\S)", text)
        pos = 0

        def value_of(tok: str) -> int:
            name = tok.strip("${}")
            if tok.startswith("$") and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                values, _ = self.lookup(name)
            else:
                values, _ = self.lookup(name)
            if values is None:
                raise _Unknown(self.st.unset_note(name))
            t = values[0].text
            if t is None:
                raise _Unknown(values[0].note)
            if values[0].note and not notes:
                notes.append(values[0].note)
            t = t.strip() or "0"
            if not re.fullmatch(r"-?\d+", t):
                number, note = self.arith(t) if depth[0] < 8 else (None, "")
                if number is None:
                    raise _Unknown(f"{name} is not a number")
                return number
            return int(t)

        depth = [0]
        notes: list[str] = []

        def atom() -> int:
            nonlocal pos
            if pos >= len(toks):
                raise _Unknown("an incomplete arithmetic expression")
            tok = toks[pos]
            pos += 1
            if tok == "(":
                v = expr()
                if pos >= len(toks) or toks[pos] != ")":
                    raise _Unknown("unbalanced parentheses in an arithmetic expression")
                pos += 1
                return v
            if tok in "-+" and len(tok) == 1:
                v = atom()
                return -v if tok == "-" else v
            if tok[0].isdigit():
                return int(tok, 0) if tok.lower().startswith("0x") else int(tok)
            if tok[0] == "$" or tok[0].isalpha() or tok[0] == "_":
                return value_of(tok)
            raise _Unknown(f"`{tok}` in an arithmetic expression")

        def power() -> int:
            nonlocal pos
            v = atom()
            if pos < len(toks) and toks[pos] == "**":
                pos += 1
                v = v ** power()
            return v

        def term() -> int:
            nonlocal pos
            v = power()
            while pos < len(toks) and toks[pos] in ("*", "/", "%"):
                op = toks[pos]
                pos += 1
                w = power()
                if op == "*":
                    v *= w
                elif w == 0:
                    raise _Unknown("division by zero")
                else:
                    q = abs(v) // abs(w) * (1 if (v >= 0) == (w >= 0) else -1)
                    v = q if op == "/" else v - q * w
            return v

        def expr() -> int:
            nonlocal pos
            v = term()
            while pos < len(toks) and toks[pos] in ("+", "-", "<<", ">>"):
                op = toks[pos]
                pos += 1
                w = term()
                v = v + w if op == "+" else v - w if op == "-" else v << w if op == "<<" else v >> w
            return v

        try:
            result = expr()
            if pos != len(toks):
                raise _Unknown(f"`{toks[pos]}` in an arithmetic expression")
            return result, (notes[0] if notes else "")
        except _Unknown as e:
            return None, f"$((...)) depends on {e}" if "not set" in str(e) or "caller" in str(e) else str(e)
        except (ValueError, OverflowError, RecursionError):
            return None, "an arithmetic expression trainlint cannot evaluate"


class _Unknown(Exception):
    pass


def _assumed(v: Value) -> Assumption | None:
    return next((p.assumed for p in v.pieces if p.assumed is not None), None)


def _positional(name: str) -> bool:
    return bool(name) and (name in ("@", "*") or (name.isdigit() and name != "0"))


