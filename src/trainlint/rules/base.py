"""A rule is a named, documented predicate over a FileContext that yields Diagnostics."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Iterator

from trainlint.codes import RuleInfo
from trainlint.context import FileContext
from trainlint.diagnostics import Diagnostic, Span
from trainlint.knowledge.versions import NEWEST_KNOWN

DOCS_URL = "https://github.com/trainlint/trainlint/blob/main/rules/{code}.md"


@dataclass(frozen=True)
class Rule(RuleInfo):
    """A rule's declaration (RuleInfo: code, name, consumer, summary, fix hint, fix kind) and its check."""

    check: Callable[[FileContext], Iterable[Diagnostic]] | None = None

    def run(self, ctx: FileContext) -> Iterator[Diagnostic]:
        yield from self.check(ctx)

    def diagnostic(self, ctx: FileContext, span: Span, message: str, *deciding) -> Diagnostic:
        """A finding at `span` in the script; when a deciding Value (or the span itself) is written in a
        launch (a launcher line, an args-file key), the finding is reported there, names the script, and
        relates to the script's location. A finding whose figures come from a geometry taken from another
        checkpoint's name says so and carries it as an assumption (`certain-only` hides it)."""
        diag = self._placed(ctx, span, message, *deciding)
        diag = _with_versions(ctx, diag)
        assumed = _geometry_assumptions(ctx, diag.message)
        if not assumed:
            return diag
        return replace(diag, message=f"{diag.message} ({'; '.join(assumed)})",
                       assumptions=tuple(dict.fromkeys(diag.assumptions + assumed)))

    def _placed(self, ctx: FileContext, span: Span, message: str, *deciding) -> Diagnostic:
        url = DOCS_URL.format(code=self.code)
        where = next((v.origin for v in deciding if v is not None and v.origin is not None and v.origin.file), None)
        if where is None and span.file:
            where = span
        launched = ((ctx.launch.file, ctx.launch.span, "launched here"),) if ctx.launch.file and ctx.launch.span \
            else ()
        calls = ctx.call_path(span)  # reached through the repository's own functions: the call sites
        hops = tuple((s.file or ctx.display, s.local(), "reached through this call") for s in calls)
        first = next((v.origin for v in deciding if v is not None and v.origin is not None), None)
        if first is not None and not first.file and span.file in ctx.facts.modules and calls and \
                not calls[0].file and calls[0].line <= first.line <= calls[0].end_line:
            # a fact of a followed module decided by a value the script passes it (`train(attn="eager")`)
            return Diagnostic(self.code, self.name, message, ctx.display, first.local(), url,
                              related=((span.file, span.local(), "where the value is used"),) + hops + launched)
        if where is not None and where.file != ctx.display:
            script_span = span if not span.file else calls[0] if calls and not calls[0].file else ctx.launch_anchor
            related = ((ctx.display, script_span.local(), "the script this value reaches"),) + hops[1 if calls and
                                                                                                 not calls[0].file
                                                                                                 else 0:] + launched
            return Diagnostic(self.code, self.name, f"{ctx.display}: {message}", where.file, where.local(), url,
                              related=tuple(r for r in related if r[0] != where.file or r[1] != where.local()))
        return Diagnostic(self.code, self.name, message, ctx.display, span.local(), url, related=hops + launched)


_DEFAULT_VERSION = "not pinned: the newest release known"


def _with_versions(ctx: FileContext, diag: Diagnostic) -> Diagnostic:
    """The finding with the library releases it was judged on (Diagnostic.versions: every rule reads the Run, whose
    argument defaults, attention, loss path and checkpointing are per release), for the libraries the file uses
    (transformers when it imports none of them: the model and Trainer are its). A release moved off its own first
    choice by another library's release is named in the message too ("transformers 4.46.3: trl 0.12.2 requires
    transformers<4.47.0"): the finding holds for that release, not the newest."""
    versions = ctx.versions
    used = [lv for lv in versions.all() if ctx.facts.imports_module(lv.name)] or [versions.transformers]
    if all(lv.source.startswith(_DEFAULT_VERSION) and lv.version == NEWEST_KNOWN.get(lv.name) and not lv.bounded_by
           for lv in used):
        return diag  # the newest releases, unpinned: nothing to name (a lower bound from the calls moves nothing)
    root = f"{ctx.settings.root}/"
    shown = tuple(f"{lv.name} {lv.version}: {lv.source.replace(root, '')}" for lv in used)
    brief = [f"{lv.name} {lv.version}: {lv.bounded_by}" for lv in used if lv.bounded_by]
    message = diag.message
    if brief and not all(b in message for b in brief):
        message = f"{message} ({'; '.join(brief)})"
    return replace(diag, message=message, versions=shown)


_SIZED = re.compile(r"\d (?:GiB|MiB|KiB)\b|-token vocabulary")


def _geometry_assumptions(ctx: FileContext, message: str) -> tuple[str, ...]:
    """"assumed the geometry of X from the name" for each model of the run whose geometry was taken from another
    checkpoint, when the message gives figures (sizes, a vocabulary) and does not say it already."""
    if not _SIZED.search(message) or "assumed the geometry" in message:
        return ()
    found = []
    for model in ctx.facts.models:
        spec = ctx.spec(model)
        if spec is not None and spec.assumed_from and spec.assumed_from not in found:
            found.append(spec.assumed_from)
    return tuple(found)


REGISTRY: dict[str, Rule] = {}


def rule(code: str, name: str, *, consumer: str, summary: str, fix_hint: str, fix: str = "none",
         fix_runs_on: str | None = None, verifies: str | None = None):
    """Declare a check function as a rule, once: its code, name, the memory consumer it is about, one sentence of
    what it flags, one line of what to do, what `--fix` can do (codes.FIX_KINDS), what the fix's code needs to
    run (`fix_runs_on`, e.g. "CUDA"; None: wherever the original runs) and what `trainlint verify` checks of the
    fixed run (`verifies`, codes.VERIFY_KINDS: "memory", "adapter-grads", "samples-per-step"; None: nothing). The
    function receives (rule, ctx). The rules package discovers the module (rules/__init__.py); nothing else lists
    it."""

    def wrap(fn: Callable[[Rule, FileContext], Iterable[Diagnostic]]) -> Rule:
        holder: list[Rule] = []
        r = Rule(code, name, consumer, summary, fix_hint, fix, fix_runs_on, verifies,
                 check=lambda ctx: fn(holder[0], ctx))
        holder.append(r)
        if code in REGISTRY:
            raise RuntimeError(f"duplicate rule code {code}")
        REGISTRY[code] = r
        return r

    return wrap
