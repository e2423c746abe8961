"""Another file's facts brought into this one (a followed call, a module's argparse helpers): their spans marked
with that file, so a diagnostic reported on them names it. Used by facts/inline.py and facts/modules.py.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace

from trainlint.diagnostics import Span
from trainlint.facts.model import Compare, Cond, Param
from trainlint.facts.values import Value


class Relocator:
    """Spans of another file's facts, marked with that file (what a diagnostic reported on them names)."""

    def __init__(self, display: str | None) -> None:
        self.display = display

    def span(self, span: Span) -> Span:
        return span if self.display is None or span.file else span.in_file(self.display)

    def walk(self, obj):
        if self.display is None:
            return obj
        if isinstance(obj, Value):
            inner = obj.value
            if isinstance(inner, Cond):
                inner = Cond(self.walk(inner.test), self.walk(inner.then), self.walk(inner.orelse), inner.negate)
            elif isinstance(inner, Compare):
                inner = Compare(inner.op, self.walk(inner.left), self.walk(inner.right))
            elif isinstance(inner, Param) and inner.span is not None:
                inner = replace(inner, span=self.span(inner.span))
            origin = self.span(obj.origin) if obj.origin is not None else None
            return obj if origin is obj.origin and inner is obj.value else Value(obj.state, inner, origin, obj.via)
        if isinstance(obj, tuple):
            return tuple(self.walk(x) for x in obj)
        if is_dataclass(obj) and not isinstance(obj, type):
            return replace(obj, **{f.name: self.walk(getattr(obj, f.name)) for f in fields(obj)
                                   if isinstance(getattr(obj, f.name), (Value, tuple, Span))})
        if isinstance(obj, Span):
            return self.span(obj)
        return obj
