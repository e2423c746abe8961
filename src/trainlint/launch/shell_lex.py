"""Shell launchers lexed and parsed the way bash would, with exact offsets: tokens, then the command tree.

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

    def line_end(self, pos: int) -> int:
        j = self.text.find("\n", pos)
        return self.n if j < 0 else j

    def problem(self, start: int, end: int, message: str) -> None:
        self.problems.append(Problem(start, end, message))

    # ---- token stream ---------------------------------------------------------------------------------------
    def tokens(self, nested: bool = False) -> list:
        """All tokens up to the end (or, nested inside `$(`, up to its unmatched `)`, left unconsumed)."""
        text, out, depth = self.text, [], 0
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
                if nested and op == ")" and depth == 0:
                    self.pos = pos
                    return out
                depth += op == "("
                depth -= op == ")" and depth > 0
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
        if self.pos < self.n and self.text[self.pos] not in "\n|&;()<>":
            target = self.word_token(self.pos)
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
            line = self.text.count("\n", 0, pos) + 1
            self.problem(pos, eol, f"the backslash at the end of line {line} is followed by a blank, so it does "
                                   f"not continue the command: line {line + 1} (`{after.split()[0]} ...`) runs as "
                                   f"a separate command and its options are lost")

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

    def unterminated(self, what: str, start: int) -> None:
        line = self.text.count("\n", 0, start) + 1
        self.problem(start, self.line_end(start),
                     f"unterminated {what} (opened on line {line}): bash stops with a syntax error here; "
                     f"read up to the end of that line")

    def double_quote(self, parts: list) -> None:
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
        inner = Lexer(self.text, self.problems)
        inner.n, inner.pos = self.n, start + 2
        toks = inner.tokens(nested=True)
        if inner.pos >= self.n or self.text[inner.pos] != ")":
            eol = self.line_end(start)
            self.unterminated(f"`{kind}` (command substitution)", start)
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


# ---- the command tree ------------------------------------------------------------------------------------------
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


def parse(text: str, problems: list[Problem]) -> list[Item]:
    """The command tree of a whole text; what cannot be read is reported in `problems` and skipped."""
    toks = Lexer(text, problems).tokens()
    return Parser(toks, problems).parse()
