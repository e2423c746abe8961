"""The command tree of a lexed launcher, as bash's grammar builds it: lists, pipelines, `if`, loops, `case`,
functions. A stray keyword or an unclosed construct is reported and skipped, so the rest is still read.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainlint.launch.shell_lex import _ASSIGN_HEAD, _NAME, ArithCmd, ArrayLit, Lit, Op, Problem, Redir, W

_MAX_DEPTH = 48  # compound commands inside one another


@dataclass(slots=True)
class Simple:
    assigns: list  # W (NAME=value) and ArrayLit
    words: list  # W
    redirs: list  # Redir
    start: int
    end: int


@dataclass(slots=True)
class If:
    clauses: list  # [(cond nodes, body nodes)]
    else_body: list | None
    start: int


@dataclass(slots=True)
class Loop:
    kind: str  # "for" | "select" | "while" | "until" | "for(("
    var: str
    items: list | None  # W tokens of `for x in ...`; None: "$@" (no `in`)
    cond: list
    body: list
    start: int


@dataclass(slots=True)
class Case:
    subject: W | None
    arms: list  # [(pattern W tokens, body nodes)]
    start: int


@dataclass(slots=True)
class Group:
    body: list
    subshell: bool
    start: int


@dataclass(slots=True)
class FuncDef:
    name: str
    body: list
    start: int


@dataclass(slots=True)
class Arithmetic:
    text: str
    start: int


@dataclass(slots=True)
class Item:
    """One command of a list, and how it runs: "seq" (in this shell), "bg" (`&`), "pipe" (a pipeline stage, a
    subshell), "chain" (after `&&` / `||`: it may not run at all)."""

    node: object
    mode: str


class Parser:
    def __init__(self, toks: list, problems: list[Problem]):
        self.toks = toks
        self.i = 0
        self.problems = problems
        self.depth = 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def word_is(self, tok, *words: str) -> bool:
        return isinstance(tok, W) and tok.literal() in words

    def op_is(self, tok, *kinds: str) -> bool:
        return isinstance(tok, Op) and tok.kind in kinds

    def skip_newlines(self) -> None:
        while self.op_is(self.peek(), "\n", ";"):
            self.i += 1

    def error(self, tok, message: str) -> None:
        start = getattr(tok, "start", 0)
        self.problems.append(Problem(start, getattr(tok, "end", start), message))

    def parse(self) -> list[Item]:
        items = self.items(stop=())
        while self.i < len(self.toks):  # a stray `fi`, `done`, `)` ...: report, drop it, read on
            tok = self.toks[self.i]
            self.error(tok, f"unexpected `{_tok_text(tok)}`")
            self.i += 1
            items += self.items(stop=())
        return items

    def items(self, stop: tuple[str, ...], stop_ops: tuple[str, ...] = ()) -> list[Item]:
        """Commands up to a reserved word in `stop` (in command position) or an operator in `stop_ops`."""
        out: list[Item] = []
        while True:
            self.skip_newlines()
            tok = self.peek()
            if tok is None or self.word_is(tok, *stop) or self.op_is(tok, *stop_ops):
                return out
            if self.word_is(tok, "then", "elif", "else", "fi", "do", "done", "esac", "}", "in") or \
                    self.op_is(tok, ")", ";;", ";&", ";;&", "&&", "||", "|", "|&", "&"):
                return out
            out.extend(self.and_or())

    def and_or(self) -> list[Item]:
        first = self.pipeline()
        chain = [first]
        while self.op_is(self.peek(), "&&", "||"):
            self.i += 1
            while self.op_is(self.peek(), "\n"):
                self.i += 1
            chain.append(self.pipeline())
        bg = self.op_is(self.peek(), "&")
        if bg or self.op_is(self.peek(), ";"):
            self.i += 1
        out: list[Item] = []
        for k, stages in enumerate(chain):
            for node in stages:
                if bg:
                    mode = "bg"
                elif len(stages) > 1:
                    mode = "pipe"
                else:
                    mode = "chain" if len(chain) > 1 and k > 0 else "seq"
                if node is not None:
                    out.append(Item(node, mode))
        return out

    def pipeline(self) -> list:
        while self.word_is(self.peek(), "!", "time"):
            self.i += 1
            if self.word_is(self.peek(), "-p"):  # `time -p`: POSIX output format
                self.i += 1
        stages = [self.command()]
        while self.op_is(self.peek(), "|", "|&"):
            self.i += 1
            while self.op_is(self.peek(), "\n"):
                self.i += 1
            stages.append(self.command())
        return stages

    def command(self):
        tok = self.peek()
        if tok is None:
            return None
        if self.depth >= _MAX_DEPTH:  # skip the line: the file's other commands are still read
            self.error(tok, "commands nest too deeply here: the rest of the line is skipped")
            while self.i < len(self.toks) and not self.op_is(self.peek(), "\n"):
                self.i += 1
            return None
        self.depth += 1
        try:
            return self.command_(tok)
        finally:
            self.depth -= 1

    def command_(self, tok):
        if isinstance(tok, ArithCmd):
            self.i += 1
            return Arithmetic(tok.text, tok.start)
        if isinstance(tok, Op):
            if tok.kind == "(":
                self.i += 1
                body = self.items(stop=(), stop_ops=(")",))
                self.expect_op(")", tok, "`(` subshell")
                self.redirs()
                return Group(body, True, tok.start)
            self.error(tok, f"unexpected `{tok.kind}`")
            self.i += 1
            return None
        if isinstance(tok, W):
            word = tok.literal()
            handler = _COMPOUND.get(word or "")
            if handler:
                node = getattr(self, handler)()
                self.redirs()
                return node
            nxt = self.toks[self.i + 1] if self.i + 1 < len(self.toks) else None
            if word and _NAME.fullmatch(word.replace("-", "_").replace(".", "_").replace(":", "_")) \
                    and self.op_is(nxt, "(") and self.op_is(self.toks[self.i + 2] if self.i + 2 < len(self.toks)
                                                            else None, ")"):
                self.i += 3
                return FuncDef(word, self.func_body(tok), tok.start)
        return self.simple()

    def redirs(self) -> None:
        while isinstance(self.peek(), Redir):
            self.i += 1

    def expect_word(self, word: str, opener, what: str) -> bool:
        self.skip_newlines()
        if self.word_is(self.peek(), word):
            self.i += 1
            return True
        line = getattr(opener, "start", 0)
        self.problems.append(Problem(line, getattr(opener, "end", line), f"{what} is never closed with `{word}`"))
        return False

    def expect_op(self, kind: str, opener, what: str) -> None:
        if self.op_is(self.peek(), kind):
            self.i += 1
        else:
            self.problems.append(Problem(opener.start, opener.end, f"{what} is never closed with `{kind}`"))

    def simple(self) -> Simple | None:
        assigns, words, redirs = [], [], []
        start = end = None
        while True:
            tok = self.peek()
            if isinstance(tok, Redir):
                redirs.append(tok)
            elif isinstance(tok, ArrayLit) and not words:
                assigns.append(tok)
            elif isinstance(tok, W):
                head = tok.parts[0] if tok.parts else None
                if not words and isinstance(head, Lit) and not head.quoted and _ASSIGN_HEAD.match(head.text):
                    assigns.append(tok)
                else:
                    words.append(tok)
            elif isinstance(tok, ArrayLit):  # `declare -a A=(..)`: an argument of the declaration
                words.append(tok)
            else:
                break
            start = tok.start if start is None else start
            end = tok.end
            self.i += 1
        if start is None:
            return None
        return Simple(assigns, words, redirs, start, end)

    def if_(self) -> If:
        opener = self.peek()
        self.i += 1
        clauses, else_body = [], None
        while True:
            cond = self.items(stop=("then",))
            if not self.expect_word("then", opener, "`if`"):
                return If(clauses + [(cond, [])], else_body, opener.start)
            body = self.items(stop=("elif", "else", "fi"))
            clauses.append((cond, body))
            if self.word_is(self.peek(), "elif"):
                self.i += 1
                continue
            if self.word_is(self.peek(), "else"):
                self.i += 1
                else_body = self.items(stop=("fi",))
            self.expect_word("fi", opener, "`if`")
            return If(clauses, else_body, opener.start)

    def while_(self) -> Loop:
        opener = self.peek()
        self.i += 1
        cond = self.items(stop=("do",))
        body = self.loop_body(opener)
        return Loop(opener.literal(), "", None, cond, body, opener.start)

    def loop_body(self, opener) -> list:
        if not self.expect_word("do", opener, f"`{opener.literal()}`"):
            return []
        body = self.items(stop=("done",))
        self.expect_word("done", opener, f"`{opener.literal()}`")
        return body

    def for_(self) -> Loop:
        opener = self.peek()
        self.i += 1
        tok = self.peek()
        if isinstance(tok, ArithCmd):
            self.i += 1
            self.skip_newlines()
            return Loop("for((", "", [], [], self.loop_body(opener), opener.start)
        var = tok.literal() if isinstance(tok, W) else None
        if not var:
            self.error(opener, f"`{opener.literal()}` without a variable name")
            return Loop(opener.literal(), "", [], [], [], opener.start)
        self.i += 1
        while self.op_is(self.peek(), "\n"):
            self.i += 1
        items = None
        if self.word_is(self.peek(), "in"):
            self.i += 1
            items = []
            while isinstance(self.peek(), W):
                items.append(self.peek())
                self.i += 1
        self.skip_newlines()
        return Loop(opener.literal(), var, items, [], self.loop_body(opener), opener.start)

    def case_(self) -> Case:
        opener = self.peek()
        self.i += 1
        subject = self.peek() if isinstance(self.peek(), W) else None
        if subject is not None:
            self.i += 1
        while self.op_is(self.peek(), "\n"):
            self.i += 1
        if not self.word_is(self.peek(), "in"):
            self.error(opener, "`case` without `in`")
            return Case(subject, [], opener.start)
        self.i += 1
        arms = []
        while True:
            self.skip_newlines()
            tok = self.peek()
            if tok is None or self.word_is(tok, "esac"):
                break
            if self.op_is(tok, "("):
                self.i += 1
            patterns = []
            while isinstance(self.peek(), W) or self.op_is(self.peek(), "|"):
                if isinstance(self.peek(), W):
                    patterns.append(self.peek())
                self.i += 1
            if not self.op_is(self.peek(), ")"):
                self.error(self.peek() or opener, "a `case` pattern must end with `)`")
                self.i += 1
                continue
            self.i += 1
            body = self.items(stop=("esac",), stop_ops=(";;", ";&", ";;&"))
            arms.append((patterns, body))
            if self.op_is(self.peek(), ";;", ";&", ";;&"):
                self.i += 1
        self.expect_word("esac", opener, "`case`")
        return Case(subject, arms, opener.start)

    def group(self) -> Group:
        opener = self.peek()
        self.i += 1
        body = self.items(stop=("}",))
        self.expect_word("}", opener, "`{`")
        return Group(body, False, opener.start)

    def function(self):
        opener = self.peek()
        self.i += 1
        tok = self.peek()
        name = tok.literal() if isinstance(tok, W) else None
        if not name:
            self.error(opener, "`function` without a name")
            return None
        self.i += 1
        if self.op_is(self.peek(), "(") and self.op_is(self.toks[self.i + 1] if self.i + 1 < len(self.toks)
                                                       else None, ")"):
            self.i += 2
        return FuncDef(name, self.func_body(opener), opener.start)

    def func_body(self, opener) -> list:
        while self.op_is(self.peek(), "\n"):
            self.i += 1
        node = self.command()
        if node is None:
            self.error(opener, "a function needs a body")
            return []
        return [Item(node, "seq")]

    def test(self) -> Simple:
        """`[[ ... ]]`: its `<`, `&&`, `(` are not shell operators; nothing in it changes state, so skip it."""
        opener = self.peek()
        self.i += 1
        while self.i < len(self.toks) and not self.word_is(self.peek(), "]]"):
            self.i += 1
        if self.i >= len(self.toks):
            self.error(opener, "`[[` is never closed with `]]`")
            return Simple([], [opener], [], opener.start, opener.end)
        end = self.peek().end
        self.i += 1
        return Simple([], [opener], [], opener.start, end)


_COMPOUND = {"if": "if_", "while": "while_", "until": "while_", "for": "for_", "select": "for_", "case": "case_",
             "{": "group", "function": "function", "[[": "test"}


def _tok_text(tok) -> str:
    if isinstance(tok, Op):
        return "newline" if tok.kind == "\n" else tok.kind
    if isinstance(tok, W):
        return tok.literal() or "word"
    return type(tok).__name__

