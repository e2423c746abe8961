"""A read-only LibCST traversal and node positions on demand: what the facts pass needs from LibCST's
visitor machinery and its PositionProvider, at a fraction of their cost.

Why: `Module.visit` rebuilds every node of the tree even for a read-only visitor, and `PositionProvider`
generates the code of the whole module while recording a range for every node; together they cost
several times the parse. The facts pass reads the tree and needs the spans of a handful of nodes.

- `walk` calls a `CSTVisitor`'s visit_/leave_ methods on the same nodes, in the same order, as
  `module.visit(visitor)` does (the children of each node class in the order LibCST's own
  `_visit_and_replace_children` visits them, read from LibCST once per class), without rebuilding.
- `Positions.span` runs LibCST's own position-tracking code generator over the smallest statement that
  begins a line and holds the node (with the indentation of its blocks), and places it on the line that
  `ast`'s `lineno` gives for that statement. Columns come from LibCST's generator (characters, tabs as
  one), lines from Python's tokenizer (\\r\\n, \\r and \\n only), so both agree with PositionProvider by
  construction; a statement whose column does not agree with `ast` raises `Misaligned`, and the caller
  then falls back to positions over the whole module (exactly PositionProvider's pass).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Callable

import libcst as cst
from libcst.metadata.position_provider import PositionProvidingCodegenState

from trainlint.diagnostics import Span
from trainlint.source import line_starts, source_lines


class Misaligned(BaseException):
    """The statements LibCST and `ast` see do not line up; positions must come from the whole module.
    (BaseException, so no `except Exception` in a visitor can swallow it.)"""


# -- statement starts from ast ----------------------------------------------------------------------


def statement_starts(tree: ast.Module) -> list[tuple[int, int]]:
    """(lineno, col_offset) of every statement, in source order: the k-th statement LibCST visits is
    the k-th here (small statements and compound statements alike; an elif is an If in both)."""
    out: list[tuple[int, int]] = []
    todo: list[list[ast.stmt]] = [tree.body]
    while todo:
        for stmt in todo.pop():
            out.append((stmt.lineno, stmt.col_offset))
            for name in ("body", "orelse", "finalbody"):
                block = getattr(stmt, name, None)
                if block:
                    todo.append(block)
            for holder in (*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())):
                todo.append(holder.body)
    out.sort()
    return out


def parse_tree(text: str) -> ast.Module | None:
    """`text`'s ast, or None when `ast` cannot parse it (positions then come from the module)."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def parse_starts(text: str) -> list[tuple[int, int]] | None:
    """statement_starts of `text`, or None when `ast` cannot parse it."""
    tree = parse_tree(text)
    return statement_starts(tree) if tree is not None else None


# -- positions ---------------------------------------------------------------------------------------


class _Ranges:
    """What PositionProvidingCodegenState writes its ranges into (it expects a provider's `_computed`)."""

    __slots__ = ("_computed",)

    def __init__(self) -> None:
        self._computed: dict[cst.CSTNode, object] = {}


class _HeaderState(PositionProvidingCodegenState):
    """LibCST's position-recording generator that notes how many tokens were written when it reaches
    `stop_at` (a header's stand-in body): the tokens before are the header's text."""

    stop_at: cst.CSTNode | None = None
    stopped: int | None = None

    def before_codegen(self, node: cst.CSTNode) -> None:
        if node is self.stop_at:
            self.stopped = len(self.tokens)
        super().before_codegen(node)


# compound statements whose header precedes all of their body (a Try's handlers, a Match's cases follow it)
_HEADED = frozenset({cst.FunctionDef, cst.ClassDef, cst.If, cst.For, cst.While, cst.With})


@dataclasses.dataclass
class _Anchor:
    node: cst.CSTNode  # a SimpleStatementLine or a compound statement: its code starts a line
    indents: tuple[str, ...]  # the indentation of the blocks around it, as LibCST's generator adds it
    ref: cst.CSTNode  # the statement whose ast start places it (the line's first small statement, or itself)
    index: int  # ref's position among all statements


