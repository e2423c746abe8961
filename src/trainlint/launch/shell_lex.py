"""Shell launchers lexed the way bash would, with exact offsets: words, operators, redirections, heredocs.

Nothing here runs anything. A hand-written lexer, because both options the project considered fall short on real
launchers: `shlex` knows neither `$(...)`, `${...}`, heredocs nor backslash-newline, and bashlex (measured) reads
~300 KB/s and raises on `[[ ]]`, arrays and `case`, which every option parser in shell uses. This one follows
bash's token rules (quotes, escapes, continuations, operators, heredocs, arrays) and recovers line by line: an
unterminated quote is reported and closed at the end of its line, so one odd construct never loses the rest.
Offsets are indexes into the text that was lexed; the caller maps them to spans.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Word characters that need no attention: everything but blanks, operators, quotes, `\`, `$` and backquote.
_PLAIN = re.compile(r"[^ \t\n|&;()<>\\'\"`$]+")
_DQ_PLAIN = re.compile(r"[^\"\\$`]+")
_HD_PLAIN = re.compile(r"[^\\$`\n]+")
_ARG_PLAIN = re.compile(r"[^}\\'\"$`]+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN_HEAD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_BLANKS = re.compile(r"(?:[ \t]|\\\n)+")
_IONUM = re.compile(r"[0-9]+(?=[<>])")
_ANSI_NUMERIC = re.compile(r"x[0-9a-fA-F]{1,2}|[0-7]{1,3}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}")
_MAX_DEPTH = 48
_ENDS = frozenset(" \t\n|&;()<>")
_ARRAY_BLANKS = re.compile(r"(?:[ \t\n]|\\\n)+")
# Longest first: `;;&` before `;;` before `;`.
_OPERATORS = ("<<<", "<<-", ";;&", "&>>", "&&", "||", ";;", ";&", "|&", "<<", ">>", "<&", ">&", "<>", ">|", "&>",
              ";", "&", "|", "(", ")", "<", ">")
_OPS_BY_CHAR: dict[str, tuple[str, ...]] = {}
for _op in _OPERATORS:
    _OPS_BY_CHAR[_op[0]] = _OPS_BY_CHAR.get(_op[0], ()) + (_op,)
_REDIRECTS = frozenset(("<<<", "<<-", "<<", ">>", "<&", ">&", "<>", ">|", "&>", "&>>", "<", ">"))
_PARAM_OPS = (":-", ":=", ":+", ":?", "##", "%%", "//", "/#", "/%", "^^", ",,", "-", "=", "+", "?", "#", "%", "/",
              "^", ",", ":", "@")
_SPECIAL_PARAMS = "@*#?$!-0123456789"
RESERVED = frozenset(("if", "then", "elif", "else", "fi", "do", "done", "case", "esac", "while", "until", "for",
                      "select", "in", "function", "{", "}", "!", "[[", "]]", "time"))
# After these words a `((` opens an arithmetic command, not two subshells.
_ARITH_AFTER = frozenset(("for", "do", "then", "else", "elif", "if", "while", "until", "{", "!", "time"))


# ---- word parts -------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class Lit:
    text: str
    src: int | None  # offset of text[0]; its characters follow one another. None: not 1:1 ($'..' escapes)
    quoted: bool


@dataclass(slots=True)
class Param:
    name: str  # "MODEL", "1", "@", ...
    index: list | None  # parts of the [subscript], None without one
    op: str  # "" | ":-" | "#len" | "!" | ...
    arg: list | None  # parts of the word after op
    start: int  # the whole `$X` / `${...}`
    end: int
    quoted: bool


@dataclass(slots=True)
class Sub:
    kind: str  # "$(" | "`" | "<(" | ">("
    start: int
    end: int
    inner: list | None  # tokens of the command inside, when lexed
    quoted: bool


@dataclass(slots=True)
class Arith:
    text: str  # the expression as written
    start: int
    end: int
    quoted: bool


@dataclass(slots=True)
class Tilde:
    start: int
    end: int


# ---- tokens -----------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class W:
    start: int
    end: int
    parts: list

    def literal(self) -> str | None:
        """The word's text when it is one unquoted literal (reserved words, `{`, patterns), else None."""
        if len(self.parts) == 1 and isinstance(self.parts[0], Lit) and not self.parts[0].quoted:
            return self.parts[0].text
        return None


