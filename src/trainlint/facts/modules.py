"""Facts from the repository's own modules a script imports: the argument dataclasses it parses but does
not define (`from fastchat.train.train import ModelArguments, TrainingArguments`). Each module is read
once per run, never imported or executed; a module that cannot be found or read leaves those classes
unknown, as before."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from trainlint.diagnostics import Span
from trainlint.facts.model import ClassDef, Evidence, Param, ScriptFacts
from trainlint.facts.names import ACCUM_NAMES, BATCH_NAMES, SEQ_NAMES
from trainlint.facts.values import Value


def module_file(module: str, script: Path, root: Path) -> Path | None:
    """The file of a dotted module: beside the script (a sibling import), under the root, or root/src."""
    rel = Path(*module.split("."))
    for base in (script.parent, root, root / "src"):
        for candidate in (base / rel.with_suffix(".py"), base / rel / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


@lru_cache(maxsize=256)
def _module_classes(path: Path) -> tuple[ClassDef, ...]:
    from trainlint.facts import extract_facts
    from trainlint.source import Source, read_source

    source = read_source(path)
    if not isinstance(source, Source):
        return ()
    import libcst as cst

    try:
        module = cst.parse_module(source.text)
        return extract_facts(module, str(path), source.text).classes
    except Exception:  # noqa: BLE001 - a module we cannot read leaves its classes unknown
        return ()


def with_imported_classes(facts: ScriptFacts, script: Path, root: Path, display) -> ScriptFacts:
    """`facts` plus the ClassDefs of parsed dataclasses (and their bases) imported from the repository's own
    modules; their defaults' spans name the module's file, so a finding decided there is reported there."""
    imports = dict(facts.imports)
    # a parsed class imported from a module of the repository is named by its module from here on (read
    # below when the module can be found, unknown otherwise, never taken for the library class of that name)
    facts = replace(facts, parsed=tuple(
        replace(p, class_name=imports[p.class_name]) if p.class_name and facts.class_def(p.class_name) is None
        and p.class_name in imports and imports[p.class_name].split(".")[0] not in ("transformers", "trl", "peft")
        else p for p in facts.parsed))
    have = {(c.module, c.name) for c in facts.classes}
    added: list[ClassDef] = []
    todo = [(None, p.class_name) for p in facts.parsed if p.class_name]
    for klass in facts.classes:
        todo += [(None, b) for b in klass.bases]
    seen: set[str] = set()
    while todo:
        owner, name = todo.pop()
        qual = name if "." in name else imports.get(name) if owner is None else f"{owner}.{name}"
        if not qual or "." not in qual or qual in seen or qual.split(".")[0] in ("transformers", "trl", "peft"):
            continue
        seen.add(qual)
        module, _, short = qual.rpartition(".")
        if (module, short) in have or (owner is None and facts.class_def(short) is not None and "." not in name):
            continue
        path = module_file(module, script, root)
        if path is None:
            continue
        shown = display(path)
        for klass in _module_classes(path):
            if klass.name == short:
                fields = tuple(replace(f, default=_located(f.default, shown)) for f in klass.fields)
                added.append(replace(klass, fields=fields, module=module))
                have.add((module, short))
                todo += [(module, b) for b in klass.bases if "." not in b] + [(None, b) for b in klass.bases
                                                                               if "." in b]
    if not added:
        return facts
    # the fields that bear on sequence length, batch or accumulation, as the facts pass records a script's own
    seq, batch, accum = list(facts.seq_evidence), list(facts.batch_evidence), list(facts.accum_evidence)
    for klass in added:
        for f in klass.fields:
            if f.default.unset:
                continue
            lowered = f.name.lower()
            bucket = seq if lowered in SEQ_NAMES else batch if lowered in BATCH_NAMES else \
                accum if lowered in ACCUM_NAMES else None
            if bucket is not None:
                span = f.default.origin or Span.point(1).in_file(display(module_file(klass.module, script, root)))
                param = Param(f"class {klass.module}.{klass.name}", f.name)
                bucket.append(Evidence(Value("param", param, span, "param"), f"{f.name} =", span))
    return replace(facts, classes=facts.classes + tuple(added), seq_evidence=tuple(seq),
                   batch_evidence=tuple(batch), accum_evidence=tuple(accum))


def _located(value: Value, file: str) -> Value:
    if value.origin is None or value.origin.file:
        return value
    return Value(value.state, value.value, value.origin.in_file(file), value.via)


def clear_cache() -> None:
    _module_classes.cache_clear()