# Text LibCST does not reproduce exactly, so PositionProvider's numbers drift from the text's: a form feed
# starting a statement's line (dropped: columns shift), a line holding only a backslash continuation before
# a statement (dropped: every later line shifts), a BOM. Such files take PositionProvider's own pass.
_UNFAITHFUL = re.compile(r"\x0c|\ufeff|(?:^|(?<=\r))[ \t]*\\(?:\r\n|\r|\n)", re.M)


class Positions:
    """Spans of single nodes, exactly as PositionProvider gives them, computed per enclosing statement."""

    def __init__(self, module: cst.Module, text: str, starts: list[tuple[int, int]] | None) -> None:
        self.module = module
        self.text = text
        self.starts = starts if starts is None or not _UNFAITHFUL.search(text) else None
        self.anchors: list[_Anchor] = []  # maintained by walk(): innermost last
        self._done: dict[int, tuple[dict, int]] = {}
        self._lines: list[str] | None = None
        self._line_starts: list[int] | None = None

    def span(self, node: cst.CSTNode) -> Span:
        for anchor in reversed(self.anchors if self.starts is not None else ()):
            for header in ((True, False) if anchor.ref is anchor.node and type(anchor.node) in _HEADED else (False,)):
                ranges, shift = self._of(anchor, header)
                r = ranges.get(node)
                if r is not None:
                    return _placed(r, shift)
        if not self.anchors:  # asked after the walk: a statement placed before may hold it (each one's exact)
            for ranges, shift in reversed(self._done.values()):
                r = ranges.get(node)
                if r is not None:
                    return _placed(r, shift)
        ranges, _ = self._of(None)
        return _placed(ranges[node], 0)

    def _of(self, anchor: _Anchor | None, header: bool = False) -> tuple[dict, int]:
        """The ranges of the nodes of `anchor`'s statement (of the whole module for None). `header`: of a
        compound statement's header only (`def f(x=1):`, `if test:`): its body and else are not generated, so
        a node in a function's signature does not cost the generation of the whole function."""
        key = (id(anchor.node), header) if anchor is not None else 0
        done = self._done.get(key)
        if done is not None:
            return done
        holder = _Ranges()
        state = _HeaderState(default_indent=self.module.default_indent,
                             default_newline=self.module.default_newline, provider=holder)
        if anchor is None:
            self.module._codegen(state)  # line 1, column 0: PositionProvider's own pass
            done = (holder._computed, 0)
        else:
            # the anchor's code starts at column 0 of some line, after its blocks' indentation is pushed
            state.indent_tokens = list(anchor.indents)
            node, ref = anchor.node, anchor.ref
            if header:  # the same header nodes (the ranges are keyed by them) over a one-line body, no else
                stub = cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Pass()])])
                changes: dict = {"body": stub}
                if getattr(node, "orelse", None) is not None:
                    changes["orelse"] = None
                node = ref = node.with_changes(**changes)
                state.stop_at = stub
            node._codegen(state)
            tokens = state.tokens if state.stopped is None else state.tokens[:state.stopped]
            start = holder._computed[ref].start
            if header:
                del holder._computed[ref]  # the stand-in statement's own range is not the real one's
            if anchor.index >= len(self.starts):
                raise Misaligned(f"statement {anchor.index}: ast has {len(self.starts)}")
            line, col = self.starts[anchor.index]
            if start.column != self._char_column(line, col):
                raise Misaligned(f"statement {anchor.index} at {line}:{col}")
            shift = line - start.line
            if not self._reproduces(tokens, 1 + shift, partial=header):
                raise Misaligned(f"statement {anchor.index}: LibCST's code is not the text at line {1 + shift}")
            done = (holder._computed, shift)
        self._done[key] = done
        return done

    def _reproduces(self, tokens: list[str], line: int, partial: bool = False) -> bool:
        """The anchor's generated code is the text from the start of `line` on (so its ranges are the
        text's, as the whole module's would be). `partial`: the tokens are a header, a prefix of the code."""
        if self._line_starts is None:
            self._line_starts = line_starts(self.text)
        if not 0 < line <= len(self._line_starts):
            return False
        offset = self._line_starts[line - 1]
        code = "".join(tokens)
        if self.text.startswith(code, offset):
            return True
        if partial:
            return False
        # the module's last statement, in a file without a final newline: LibCST drops that newline only
        # at the end of the whole module
        return not self.module.has_trailing_newline and self.text[offset:] == "".join(tokens[:-1])

    def _char_column(self, line: int, byte_col: int) -> int:
        """ast's col_offset is a UTF-8 byte offset; LibCST's columns are characters."""
        if self._lines is None:
            self._lines = source_lines(self.text)
        if not 0 < line <= len(self._lines):
            raise Misaligned(f"line {line}")
        text = self._lines[line - 1]
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8", "surrogatepass")[:byte_col].decode("utf-8", "replace"))


