"""A rule is a named, documented predicate over a FileContext that yields Diagnostics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from trainlint.context import FileContext
from trainlint.diagnostics import Diagnostic, Span

DOCS_URL = "https://github.com/trainlint/trainlint/blob/main/rules/{code}.md"


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    consumer: str  # the memory consumer (or concern) the rule is about
    fix_hint: str  # one line: what to do, for the README table and `rule --all`
    check: Callable[[FileContext], Iterable[Diagnostic]]

    def run(self, ctx: FileContext) -> Iterator[Diagnostic]:
        yield from self.check(ctx)

    def diagnostic(self, ctx: FileContext, span: Span, message: str) -> Diagnostic:
        return Diagnostic(self.code, self.name, message, ctx.display, span, DOCS_URL.format(code=self.code))


REGISTRY: dict[str, Rule] = {}


def rule(code: str, name: str, consumer: str, fix_hint: str):
    """Register a check function as a rule; the function receives (rule, ctx)."""

    def wrap(fn: Callable[[Rule, FileContext], Iterable[Diagnostic]]) -> Rule:
        holder: list[Rule] = []
        r = Rule(code, name, consumer, fix_hint, lambda ctx: fn(holder[0], ctx))
        holder.append(r)
        if code in REGISTRY:
            raise RuntimeError(f"duplicate rule code {code}")
        REGISTRY[code] = r
        return r

    return wrap
