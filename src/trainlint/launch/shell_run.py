"""Walks a launcher's command tree as bash would run it, without running anything, and collects the launches.

State is straight-line: the last assignment before a command wins. A branch (`if`, `case` on an unknown
subject) runs on a copy of the state and the copies are merged after it: a variable the branches leave different
becomes unknown. A `for` over known words runs once per word; other loops run their body once, with the
variables the body assigns already unknown (a later pass could have changed them). A loop over the caller's
arguments (an option parser) is read as the run as documented (no options) takes it: a variable it sets keeps the
value it had before, as an assumption the caller could override. Functions run when called.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from dataclasses import replace as dc_replace
from pathlib import Path
from typing import Callable

from trainlint.launch.model import Invocation, LaunchProblem, Word
from trainlint.launch.shell_expand import Expander, Frame, State, nested_frame
from trainlint.launch.shell_words import (BREAK, Doc, Field, Piece, Value, Var, normjoin, text_value, unknown_value,
                                          value_word)
from trainlint.launch.shell_forms import SBATCH, launch, looks_like_command, peel, read_options
from trainlint.launch.shell_lex import _ASSIGN_HEAD, ArrayLit, Lexer, Lit, Problem, W
from trainlint.launch.shell_parse import Arithmetic, Case, FuncDef, Group, If, Item, Loop, Parser, Simple
from trainlint.launch.shell_support import (_ARITH_ASSIGN, _chars, _elsewhere, _key, _pieces, _split_chars,
                                            assigned_names, merge, pattern_regex)

EXIT, RETURN, BREAK_LOOP, CONTINUE = "exit", "return", "break", "continue"
_MAX_PROBLEMS = 50
_MAX_ITERATIONS = 256  # `for` bodies run per word; past this, loops are read once like `while`
_BUILTINS = frozenset(("cd", "pushd", "popd", "export", "declare", "typeset", "local", "readonly", "unset", "read",
                       "source", ".", "set", "shift", "exit", "return", "break", "continue", "eval"))
_SLURM_ENV = {"nodes": ("SLURM_NNODES", "SLURM_JOB_NUM_NODES"), "ntasks_per_node": ("SLURM_NTASKS_PER_NODE",),
              "ntasks": ("SLURM_NTASKS", "SLURM_NPROCS"), "gpus_per_node": ("SLURM_GPUS_PER_NODE",),
              "cpus_per_task": ("SLURM_CPUS_PER_TASK",), "job_name": ("SLURM_JOB_NAME",),
              "partition": ("SLURM_JOB_PARTITION",)}


@dataclass
class Outer:
    """The command a string runs inside (`srun bash -c "..."`): its span, job prefixes and environment."""

    span: tuple[int, int]
    jobs: list = field(default_factory=list)
    env: list = field(default_factory=list)  # [(name, Word)]


class Reader:
    """One file's reading. `feed` can be called again with more text in the same coordinates (a README's
    blocks, one after the other): the state carries over, as in a terminal session."""

    def __init__(self, file: Path, read: Callable[[Path], str | None] | None = None,
                 sources: tuple[str, ...] = (), collect: bool = True):
        self.file, self.read_file, self.collect = file, read, collect
        self.sources = sources or (_key(file),)
        self.st = State(file=file.as_posix())
        self.problems: list[LaunchProblem] = []
        self.invocations: list[Invocation] = []
        self.sbatch: list[tuple[str, Word | None]] = []
        self.doc = Doc("", file)
        self.iterations = _MAX_ITERATIONS
        self.depth = 0
        self.called: set[str] = set()
        self.made: list[str] = []  # Invocation.made

    # ---- entry ------------------------------------------------------------------------------------------------
    def feed(self, text: str, doc_text: str | None = None) -> None:
        """Read `text`. doc_text: the file as written when `text` is a masked copy of the same length (a
        README with everything but one block blanked), for spans and raw words."""
        self.doc = Doc(text if doc_text is None else doc_text, self.file)
        self.st.doc = self.doc
        if "\x00" in text:
            self.problem(0, 0, "the file contains NUL bytes: it is not a shell script")
            return
        crlf = text.find("\r\n")
        if crlf >= 0:
            self.problem(crlf, crlf + 1, "Windows (CRLF) line endings: bash reads each `\\r` as part of the "
                                         "line's last word, so the commands fail as written")
        self.sbatch_header(text)
        problems: list[Problem] = []
        try:
            toks = Lexer(text, problems).tokens()
            items = Parser(toks, problems).parse()
        except RecursionError:
            self.problem(0, 0, "the file nests too deeply to read")
            return
        frame = Frame(text)
        self.lex_problems(problems, frame)
        defined_before = set(self.st.funcs)
        try:
            self.run(items, self.st, frame, None)
        except RecursionError:
            self.problem(0, 0, "the file nests too deeply to read")
        for name, (body, fr) in list(self.st.funcs.items()):
            if name not in self.called and name not in defined_before:
                # never called here: read once anyway (a sourced helper, or a CLI dispatching on "$1")
                sub = self.st.copy()
                sub.positional = None
                self.called.add(name)
                self.run(body, sub, fr, None)

    def result(self) -> tuple[tuple[Invocation, ...], tuple[LaunchProblem, ...]]:
        seen, out = set(), []
        for inv in self.invocations:  # a function called twice alike: one launch
            key = (inv.span, inv.launcher, inv.script and inv.script.text, inv.module, inv.cwd,
                   tuple(w.text for w in inv.args), tuple((n, w and w.text) for n, w in inv.options))
            if key not in seen:
                seen.add(key)
                out.append(inv)
        problems = self.problems[:_MAX_PROBLEMS]
        if len(self.problems) > _MAX_PROBLEMS:
            last = self.problems[_MAX_PROBLEMS]
            problems.append(LaunchProblem(self.file, last.span,
                                          f"{len(self.problems) - _MAX_PROBLEMS} more problems not shown"))
        return tuple(out), tuple(problems)

    def problem(self, start: int, end: int, message: str) -> None:
        self.problems.append(LaunchProblem(self.file, self.doc.span(start, end), message))

    def lex_problems(self, problems: list[Problem], frame: Frame) -> None:
        for p in problems:
            self.problem(*frame.ref(p.start, p.end), p.message)

    # ---- #SBATCH ----------------------------------------------------------------------------------------------
    def sbatch_header(self, text: str) -> None:
        """`#SBATCH` lines before the first command: sbatch reads no directive after it."""
        pos = 0
        while pos < len(text):
            eol = text.find("\n", pos)
            eol = len(text) if eol < 0 else eol
            line = text[pos:eol]
            stripped = line.strip()
            if stripped.startswith("#SBATCH"):
                start = pos + line.index("#SBATCH") + len("#SBATCH")
                masked = text[:start] + _mask_operators(text[start:eol]) + text[eol:]  # same offsets
                lexer = Lexer(masked)
                lexer.n, lexer.pos = eol, start
                toks = [t for t in lexer.tokens() if isinstance(t, W)]
                ex = Expander(State(), Frame(masked))
                fields = [Field(ex.parts(t.parts), (t.start, t.end)) for t in toks]
                opts, _ = read_options(fields, 0, SBATCH, stop_at_command=False)
                for name, value in opts:
                    if name:
                        self.sbatch.append((name, _unmask(value.word(self.doc)) if value is not None else None))
                        self.slurm_env(name, value)
            elif stripped and not stripped.startswith("#"):
                return
            pos = eol + 1

    def slurm_env(self, name: str, value: Field | None) -> None:
        if value is None or value.text is None or name not in _SLURM_ENV:
            return
        if name in ("nodes", "ntasks", "ntasks_per_node") and not value.text.isdigit():
            return  # a range (`--nodes=2-4`): the allocation decides
        note = f"{_SLURM_ENV[name][0]} comes from `#SBATCH --{name.replace('_', '-')}` (an sbatch command-line " \
               f"option overrides it)"
        pieces = tuple(p._replace(note=note) for p in value.pieces)
        for var in _SLURM_ENV[name]:
            self.st.slurm[var] = Value(pieces, value.tok)

    # ---- the tree ---------------------------------------------------------------------------------------------
    def run(self, items: list[Item], st: State, frame: Frame, outer: Outer | None) -> str | None:
        for item in items:
            if item.mode in ("bg", "pipe"):
                self.node(item.node, st.copy(), frame, outer)
                continue
            flow = self.node(item.node, st, frame, outer)
            if flow in (EXIT, RETURN, BREAK_LOOP, CONTINUE) and item.mode == "seq":
                return flow
        return None

    def node(self, node, st: State, frame: Frame, outer: Outer | None) -> str | None:
        kind = type(node)
        if kind is Simple:
            return self.simple(node, st, frame, outer)
        if kind is If:
            return self.if_(node, st, frame, outer)
        if kind is Loop:
            return self.loop(node, st, frame, outer)
        if kind is Case:
            return self.case(node, st, frame, outer)
        if kind is Group:
            if node.subshell:
                flow = self.run(node.body, st.copy(), frame, outer)
                return None if flow == EXIT else flow
            return self.run(node.body, st, frame, outer)
        if kind is FuncDef:
            st.funcs[node.name] = (node.body, frame)
        elif kind is Arithmetic:
            line = self.doc.line(frame.ref(node.start, node.start)[0])
            for m in _ARITH_ASSIGN.finditer(node.text):
                name = next(g for g in m.groups() if g)
                st.assign(name, unknown_value(f"{name} is changed by arithmetic on line {line}"))
        return None

    def line_of(self, frame: Frame, offset: int) -> int:
        return self.doc.line(frame.ref(offset, offset)[0])

    def if_(self, node: If, st: State, frame: Frame, outer: Outer | None) -> str | None:
        alts: list[State] = []
        for cond, body in node.clauses:
            self.run(cond, st, frame, outer)
            branch = st.copy()
            if self.run(body, branch, frame, outer) not in (EXIT, RETURN):
                alts.append(branch)
        branch = st.copy()
        if node.else_body is None or self.run(node.else_body, branch, frame, outer) not in (EXIT, RETURN):
            alts.append(branch)
        if not alts:
            return EXIT
        merge(st, alts, "`if`", self.line_of(frame, node.start))
        return None

    def case(self, node: Case, st: State, frame: Frame, outer: Outer | None) -> str | None:
        ex = Expander(st, frame, self.subst)
        subject = ex.word(node.subject).text if node.subject is not None else None
        line = self.line_of(frame, node.start)
        if subject is not None:
            regexes = [[pattern_regex(ex.parts(p.parts)) for p in pats] for pats, _ in node.arms]
            if all(r is not None for rs in regexes for r in rs):
                for rs, (_, body) in zip(regexes, node.arms):
                    if any(re.fullmatch(r, subject, re.S) for r in rs):
                        flow = self.run(body, st, frame, outer)
                        return flow if flow != BREAK_LOOP else None
                return None
        alts = []
        catch_all = False
        for pats, body in node.arms:
            catch_all = catch_all or any(p.literal() == "*" for p in pats)
            branch = st.copy()
            if self.run(body, branch, frame, outer) not in (EXIT, RETURN):
                alts.append(branch)
        if not catch_all:
            alts.append(st.copy())
        if alts:
            merge(st, alts, "`case`", line)
        return None

    def loop(self, node: Loop, st: State, frame: Frame, outer: Outer | None) -> str | None:
        line = self.line_of(frame, node.start)
        ex = Expander(st, frame, self.subst)
        if node.kind in ("for", "select"):
            if node.items is None:
                words = [Field(list(v.pieces)) for v in st.positional] if st.positional is not None else None
            else:
                words = [f for tok in node.items for f in ex.fields(tok)]
            if words is not None and all(f.text is not None for f in words) and len(words) <= self.iterations:
                self.iterations -= len(words)
                for f in words:
                    st.assign(node.var, Value(tuple(f.pieces)))
                    flow = self.run(node.body, st, frame, outer)
                    if flow == BREAK_LOOP:
                        break
                    if flow in (EXIT, RETURN):
                        return flow
                return None
        body = st.copy()
        note = f"changes in the `{node.kind.rstrip('(')}` loop at line {line}"
        assigned = assigned_names(node.cond + node.body) | ({node.var} if node.var else set())
        for name in assigned:
            old = body.vars.get(name)
            # ext: a value from an earlier pass is one the body assigns; it does not hide a caller's default
            body.vars[name] = Var(Value((Piece(None, None, 0, 0, False, False, f"{name} {note}", True),)), None,
                                  old.exported if old else False)
        self.run(node.cond, body, frame, outer)
        self.run(node.body, body, frame, outer)  # an `exit` inside is conditional on the loop running at all
        before = dict(st.vars)
        merge(st, [st.copy(), body], f"`{node.kind.rstrip('(')}` loop", line)
        if st.positional is None and _reads_arguments(node, frame):
            keep_defaults(st, before, assigned, frame.ref(node.start, node.start)[0])
        return None

    # ---- simple commands --------------------------------------------------------------------------------------
    def simple(self, node: Simple, st: State, frame: Frame, outer: Outer | None) -> str | None:
        ex = Expander(st, frame, self.subst)
        if not node.words:
            for a in node.assigns:
                self.assign(a, st, ex, None)
            return None
        first = node.words[0]
        head = ex.fields(first) if isinstance(first, W) else []
        name = head[0].text if head else None
        if name is None:
            return None
        if name.startswith("-") and outer is None:
            self.orphan_options(name, frame.ref(node.start, node.end))
        if name in ("export", "declare", "typeset", "local", "readonly"):
            return self.declare(name, node, st, ex)
        if name in _MAKERS and name not in st.funcs:
            words = [f.text for tok in node.words[1:] if isinstance(tok, W) for f in ex.fields(tok)]
            self.made.extend(p for p in made_by(name, words, st.cwd) if p not in self.made)
            return None
        interesting = name in _BUILTINS or name in st.funcs or looks_like_command(name)
        if not interesting:
            return None
        fields = head + [f for tok in node.words[1:] if isinstance(tok, W) for f in ex.fields(tok)]
        prefix = [self.assignment(a, ex) for a in node.assigns if isinstance(a, W)]
        if name in st.funcs and len(head) == 1:
            return self.call(name, fields, st, outer)
        if name in _BUILTINS and len(head) == 1:
            return self.builtin(name, fields, node, st, ex, frame, outer)
        peeled = peel(fields)
        span = outer.span if outer else frame.ref(node.start, node.end)
        env = (outer.env if outer else []) + [(n, value_word(v, self.doc, span)) for n, v in prefix if n] + \
            [(n, f.word(self.doc)) for n, f in peeled.env]
        jobs = (outer.jobs if outer else []) + peeled.job
        if peeled.nested is not None:
            return self.nested(peeled, st, Outer(span, jobs, env), name == "eval",
                               [(n, v) for n, v in prefix if n] + [(n, Value(tuple(f.pieces))) for n, f in peeled.env])
        found = launch(peeled.rest, peeled.module)
        if found is None or not self.collect:
            return None
        cwd = st.cwd
        if peeled.chdir is not None:
            cwd = normjoin(cwd, peeled.chdir.text) if peeled.chdir.text is not None else None
        doc = self.doc
        exported = [(n, value_word(v.value, doc, span)) for n, v in st.vars.items()
                    if v.exported and v.items is None and v.value is not None]
        merged: dict[str, Word] = {}
        for n, w in exported + env:
            merged.pop(n, None)
            merged[n] = w
        # innermost first (`sbatch --wrap "srun ..."`: srun's own options are the ones in force), then #SBATCH
        job_options = tuple((n, f.word(doc) if f is not None else None) for _, opts in reversed(jobs) for n, f in opts)
        self.invocations.append(Invocation(
            file=self.file, span=doc.span(*span),
            launcher=" ".join([j for j, _ in jobs] + [found.launcher]),
            script=found.script.word(doc) if found.script is not None else None, module=found.module, cwd=cwd,
            args=tuple(f.word(doc) for f in found.args),
            options=tuple((n, f.word(doc) if f is not None else None) for n, f in found.options),
            env=tuple(merged.items()), job_options=job_options + tuple(self.sbatch), made=tuple(self.made)))
        from trainlint.launch.missing import output_words  # what this command writes, later ones may read

        for word in output_words(self.invocations[-1]):
            path = normjoin(cwd, word.text) if word.text else None
            if path is not None and path not in self.made:
                self.made.append(path)
        return None

    def orphan_options(self, name: str, span: tuple[int, int]) -> None:
        """`--flag value` as a command right after a launch: the launch's line lacks its backslash, so bash runs
        these options as a command of their own and the launch never gets them."""
        line = self.doc.line(span[0])
        last = self.invocations[-1].span if self.invocations else None
        if last is None or last.end_line != line - 1:
            return
        if any(p.span.line == line - 1 for p in self.problems):  # a `\ ` already said so
            return
        self.problem(*span, f"`{name}` starts a command of its own: the line before it does not end with a "
                            f"backslash, so the launch above never gets these options")

    def assignment(self, tok: W, ex: Expander) -> tuple[str, Value]:
        head = tok.parts[0]
        m = _ASSIGN_HEAD.match(head.text)
        name = m.group().rstrip("=").rstrip("+")
        rest = Lit(head.text[m.end():], head.src + m.end(), False)
        parts = ([rest] if rest.text else []) + tok.parts[1:]
        start, end = ex.frame.ref(head.src + m.end(), tok.end)
        value = Value(tuple(ex.parts(parts)) or (Piece("", head.src + m.end(), start, start, False, True),),
                      (start, end))
        if m.group().endswith("+=") and "[" not in name:
            old = ex.st.scalar(name)
            if old is not None:
                value = Value(old.pieces + value.pieces, value.at)
        return (name if "[" not in name else ""), value

    def assign(self, tok, st: State, ex: Expander, exported: bool | None) -> None:
        if isinstance(tok, ArrayLit):
            items = tuple(Value(tuple(f.pieces)) for w in tok.items for f in ex.fields(w))
            old = st.vars.get(tok.name)
            if tok.append and old is not None and old.items is not None:
                items = old.items + items
            keep = old.exported if old else False
            st.vars[tok.name] = Var(None, items, keep if exported is None else exported)
            return
        name, value = self.assignment(tok, ex)
        if not name:  # `A[3]=x`: the array changes in a way not tracked
            target = tok.parts[0].text.split("[", 1)[0]
            st.assign(target, unknown_value(f"{target} has an element set by index"))
            return
        st.assign(name, value, exported)

    def declare(self, name: str, node: Simple, st: State, ex: Expander) -> None:
        exported = name == "export" or None
        for tok in node.words[1:]:
            if isinstance(tok, ArrayLit):
                self.assign(tok, st, ex, exported)
                continue
            head = tok.parts[0] if tok.parts else None
            if isinstance(head, Lit) and not head.quoted and _ASSIGN_HEAD.match(head.text):
                self.assign(tok, st, ex, exported)
                continue
            for f in ex.fields(tok):
                t = f.text or ""
                if t.startswith("-") and "x" in t:
                    exported = True
                elif t and not t.startswith(("-", "+")) and t in st.vars and exported:
                    old = st.vars[t]
                    st.vars[t] = Var(old.value, old.items, True)
        return None

    def builtin(self, name: str, fields: list[Field], node: Simple, st: State, ex: Expander, frame: Frame,
                outer: Outer | None) -> str | None:
        args = fields[1:]
        if name in ("cd", "pushd"):
            targets = [f for f in args if not (f.text or "").startswith("-") or f.text == "-"]
            if name == "pushd":
                st.dirstack.append(st.cwd)
            target = targets[0].text if targets else None
            st.cwd = None if target in (None, "-") else normjoin(st.cwd, target)
        elif name == "popd":
            st.cwd = st.dirstack.pop() if st.dirstack else None
        elif name == "unset":
            funcs = any(f.text == "-f" for f in args)
            for f in args:
                if f.text and not f.text.startswith("-"):
                    (st.funcs if funcs else st.vars).pop(f.text, None)
        elif name == "read":
            self.read_builtin(args, node, st, ex)
        elif name in ("source", "."):
            if args:
                self.source(args[0], st, frame.ref(node.start, node.end))
        elif name == "set":
            if args and args[0].text == "--":
                st.positional = tuple(Value(tuple(f.pieces)) for f in args[1:]) \
                    if all(f.text is not None for f in args[1:]) else None
        elif name == "shift":
            if st.positional is not None:
                n = int(args[0].text) if args and (args[0].text or "").isdigit() else 1
                st.positional = st.positional[n:]
        elif name == "exit":
            return EXIT
        elif name == "return":
            return RETURN
        elif name == "break":
            return BREAK_LOOP
        elif name == "continue":
            return CONTINUE
        elif name == "eval":
            span = outer.span if outer else frame.ref(node.start, node.end)
            peeled = peel(fields)
            return self.nested(peeled, st, Outer(span, outer.jobs if outer else [], outer.env if outer else []),
                               True)
        return None

    def read_builtin(self, args: list[Field], node: Simple, st: State, ex: Expander) -> None:
        raw, delim, array, names, i = False, "\n", None, [], 0
        while i < len(args):
            t = args[i].text or ""
            if t.startswith("-") and len(t) > 1:
                for k, ch in enumerate(t[1:], 1):
                    if ch == "r":
                        raw = True
                    elif ch in "dapntuiN":
                        value = t[k + 1:] if k + 1 < len(t) else (args[i + 1].text if i + 1 < len(args) else "")
                        if k + 1 >= len(t):
                            i += 1
                        if ch == "d":
                            delim = (value or "\0")[:1]
                        elif ch == "a":
                            array = value
                        break
            else:
                names.append(t)
            i += 1
        source = None
        for r in node.redirs:
            if r.heredoc is not None:
                source = ex.parts(r.heredoc.parts)
            elif r.op == "<<<" and r.target is not None:
                source = ex.parts(r.target.parts) + [Piece("\n", None, 0, 0, False, True)]
        targets = ([array] if array else []) + names or ["REPLY"]
        if source is None:
            for n in targets:
                if n:
                    st.assign(n, unknown_value(f"{n} is read from standard input"))
            return
        chars = _chars(source)
        if delim != "\0":
            cut = next((k for k, (ch, _, _) in enumerate(chars) if ch == delim), len(chars))
            chars = chars[:cut]
        if not raw:
            out, k = [], 0
            while k < len(chars):
                if chars[k][0] == "\\" and k + 1 < len(chars):
                    if chars[k + 1][0] != "\n":
                        out.append(chars[k + 1])
                    k += 2
                    continue
                out.append(chars[k])
                k += 1
            chars = out
        ifs = st.ifs()
        for a in node.assigns:  # `IFS=, read -ra GPUS <<< "$LIST"`: IFS for this read only
            if isinstance(a, W) and a.parts and isinstance(a.parts[0], Lit) and a.parts[0].text.startswith("IFS="):
                ifs = self.assignment(a, ex)[1].text
                if ifs is None:
                    for n in targets:
                        st.assign(n, unknown_value(f"{n} is read with an IFS that is not known"))
                    return
        segs = _split_chars(chars, ifs)
        if array:
            old = st.vars.get(array)
            st.vars[array] = Var(None, tuple(Value(tuple(_pieces(chars[a:b]))) for a, b in segs),
                                 bool(old and old.exported))
            return
        names = names or ["REPLY"]
        for k, n in enumerate(names):
            if k >= len(segs):
                st.assign(n, Value((Piece("", None, 0, 0, False, True),)))
            elif k == len(names) - 1:  # the last name takes the rest of the line
                rest = _pieces(chars[segs[k][0]:segs[-1][1]])
                st.assign(n, Value(tuple(rest) or (Piece("", None, 0, 0, False, True),)))
            else:
                a, b = segs[k]
                st.assign(n, Value(tuple(_pieces(chars[a:b])) or (Piece("", None, 0, 0, False, True),)))

    def source(self, target: Field, st: State, span: tuple[int, int]) -> None:
        name = target.text
        line = self.doc.line(span[0])
        if name is None:
            st.unread += (f"a file sourced on line {line}",)
            return
        path = Path(name) if name.startswith("/") else self.file.parent / name
        key = _key(path)
        if key in self.sources:
            chain = " -> ".join(Path(k).name for k in self.sources + (key,))
            self.problem(*span, f"circular source: {chain}")
            return
        try:
            text = self.read_file(path) if self.read_file else None
        except (OSError, UnicodeError, ValueError):  # the caller's reader failed: as if unreadable
            text = None
        if text is None or len(self.sources) > 8:
            st.unread += (f"{name} (sourced on line {line})",)
            return
        sub = Reader(path, self.read_file, self.sources + (key,), collect=False)
        sub.st = st.copy()
        sub.st.funcs = {}
        sub.st.file = path.as_posix()
        sub.feed(text)
        for p in sub.problems:
            if p.message.startswith("circular source"):
                self.problem(*span, p.message)
        for var_name, var in sub.st.vars.items():
            if st.vars.get(var_name) is not var:  # set there: its text is known, its position is in that file
                st.vars[var_name] = _elsewhere(var, span)
        st.unread += tuple(u for u in sub.st.unread if u not in st.unread)
        st.cwd = sub.st.cwd

    def call(self, name: str, fields: list[Field], st: State, outer: Outer | None) -> None:
        self.called.add(name)
        if self.depth > 8:
            return None
        body, frame = st.funcs[name]
        saved = st.positional
        st.positional = tuple(Value(tuple(f.pieces)) for f in fields[1:])
        if saved is None and any(_passes_callers_args(f) for f in fields[1:]):
            st.positional = None  # `parse_args "$@"`: still the caller's arguments, any number of them
        self.depth += 1
        try:
            flow = self.run(body, st, frame, outer)
        finally:
            self.depth -= 1
            st.positional = saved
        return EXIT if flow == EXIT else None

    def nested(self, peeled, st: State, outer: Outer, same_shell: bool,
               env: list[tuple[str, Value]] = ()) -> str | None:
        """`bash -c STRING` / `eval ...`: the string is lexed again, each character mapped to the file. `env`:
        the command's `VAR=value` prefixes (`MODEL=x bash -c '... $MODEL'`), the new shell's environment."""
        if self.depth > 4:
            return None
        pieces: list[Piece] = []
        for k, f in enumerate(peeled.nested):
            if k:
                pieces.append(BREAK)
            pieces.extend(f.pieces)
        frame = nested_frame(pieces)
        problems: list[Problem] = []
        items = Parser(Lexer(frame.text, problems).tokens(), problems).parse()
        self.lex_problems(problems, frame)
        sub = st if same_shell else st.copy()
        if not same_shell:
            sub.vars = {k: v for k, v in st.vars.items() if v.exported}
            sub.vars.update((k, Var(v, None, True)) for k, v in env)
            sub.positional = tuple(Value(tuple(f.pieces)) for f in peeled.positional[1:])
        self.depth += 1
        try:
            flow = self.run(items, sub, frame, outer)
        finally:
            self.depth -= 1
        return flow if same_shell else None

    # ---- command substitutions that are pure functions of the file ---------------------------------------------
    def subst(self, sub, ex: Expander) -> str | None:
        """`$(dirname "$0")`, `$(cd "$(dirname "$0")" && pwd)`, `$(pwd)`, `$(basename X)`, `$(realpath X)`."""
        if not sub.inner or sub.kind not in ("$(", "`"):
            return None
        items = Parser(list(sub.inner), []).parse()
        if not items or not all(isinstance(i.node, Simple) and not i.node.assigns for i in items) or len(items) > 2:
            return None
        frame = ex.frame if sub.kind == "$(" else Frame("")
        st = ex.st.copy()
        st.vars["BASH_SOURCE"] = Var(text_value(st.file))
        inner = Expander(st, frame, self.subst)
        inner.st.slurm = dict(st.slurm)
        cwd = st.cwd
        result = None
        for item in items:
            argv = []
            for tok in item.node.words:
                real = [x for x in tok.parts if not (isinstance(x, Lit) and not x.text)] if isinstance(tok, W) else []
                if len(real) == 1 and getattr(real[0], "name", "") == "0" and not getattr(real[0], "op", ""):
                    argv.append(st.file)  # "$0": the launcher itself, wherever it is run from
                    continue
                fs = inner.fields(tok) if isinstance(tok, W) else []
                argv.extend(f.text for f in fs)
            if not argv or any(a is None for a in argv):
                return None
            cmd, rest = argv[0], [a for a in argv[1:] if not a.startswith("-")]
            if cmd == "cd" and len(items) == 2:
                cwd = normjoin(cwd, rest[0]) if rest else None
            elif cmd == "dirname" and rest:
                result = posixpath.dirname(rest[0].rstrip("/")) or "."
            elif cmd == "basename" and rest:
                result = posixpath.basename(rest[0].rstrip("/"))
                if len(rest) > 1 and result.endswith(rest[1]):
                    result = result[:-len(rest[1])]
            elif cmd in ("realpath", "readlink") and rest:
                result = normjoin(cwd, rest[0])
            elif cmd == "pwd":
                result = cwd if cwd != "" else "."
            else:
                return None
        return result


_CALLER_ARGS = re.compile(r"\$\{?[1-9#@*]|\bgetopts\b")


def _reads_arguments(node: Loop, frame: Frame) -> bool:
    """An option parser: a loop over the caller's arguments (`while [[ "$1" != "" ]]`, `while [ $# -gt 0 ]`,
    `while getopts ...`, `while true; do case "$1" in`, `for arg in "$@"`)."""
    if node.kind in ("for", "select"):
        return node.items is None or any(_CALLER_ARGS.search(frame.text[t.start:t.end]) for t in node.items)
    words = [frame.text[i.node.start:i.node.end] for i in node.cond if isinstance(i.node, Simple)]
    words += [frame.text[i.node.subject.start:i.node.subject.end] for i in node.body
              if isinstance(i.node, Case) and i.node.subject is not None]
    return node.kind in ("while", "until") and any(_CALLER_ARGS.search(w) for w in words)


def _passes_callers_args(f: Field) -> bool:
    return any(p.text is None and p.note.startswith(("$@ ", "$* ")) for p in f.pieces)


def keep_defaults(st: State, before: dict[str, Var], names: set[str], at: int) -> None:
    """The run as documented passes no options, so an option parser's body never runs: a variable it sets keeps
    the value it had before the loop, an assumption (the caller could override it). A variable without one stays
    unknown, and so does one whose value before the loop is the empty string (`MODEL=""`): that is a required
    option the caller must pass (open-r1's slurm/train.slurm checks `-z "$MODEL"` and exits), not a usable default."""
    for name in names:
        old = before.get(name)
        if old is None or old.items is not None or old.value is None or old.value.text is None or \
                old.value.text == "":
            continue
        value = old.value
        assumed = st.assumption(name, value.text, value.at[0] if value.at else at)
        pieces = tuple(p if p is BREAK or p.assumed is not None else p._replace(assumed=assumed)
                       for p in value.pieces) or (Piece("", None, 0, 0, False, True, "", False, assumed),)
        now = st.vars.get(name)
        st.vars[name] = Var(Value(pieces, value.at), None, old.exported or bool(now and now.exported))


# sbatch reads a directive's words itself, not through a shell: split at blanks, quotes honoured, and `&`, `|`,
# `(`, `)`, `[`, `]`, `*` ordinary characters (`#SBATCH --constraint=[a100|h100]*2`, `--gres=gpu:a100:2(S:0-1)`
# as sbatch(1) writes them; no glob, no pipe). Outside quotes they are swapped for private-use characters, one for one, before the shell lexer sees
# the line, and swapped back in the words it yields.
_OPERATORS = "&|;<>()[]*?"
_MASKED = "".join(chr(0xE000 + i) for i in range(len(_OPERATORS)))
_MASK = str.maketrans(_OPERATORS, _MASKED)
_UNMASK = str.maketrans(_MASKED, _OPERATORS)


_MAKERS = frozenset(("wget", "curl", "huggingface-cli", "hf", "git", "[", "test"))  # (`[[ ]]` is not read: shell_parse)


def made_by(name: str, words: list[str | None], cwd: str | None) -> list[str]:
    """The paths a download (`wget [-O f] [-P d] URL`, `curl -o f` / `-O URL`, `huggingface-cli download repo
    [files] --local-dir d`, `git clone URL [d]`) or an existence test (`[ ! -f f ]`, `test -e f`) names, joined to `cwd`; a folder
    ends in "/". Words whose value is unknown are left out."""
    out: list[str] = []
    urls = [w for w in words if w and "://" in w]

    def value(*flags: str) -> str | None:
        for i, w in enumerate(words):
            for flag in flags:
                if w == flag and i + 1 < len(words):
                    return words[i + 1]
                if w and flag.startswith("--") and w.startswith(flag + "="):
                    return w.split("=", 1)[1]
                if w and not flag.startswith("--") and w.startswith(flag) and len(w) > len(flag):
                    return w[len(flag):]
        return None

    def base(url: str) -> str:
        return posixpath.basename(url.split("?", 1)[0].split("#", 1)[0].rstrip("/"))

    if name == "wget":
        target = value("-O", "--output-document")
        folder = value("-P", "--directory-prefix") or ""
        out += [target] if target else [posixpath.join(folder, base(u)) for u in urls]
    elif name == "curl":
        target = value("-o", "--output")
        out += [target] if target else [base(u) for u in urls if "-O" in words or "--remote-name" in words]
    elif name in ("huggingface-cli", "hf") and words[:1] == ["download"]:
        folder = value("--local-dir")
        plain = [w for i, w in enumerate(words[2:], 2) if w and not w.startswith("-")
                 and not (words[i - 1] or "").startswith("-")]
        if folder:
            out += [posixpath.join(folder, f) for f in plain] or [folder.rstrip("/") + "/"]
    elif name == "git" and words[:1] == ["clone"]:
        rest = [w for w in words[1:] if w and not w.startswith("-")]
        if rest and "://" in rest[0] or rest and rest[0].startswith("git@"):
            folder = rest[1] if len(rest) > 1 else base(rest[0]).removesuffix(".git")
            out.append(folder.rstrip("/") + "/")
    else:  # `[ ! -f x ]`, `test -s x`
        out += [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-f", "-e", "-s", "-r")]
    joined = [(normjoin(cwd, x), x.endswith("/")) for x in out if x]
    return [p + "/" if folder else p for p, folder in joined if p]


def _mask_operators(line: str) -> str:
    out, quote = [], ""
    for ch in line:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in _OPERATORS:
            ch = ch.translate(_MASK)
        out.append(ch)
    return "".join(out)


def _unmask(word: Word) -> Word:
    if word.text is None or not any(c in word.text for c in _MASKED):
        return word
    return dc_replace(word, text=word.text.translate(_UNMASK), raw=word.raw.translate(_UNMASK))