def _placed(r, shift: int) -> Span:
    """A LibCST CodeRange (0-based columns) moved down `shift` lines, as a Span (1-based columns)."""
    return Span(r.start.line + shift, r.start.column + 1, r.end.line + shift, r.end.column + 1)


# -- the traversal -----------------------------------------------------------------------------------

_ORDER: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}  # class -> (visited fields, the others)


class _FieldOrder(cst.CSTVisitor):
    """Records which fields LibCST's `_visit_and_replace_children` visits, in its order, without descending."""

    def __init__(self, parent: cst.CSTNode) -> None:
        super().__init__()
        self.parent = parent
        self.fields: list[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return False

    def on_leave(self, original_node: cst.CSTNode) -> None:
        pass

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if node is self.parent and attribute not in self.fields:
            self.fields.append(attribute)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass


def _record_order(node: cst.CSTNode) -> tuple[tuple[str, ...], tuple[str, ...]]:
    recorder = _FieldOrder(node)
    node._visit_and_replace_children(recorder)
    visited = tuple(recorder.fields)
    # fields LibCST did not visit here; a str/bool field (Name.value, Arg.star) never holds a node
    others = tuple(f.name for f in dataclasses.fields(node)
                   if f.name not in visited and not isinstance(getattr(node, f.name), (str, bool, int, float)))
    _ORDER[type(node)] = (visited, others)
    return visited, others


_IS_NODE: dict[type, bool] = {}


def _is_node_class(t: type) -> bool:
    known = _IS_NODE.get(t)
    if known is None:
        known = _IS_NODE[t] = issubclass(t, cst.CSTNode)  # (an ABC check: slow, hence once per class)
    return known


def _holds_nodes(value: object) -> bool:
    if isinstance(value, (tuple, list)):
        return any(_is_node_class(type(v)) for v in value)
    return _is_node_class(type(value))


# per visitor class, per node class: (kind, the visitor's own visit_ and leave_ functions or None where it keeps
# CSTVisitor's no-op, inert)
_HANDLERS: dict[type, dict[type, tuple[int, Callable | None, Callable | None, bool]]] = {}
_SMALL, _COMPOUND, _LINE, _BLOCK = 1, 2, 4, 8  # _BLOCK: pushes an indentation (IndentedBlock; Match for its cases)


def _info(visitor_class: type, node: cst.CSTNode) -> tuple[int, Callable | None, Callable | None, bool]:
    cls = type(node)
    name = cls.__name__
    base = cst.CSTVisitor
    v = getattr(visitor_class, f"visit_{name}", None)
    le = getattr(visitor_class, f"leave_{name}", None)
    v = None if v is getattr(base, f"visit_{name}", None) else v
    le = None if le is getattr(base, f"leave_{name}", None) else le
    kind = ((_SMALL if issubclass(cls, cst.BaseSmallStatement) else 0)
            | (_COMPOUND if issubclass(cls, cst.BaseCompoundStatement) else 0)
            | (_LINE if cls is cst.SimpleStatementLine else 0)
            | (_BLOCK if cls in (cst.IndentedBlock, cst.Match) else 0))
    order = _ORDER.get(cls) or _record_order(node)
    # a leaf nothing listens to (SimpleWhitespace, Newline, Comment: half the nodes) is not even called
    inert = v is None and le is None and not kind and not order[0] and not order[1]
    return kind, v, le, inert


_PLAIN: dict[type, bool] = {}  # per visitor class: plain_visitor's answer (dir() of a visitor is ~1,000 names)


def plain_visitor(visitor: cst.CSTVisitor) -> bool:
    """walk() reproduces a visitor that needs no metadata, no attribute callbacks and no own on_visit/on_leave."""
    cls = type(visitor)
    plain = _PLAIN.get(cls)
    if plain is None:
        plain = _PLAIN[cls] = _plain(cls)
    return plain


def _plain(cls: type) -> bool:
    if cls.METADATA_DEPENDENCIES or getattr(cls, "on_visit") is not cst.CSTVisitor.on_visit or \
            getattr(cls, "on_leave") is not cst.CSTVisitor.on_leave or \
            getattr(cls, "on_visit_attribute") is not cst.CSTVisitor.on_visit_attribute or \
            getattr(cls, "on_leave_attribute") is not cst.CSTVisitor.on_leave_attribute:
        return False
    for name in dir(cls):
        if name.startswith(("visit_", "leave_")) and name.count("_") >= 2 and \
                getattr(cls, name) is not getattr(cst.CSTVisitor, name, None):
            return False  # visit_Call_func and the like: attribute callbacks
    return True


def walk(module: cst.Module, visitor: cst.CSTVisitor, positions: Positions | None = None) -> int:
    """Visit `module` like `module.visit(visitor)` for a plain_visitor; keep `positions.anchors` current.
    Returns how many statements it saw (to check against ast's count)."""
    visitor_class = type(visitor)
    table = _HANDLERS.setdefault(visitor_class, {})
    anchors = positions.anchors if positions is not None else []
    indents: list[str] = []
    default_indent = module.default_indent
    count = 0
    orders, is_node, if_node = _ORDER, _IS_NODE, cst.If

    def visit(node: cst.CSTNode, parent: cst.CSTNode | None, mute: bool) -> None:
        nonlocal count
        cls = type(node)
        info = table.get(cls)
        if info is None:
            info = table[cls] = _info(visitor_class, node)
        kind, on_visit, on_leave, _ = info
        order = orders.get(cls)
        if order is None:
            order = _record_order(node)
        fields = order[0]
        for name in order[1]:
            # a field LibCST visits only when it is set (FormattedStringExpression.format_spec) was not seen
            # on the node the order was read from: read it again from this one
            if _holds_nodes(getattr(node, name)):
                fields = _record_order(node)[0]
                break
        anchored = False
        if kind:
            if kind & _SMALL:
                count += 1
            elif kind & _COMPOUND:
                if not (type(parent) is if_node and parent.orelse is node):  # an elif does not start a line
                    anchors.append(_Anchor(node, tuple(indents), node, count))
                    anchored = True
                count += 1
            elif kind & _LINE:
                anchors.append(_Anchor(node, tuple(indents), node.body[0], count))
                anchored = True
            if kind & _BLOCK:
                indents.append(default_indent if node.indent is None else node.indent)
        if mute:
            on_visit = on_leave = None
        elif on_visit is not None and on_visit(visitor, node) is False:
            mute = True  # no callbacks below, but the statements are still counted and anchored
        for name in fields:
            value = getattr(node, name)
            t = type(value)
            if t is tuple or t is list:
                for child in value:
                    info = table.get(type(child))
                    if info is None or not info[3]:
                        visit(child, node, mute)
            elif value is not None:
                info = table.get(t)
                if info is not None:
                    if not info[3]:
                        visit(value, node, mute)
                    continue
                known = is_node.get(t)
                if known is None:
                    known = _is_node_class(t)
                if known:
                    visit(value, node, mute)
        if on_leave is not None:
            on_leave(visitor, node)
        if kind & _BLOCK:
            indents.pop()
        if anchored:
            anchors.pop()

    visit(module, None, False)
    return count
