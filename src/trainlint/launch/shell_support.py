"""What the walker in shell_run needs that is no walking: merging branch states, names a loop assigns, `case`
patterns, and the character surgery of `read`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from trainlint.launch.shell_expand import State
from trainlint.launch.shell_lex import _ASSIGN_HEAD, ArrayLit, Lit, W
from trainlint.launch.shell_parse import Arithmetic, Case, Group, If, Item, Loop, Simple
from trainlint.launch.shell_words import BREAK, Piece, Value, Var, glob_regex, ifs_segments

_ARITH_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|([A-Za-z_][A-Za-z0-9_]*)\s*"
                           r"(?:\+\+|--)|(?:\+\+|--)\s*([A-Za-z_][A-Za-z0-9_]*)")


def _key(path: Path) -> str:
    return os.path.normpath(path.as_posix())


def _elsewhere(var: Var, span: tuple[int, int]) -> Var:
    def strip(v: Value | None) -> Value | None:
        if v is None:
            return None
        return Value(tuple(p if p is BREAK else p._replace(src=None, lit=False, rs=span[0], re=span[1])
                           for p in v.pieces), span)
    return Var(strip(var.value), tuple(strip(v) for v in var.items) if var.items is not None else None,
               var.exported)


def merge(st: State, alts: list[State], kind: str, line: int) -> None:
    """The state after alternatives: what they agree on, and unknown for what they do not."""
    names = set(st.vars)
    for a in alts:
        names |= set(a.vars)
    for name in names:
        vs = [a.vars.get(name) for a in alts]
        keys = {v.key() if v is not None else None for v in vs}
        if len(keys) == 1:
            if vs[0] is None:
                st.vars.pop(name, None)
            else:
                st.vars[name] = vs[0]
            continue
        ext, causes = True, []
        for v in vs:
            if v is None or (v.items is None and v.value is not None and v.value.text == ""):
                continue
            val = v.value if v.items is None else None
            if val is None or val.text is not None or not val.ext:
                ext = False
            if val is not None and val.text is None:
                # the root cause, not "NAME is set in ..." / "NAME changes in the loop" again
                own = val.note.startswith(f"{name} ")
                causes.append((own, val.note.split(": ", 1)[1] if own and ": " in val.note else
                               "" if own else val.note))
        cause = next((c for own, c in sorted(causes, key=lambda c: c[0]) if c), "")
        note = f"{name} is set in the {kind} at line {line}, so its value depends on the run" + \
            (f": {cause}" if cause else "")
        exported = any(v is not None and v.exported for v in vs)
        st.vars[name] = Var(Value((Piece(None, None, 0, 0, False, False, note, ext),)), None, exported)
    cwds = {a.cwd for a in alts}
    st.cwd = cwds.pop() if len(cwds) == 1 else None
    for a in alts:
        for fname, f in a.funcs.items():
            st.funcs.setdefault(fname, f)
        st.unread += tuple(u for u in a.unread if u not in st.unread)


def assigned_names(items: list[Item]) -> set[str]:
    out: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, Simple):
            for a in node.assigns:
                if isinstance(a, ArrayLit):
                    out.add(a.name)
                else:
                    m = _ASSIGN_HEAD.match(a.parts[0].text)
                    out.add(m.group().rstrip("=").rstrip("+").split("[")[0])
            cmd = node.words[0].literal() if node.words and isinstance(node.words[0], W) else None
            if cmd in ("read", "export", "declare", "typeset", "local", "readonly"):
                for w in node.words[1:]:
                    if isinstance(w, ArrayLit):
                        out.add(w.name)
                        continue
                    head = w.parts[0] if w.parts else None
                    text = head.text if isinstance(head, Lit) else ""
                    name = re.match(r"[A-Za-z_][A-Za-z0-9_]*", text or "")
                    if name and not text.startswith("-"):
                        out.add(name.group())
            if cmd == "read":
                out.add("REPLY")
        elif isinstance(node, If):
            for cond, body in node.clauses:
                walk_items(cond)
                walk_items(body)
            walk_items(node.else_body or [])
        elif isinstance(node, Loop):
            if node.var:
                out.add(node.var)
            walk_items(node.cond)
            walk_items(node.body)
        elif isinstance(node, Case):
            for _, body in node.arms:
                walk_items(body)
        elif isinstance(node, Group):
            walk_items(node.body)
        elif isinstance(node, Arithmetic):
            for m in _ARITH_ASSIGN.finditer(node.text):
                out.add(next(g for g in m.groups() if g))

    def walk_items(items: list[Item]) -> None:
        for item in items:
            walk(item.node)

    walk_items(items)
    return out


def pattern_regex(pieces: list[Piece]) -> str | None:
    """A `case` pattern: quoted characters match themselves, unquoted ones are glob syntax."""
    out = []
    for p in pieces:
        if p.text is None:
            return None
        out.append(re.escape(p.text) if p.quoted else glob_regex(p.text))
    return "".join(out)


def _chars(pieces: list[Piece]) -> list[tuple]:
    """One entry per character: (char or None for an unknown piece, piece, index in it)."""
    out: list[tuple] = []
    for p in pieces:
        if p is BREAK:
            continue
        if p.text is None:
            out.append((None, p, 0))
        else:
            out.extend((ch, p, k) for k, ch in enumerate(p.text))
    return out


def _pieces(chars: list[tuple]) -> list[Piece]:
    out: list[Piece] = []
    run: list[tuple] = []

    def flush() -> None:
        if not run:
            return
        p, a = run[0][1], run[0][2]
        b = run[-1][2] + 1
        text = "".join(ch for ch, _, _ in run)
        src = None if p.src is None else p.src + a
        if p.lit:
            out.append(Piece(text, src, p.rs + a, p.rs + b, True, p.quoted, p.note, p.ext, p.assumed))
        else:
            out.append(Piece(text, src, p.rs, p.re, False, p.quoted, p.note, p.ext, p.assumed))
        run.clear()

    for entry in chars:
        ch, p, k = entry
        if ch is None:
            flush()
            out.append(p)
            continue
        if run and (run[-1][1] is not p or run[-1][2] + 1 != k):
            flush()
        run.append(entry)
    flush()
    return out


def _split_chars(chars: list[tuple], ifs: str | None) -> list[tuple[int, int]]:
    """Where `read` splits its input: (start, end) indexes into chars."""
    text = "".join("\0" if ch is None else ch for ch, _, _ in chars)
    return ifs_segments(text, ifs)[0]