@dataclass(slots=True)
class Op:
    kind: str
    start: int
    end: int


@dataclass(slots=True)
class Heredoc:
    delim: str
    quoted: bool
    strip_tabs: bool
    parts: list = field(default_factory=list)
    start: int = 0
    end: int = 0
    closed: bool = True


@dataclass(slots=True)
class Redir:
    op: str
    fd: str
    start: int
    end: int
    target: W | None
    heredoc: Heredoc | None = None


@dataclass(slots=True)
class ArrayLit:
    name: str
    append: bool
    start: int
    end: int
    items: list  # W tokens


@dataclass(slots=True)
class ArithCmd:
    text: str
    start: int
    end: int


@dataclass(slots=True)
class Problem:
    start: int
    end: int
    message: str


class Lexer:
    """Tokens of one text. `problems` collects what bash would reject, each with its offsets."""

    def __init__(self, text: str, problems: list[Problem] | None = None):
        self.text = text
        self.n = len(text)
        self.pos = 0
        self.problems: list[Problem] = [] if problems is None else problems
        self.pending: list[Heredoc] = []
        self.depth = 0  # quotes and substitutions inside one another
        # kind -> offset of the first one that ran to the end of the file unclosed. bash has stopped there; a
        # later one of that kind is taken as unclosed at once, so a broken file costs one scan, not one a line
        self.dead: dict[str, int] = {}

    def line_end(self, pos: int) -> int:
        j = self.text.find("\n", pos)
        return self.n if j < 0 else j

    def problem(self, start: int, end: int, message: str) -> None:
        self.problems.append(Problem(start, end, message))

    # ---- token stream ---------------------------------------------------------------------------------------
    def tokens(self, nested: bool = False) -> list:
        """All tokens up to the end (or, nested inside `$(`, up to its unmatched `)`, left unconsumed)."""
        text, out, depth, cases = self.text, [], 0, 0  # (`case ... esac` open inside `$(`: its `)` end patterns)
        while True:
            m = _BLANKS.match(text, self.pos)
            if m:
                self.pos = m.end()
            if self.pos >= self.n:
                break
            c, pos = text[self.pos], self.pos
            if c == "\n":
                out.append(Op("\n", pos, pos + 1))
                self.pos += 1
                if self.pending:
                    self.read_heredocs()
                continue
            if c == "#":
                self.pos = self.line_end(pos)
                continue
            if c == "(" and text.startswith("((", pos) and _opens_arith(out):
                out.append(self.arith_command(pos))
                continue
            if c in "<>" and text.startswith("(", pos + 1):  # process substitution: a word
                out.append(self.word_token(pos))
                continue
            fd = ""
            if c.isdigit():
                m = _IONUM.match(text, pos)
                if m:
                    fd, pos = m.group(), m.end()
                    c = text[pos]
            if c in "|&;()<>":
                op = next(o for o in _OPS_BY_CHAR[c] if text.startswith(o, pos))
                if nested and op == ")" and depth == 0 and not cases:
                    self.pos = pos
                    return out
                depth += op == "("
                depth -= op == ")" and depth > 0 and not (cases and depth == 0)
                self.pos = pos + len(op)
                if op in _REDIRECTS:
                    out.append(self.redirect(op, fd, self.pos - len(op) - len(fd)))
                else:
                    out.append(Op(op, pos, self.pos))
                continue
            m = _PLAIN.match(text, pos, self.n)
            end = m.end() if m else pos
            if m and c != "~" and (end >= self.n or text[end] in _ENDS):  # the common case: a plain word
                self.pos = end
                if nested and m.group() in ("case", "esac") and (not out or isinstance(out[-1], Op)):
                    cases += 1 if m.group() == "case" else -1 if cases else 0
                out.append(W(pos, end, [Lit(m.group(), pos, False)]))
                if end < self.n and text[end] == "(" and m.group().endswith("="):
                    head = m.group()
                    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\+?=", head):
                        out[-1] = self.array(out[-1], head)
                continue
            tok = self.word_token(pos)
            if text.startswith("(", self.pos):
                head = tok.literal()
                if head is not None and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\+?=", head):
                    tok = self.array(tok, head)
            out.append(tok)
        if self.pending:
            for h in self.pending:
                self.problem(self.pos, self.pos, f"here-document <<{h.delim} has no body: the file ends first")
            self.pending = []
        return out

    def word_token(self, pos: int) -> W:
        self.pos = pos
        parts = self.word_parts()
        return W(pos, self.pos, parts)

    def redirect(self, op: str, fd: str, start: int) -> Redir:
        m = _BLANKS.match(self.text, self.pos)
        if m:
            self.pos = m.end()
        target = None
        if self.pos < self.n and (self.text[self.pos] not in "\n|&;()<>" or
                                  self.text.startswith(("<(", ">("), self.pos)):
            target = self.word_token(self.pos)  # (`< <(cmd)`: a process substitution is a word, bash's target)
        else:
            self.problem(start, self.pos, f"`{op}` has no target")
        r = Redir(op, fd, start, self.pos, target)
        if op in ("<<", "<<-") and target is not None:
            delim = "".join(p.text for p in target.parts if isinstance(p, Lit))
            quoted = any(isinstance(p, Lit) and p.quoted for p in target.parts)
            r.heredoc = Heredoc(delim, quoted, op == "<<-")
            self.pending.append(r.heredoc)
        return r

    def array(self, tok: W, head: str) -> ArrayLit:
        """`NAME=(a b c)`: the elements are words; newlines and comments may sit between them."""
        self.pos += 1
        items: list[W] = []
        while True:
            m = _ARRAY_BLANKS.match(self.text, self.pos)
            if m:
                self.pos = m.end()
            if self.pos >= self.n:
                self.problem(tok.start, self.pos, f"array `{head}(` is never closed with `)`")
                break
            c = self.text[self.pos]
            if c == ")":
                self.pos += 1
                break
            if c == "#":
                self.pos = self.line_end(self.pos)
                continue
            if c in "|&;(<>":
                self.problem(self.pos, self.pos + 1, f"unexpected `{c}` inside array `{head}(`")
                self.pos += 1
                continue
            items.append(self.word_token(self.pos))
        name = head.rstrip("=").rstrip("+")
        return ArrayLit(name, head.endswith("+="), tok.start, self.pos, items)

    def arith_command(self, pos: int) -> ArithCmd:
        end = self.match_arith(pos + 2)
        if end is None:
            self.problem(pos, self.line_end(pos), "`((` is never closed with `))`")
            end = self.line_end(pos)
            self.pos = end
            return ArithCmd(self.text[pos + 2:end], pos, end)
        self.pos = end + 2
        return ArithCmd(self.text[pos + 2:end], pos, end + 2)

    def match_arith(self, pos: int) -> int | None:
        """Offset of the `))` closing an arithmetic expression that starts at pos, or None."""
        depth, text = 0, self.text
        while pos < self.n:
            c = text[pos]
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    return pos if text.startswith("))", pos) else None
                depth -= 1
            elif c in "'\"":
                j = text.find(c, pos + 1)
                if j < 0:
                    return None
                pos = j
            pos += 1
        return None

    # ---- heredocs ---------------------------------------------------------------------------------------------
    def read_heredocs(self) -> None:
        for h in self.pending:
            self.read_heredoc(h)
        self.pending = []

    def read_heredoc(self, h: Heredoc) -> None:
        text, start = self.text, self.pos
        p, body_end, after = start, None, self.n
        while p < self.n:
            eol = self.line_end(p)
            line = text[p:eol]
            if (line.lstrip("\t") if h.strip_tabs else line) == h.delim:
                body_end, after = p, min(eol + 1, self.n)
                break
            p = eol + 1
        if body_end is None:
            # bash takes the rest of the file as the body (with a warning), so the commands after it never run.
            body_end, h.closed = self.n, False
            self.problem(start, start, f"here-document <<{h.delim} is never closed: bash reads the rest of the "
                                       f"file as its text, so nothing after it runs")
        h.start, h.end = start, body_end
        if h.quoted:
            h.parts = self.quoted_heredoc(start, body_end, h.strip_tabs)
        else:
            saved = self.n
            self.n, self.pos = body_end, start
            h.parts = self.heredoc_parts(h.strip_tabs)
            self.n = saved
        self.pos = after

    def quoted_heredoc(self, start: int, end: int, strip: bool) -> list:
        if not strip:
            return [Lit(self.text[start:end], start, True)]
        parts, p = [], start
        while p < end:
            while p < end and self.text[p] == "\t":
                p += 1
            eol = min(self.line_end(p) + 1, end)
            parts.append(Lit(self.text[p:eol], p, True))
            p = eol
        return parts

    def heredoc_parts(self, strip: bool) -> list:
        text, parts = self.text, []
        at_line_start = True
        while self.pos < self.n:
            if at_line_start and strip:
                while self.pos < self.n and text[self.pos] == "\t":
                    self.pos += 1
                at_line_start = False
                continue
            m = _HD_PLAIN.match(text, self.pos, self.n)
            if m:
                parts.append(Lit(m.group(), self.pos, True))
                self.pos = m.end()
                continue
            c = text[self.pos]
            if c == "\n":
                parts.append(Lit("\n", self.pos, True))
                self.pos += 1
                at_line_start = True
            elif c == "\\":
                self.backslash(parts, quoted=True, special="$`\\\n")
            elif c == "$":
                self.dollar(parts, quoted=True)
            else:
                self.backtick(parts, quoted=True)
        return parts

    # ---- words ------------------------------------------------------------------------------------------------
    def word_parts(self) -> list:
        text, parts = self.text, []
        start = self.pos
        while self.pos < self.n:
            m = _PLAIN.match(text, self.pos, self.n)
            if m:
                s = m.group()
                if s[0] == "~" and self.pos == start:
                    tilde_end = self.pos + (len(s.split("/", 1)[0]))
                    parts.append(Tilde(self.pos, tilde_end))
                    s = s[tilde_end - self.pos:]
                    self.pos = tilde_end
                    if not s:
                        continue
                parts.append(Lit(s, self.pos, False))
                self.pos += len(s)
                continue
            c = text[self.pos]
            if c in " \t\n|&;()<>":
                if c in "<>" and text.startswith("(", self.pos + 1) and self.pos == start:
                    self.subst(parts, c + "(", quoted=False)
                    continue
                break
            if c == "\\":
                self.backslash(parts, quoted=False, special=None)
            elif c == "'":
                self.single_quote(parts)
            elif c == '"':
                self.double_quote(parts)
            elif c == "$":
                self.dollar(parts, quoted=False)
            else:
                self.backtick(parts, quoted=False)
        return parts

    def backslash(self, parts: list, quoted: bool, special: str | None) -> None:
        """`\\x`. special: the characters it escapes (inside double quotes and heredocs); None: all of them."""
        nxt = self.text[self.pos + 1] if self.pos + 1 < self.n else ""
        if nxt == "\n":  # a continuation: gone, as if never written
            self.pos += 2
        elif nxt == "" or (special is not None and nxt not in special):
            parts.append(Lit("\\", self.pos, quoted))
            self.pos += 1
        else:
            if nxt in " \t" and not quoted:
                self.broken_continuation(self.pos)
            parts.append(Lit(nxt, self.pos + 1, True))
            self.pos += 2

    def broken_continuation(self, pos: int) -> None:
        """`--flag value \\ ` with a blank after the backslash: it escapes the blank, not the newline, so the
        command ends on this line and the next line, meant as its continuation, runs on its own."""
        eol = self.line_end(pos)
        if self.text[pos + 2:eol].strip(" \t") or eol >= self.n:
            return
        after = self.text[eol + 1:self.line_end(eol + 1)].lstrip()
        if after.startswith("-"):
            self.problem(pos, eol, f"a blank follows this backslash, so it does not continue the command: the "
                                   f"next line (`{after.split()[0]} ...`) runs as a separate command and its "
                                   f"options are lost")

    def single_quote(self, parts: list) -> None:
        start = self.pos
        j = self.text.find("'", start + 1, self.n)
        if j < 0:
            eol = self.line_end(start)
            self.unterminated("'", start)
            parts.append(Lit(self.text[start + 1:eol], start + 1, True))
            self.pos = eol
            return
        parts.append(Lit(self.text[start + 1:j], start + 1, True))
        self.pos = j + 1

    def hopeless(self, kind: str, closer: str, start: int) -> bool:
        """Whether a `kind` opened at start cannot close: no `closer` after it, or one of its kind already ran
        to the end of the file."""
        return (kind in self.dead and start > self.dead[kind]) or self.text.find(closer, start + 1, self.n) < 0

    def unterminated(self, what: str, start: int) -> None:
        self.dead.setdefault(what, start)
        self.problem(start, self.line_end(start),
                     f"unterminated {what}: bash stops with a syntax error here; read up to the end of the line")

    def unclosed(self, parts: list, what: str, start: int, skip: int) -> None:
        eol = self.line_end(start)
        self.unterminated(what, start)
        parts.append(Lit(self.text[start + skip:eol], start + skip, True))
        self.pos = max(eol, start + skip)

    def too_deep(self, parts: list, start: int) -> bool:
        """Past _MAX_DEPTH nested quotes / substitutions, the rest of the line is read as text (bash would
        manage; no launcher does this), so the file's other lines are still read."""
        if self.depth < _MAX_DEPTH:
            return False
        eol = self.line_end(start)
        self.problem(start, eol, "quotes and substitutions nest too deeply here: read as text up to the end of "
                                 "the line")
        parts.append(Lit(self.text[start:eol], start, True))
        self.pos = eol
        return True

    def double_quote(self, parts: list) -> None:
        if self.too_deep(parts, self.pos):
            return
        if self.hopeless('"', '"', self.pos):
            self.unclosed(parts, '"', self.pos, 1)
            return
        self.depth += 1
        try:
            self.double_quote_(parts)
        finally:
            self.depth -= 1

    def double_quote_(self, parts: list) -> None:
        start, text = self.pos, self.text
        inner: list = [Lit("", start + 1, True)]  # `""` is still a word
        self.pos += 1
        while True:
            if self.pos >= self.n:
                eol = self.line_end(start)
                self.unterminated('"', start)
                parts.append(Lit(text[start + 1:eol], start + 1, True))
                self.pos = eol
                return
            m = _DQ_PLAIN.match(text, self.pos, self.n)
            if m:
                inner.append(Lit(m.group(), self.pos, True))
                self.pos = m.end()
                continue
            c = text[self.pos]
            if c == '"':
                self.pos += 1
                break
            if c == "\\":
                self.backslash(inner, quoted=True, special='$`"\\\n')
            elif c == "$":
                self.dollar(inner, quoted=True)
            else:
                self.backtick(inner, quoted=True)
        parts.extend(inner)

    def backtick(self, parts: list, quoted: bool) -> None:
        start, text, p = self.pos, self.text, self.pos + 1
        if self.hopeless("` (command substitution)", "`", start):
            p = self.n  # straight to the unterminated case below
        while p < self.n and text[p] != "`":
            p += 2 if text[p] == "\\" else 1
        if p >= self.n:
            eol = self.line_end(start)
            self.unterminated("` (command substitution)", start)
            parts.append(Sub("`", start, eol, None, quoted))
            self.pos = eol
            return
        inner_text = re.sub(r"\\([$`\\])", r"\1", text[start + 1:p])
        parts.append(Sub("`", start, p + 1, Lexer(inner_text).tokens(), quoted))
        self.pos = p + 1

    def subst(self, parts: list, kind: str, quoted: bool) -> None:
        """`$(...)`, `<(...)`, `>(...)`: the command inside is lexed (never run) up to its `)`."""
        start = self.pos
        if self.too_deep(parts, start):
            return
        what = f"`{kind}` (command substitution)"
        if self.hopeless(what, ")", start):
            self.unterminated(what, start)
            parts.append(Sub(kind, start, self.line_end(start), None, quoted))
            self.pos = max(self.line_end(start), start + 2)
            return
        inner = Lexer(self.text, self.problems)
        inner.n, inner.pos, inner.depth, inner.dead = self.n, start + 2, self.depth + 1, self.dead
        toks = inner.tokens(nested=True)
        if inner.pos >= self.n or self.text[inner.pos] != ")":
            eol = self.line_end(start)
            self.unterminated(what, start)
            parts.append(Sub(kind, start, eol, None, quoted))
            self.pos = max(eol, start + 2)
            return
        self.pos = inner.pos + 1
        parts.append(Sub(kind, start, self.pos, toks, quoted))

    def dollar(self, parts: list, quoted: bool) -> None:
        text, start = self.text, self.pos
        nxt = text[start + 1] if start + 1 < self.n else ""
        if nxt == "(":
            if text.startswith("((", start + 1):
                end = self.match_arith(start + 3)
                if end is not None:
                    parts.append(Arith(text[start + 3:end], start, end + 2, quoted))
                    self.pos = end + 2
                    return
            self.subst(parts, "$(", quoted)
        elif nxt == "{":
            self.brace_param(parts, quoted)
        elif nxt == "'" and not quoted:
            self.ansi_c(parts)
        elif nxt == '"' and not quoted:
            self.pos += 1
            self.double_quote(parts)
        elif nxt and nxt in _SPECIAL_PARAMS:
            parts.append(Param(nxt, None, "", None, start, start + 2, quoted))
            self.pos = start + 2
        else:
            m = _NAME.match(text, start + 1, self.n)
            if m:
                parts.append(Param(m.group(), None, "", None, start, m.end(), quoted))
                self.pos = m.end()
            else:  # a lone `$` is just a dollar sign
                parts.append(Lit("$", start, quoted))
                self.pos = start + 1

    def ansi_c(self, parts: list) -> None:
        start, text, p = self.pos, self.text, self.pos + 2
        while p < self.n and text[p] != "'":
            p += 2 if text[p] == "\\" else 1
        if p >= self.n:
            self.unterminated("$' quote", start)
            eol = self.line_end(start)
            parts.append(Lit(text[start + 2:eol], start + 2, True))
            self.pos = eol
            return
        simple = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"', "a": "\a", "r": "\r", "e": "\x1b",
                  "v": "\v", "f": "\f", "b": "\b", "?": "?"}
        q = start + 2
        while q < p:  # runs between escapes keep their offsets; an escape is one character at its backslash
            j = text.find("\\", q, p)
            j = p if j < 0 else j
            if j > q:
                parts.append(Lit(text[q:j], q, True))
            if j < p:
                m = _ANSI_NUMERIC.match(text, j + 1, p)
                if m:  # \xHH, \NNN (octal), \uHHHH, \UHHHHHHHH
                    digits = m.group()
                    code = int(digits, 8) if digits[0].isdigit() else int(digits[1:], 16)
                    parts.append(Lit(chr(code) if code < 0x110000 else "", j, True))
                    j = m.end()
                else:
                    nxt = text[j + 1] if j + 1 < p else ""
                    parts.append(Lit(simple.get(nxt, "\\" + nxt), j, True))
                    j += 2
            q = j
        if p == start + 2:
            parts.append(Lit("", start + 2, True))
        self.pos = p + 1

    def brace_param(self, parts: list, quoted: bool) -> None:
        if self.too_deep(parts, self.pos):
            return
        if self.hopeless("`${`", "}", self.pos):
            self.unterminated("`${`", self.pos)
            eol = self.line_end(self.pos)
            parts.append(Param("?", None, "bad", None, self.pos, eol, quoted))
            self.pos = eol
            return
        self.depth += 1
        try:
            self.brace_param_(parts, quoted)
        finally:
            self.depth -= 1

    def brace_param_(self, parts: list, quoted: bool) -> None:
        text, start = self.text, self.pos
        p = start + 2
        op, name = "", ""
        if p < self.n and text[p] in "#!" and p + 1 < self.n and text[p + 1] != "}":
            op = "#len" if text[p] == "#" else "!"
            p += 1
        m = _NAME.match(text, p, self.n)
        if m:
            name, p = m.group(), m.end()
        elif p < self.n and text[p] in _SPECIAL_PARAMS:
            m = re.compile(r"[0-9]+").match(text, p, self.n)
            name, p = (m.group(), m.end()) if m else (text[p], p + 1)
        index = None
        if name and text.startswith("[", p):
            close = text.find("]", p, self.line_end(p))
            if close > 0:
                sub = Lexer(text[p + 1:close])
                index = sub.word_parts() if close > p + 1 else []
                for part in index:  # offsets of the subscript relative to the whole text
                    if isinstance(part, Lit) and part.src is not None:
                        part.src += p + 1
                p = close + 1
        arg = None
        if not name:
            op = "bad"
        elif not text.startswith("}", p):
            found = next((o for o in _PARAM_OPS if text.startswith(o, p)), None)
            if op or found is None:
                op = "bad"
            else:
                op, p = found, p + len(found)
        self.pos = p
        if op == "bad" or (arg is None and not text.startswith("}", p)):
            arg = self.param_arg(quoted)
        if self.pos >= self.n or text[self.pos] != "}":
            eol = self.line_end(start)
            self.unterminated("`${`", start)
            parts.append(Param(name or "?", None, "bad", None, start, eol, quoted))
            self.pos = eol
            return
        self.pos += 1
        parts.append(Param(name, index, op, arg, start, self.pos, quoted))

    def param_arg(self, quoted: bool) -> list:
        """The word after `:-` (and friends), up to the unmatched `}`."""
        text, parts = self.text, []
        parts.append(Lit("", self.pos, True) if quoted else Lit("", self.pos, False))
        while self.pos < self.n:
            m = _ARG_PLAIN.match(text, self.pos, self.n)
            if m:
                parts.append(Lit(m.group(), self.pos, quoted))
                self.pos = m.end()
                continue
            c = text[self.pos]
            if c == "}":
                break
            if c == "\\":
                self.backslash(parts, quoted=quoted, special='$`"\\\n}' if quoted else None)
            elif c == "'" and not quoted:
                self.single_quote(parts)
            elif c == "'":
                parts.append(Lit("'", self.pos, True))
                self.pos += 1
            elif c == '"':
                self.double_quote(parts)
            elif c == "$":
                self.dollar(parts, quoted=quoted)
            else:
                self.backtick(parts, quoted=quoted)
        return parts


def _opens_arith(out: list) -> bool:
    if not out:
        return True
    last = out[-1]
    if isinstance(last, Op):
        return last.kind != ")"
    return isinstance(last, W) and last.literal() in _ARITH_AFTER
