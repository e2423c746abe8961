"""Which library versions a script's own calls can run on: keywords and imports that a release added or removed,
intersected into a bound per library, so an unpinned script is linted against the newest release that accepts it
(and a pin that its calls cannot run on is reported, not silently believed).

Two sources, both read from the released wheels (nothing imported):
- keywords of TrainingArguments / Seq2SeqTrainingArguments / the TRL configs: the per-release field lists of
  arguments.json (bench/gen_argument_fields.py: every release of transformers 4.36.0-5.24.0 and trl 0.7.0-1.16.0);
  a keyword present in the oldest release read gets no lower bound (older releases were not read), one present in
  the newest gets no upper bound; a keyword of a class that a later release introduced is bounded by that release.
  Examples it yields: `TrainingArguments(evaluation_strategy=)` up to 4.50.3 (gone in 4.51.0), `eval_strategy=` from
  4.41.0, `SFTConfig(max_seq_length=)` from 0.9.2 (SFTConfig's first release) up to 0.19.1,
  `SFTConfig(max_length=)` from 0.16.0, `warmup_ratio=` up to 4.57.x.
- the hand-read facts in FACTS below (trainer keywords, `from_pretrained` keywords, top-level imports), each with
  the file it was read in.

`strict` facts raise at run time outside their range (TypeError for an unknown keyword, ImportError); the others
(`from_pretrained(dtype=)` before 4.56, swallowed into the config) only say what the author expected, so they
steer the choice of version but never make a conflict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from trainlint.knowledge.releases import api_index as _index
from trainlint.knowledge.releases import released  # noqa: F401  (re-exported)
from trainlint.knowledge.versions import Bound, Evidence, _cmp, _show, parse_version  # noqa: F401  (re-exported)

V = tuple[int, ...]


@dataclass(frozen=True)
class ApiFact:
    library: str  # "transformers" | "trl"
    kind: str  # "kwarg" | "import"
    owner: str  # the class / method a keyword belongs to (short name); "trl" / "transformers" for imports
    name: str
    since: V | None  # first release that accepts it; None: every release read
    until: V | None  # first release that rejects it; None: still accepted in the newest read
    source: str
    strict: bool = True


_TRL_MOVED_TO_EXPERIMENTAL = ("CPOTrainer", "CPOConfig", "ORPOTrainer", "ORPOConfig", "GKDTrainer", "GKDConfig",
                              "PPOTrainer", "PPOConfig", "BCOTrainer", "BCOConfig", "XPOTrainer", "XPOConfig",
                              "NashMDTrainer", "NashMDConfig", "OnlineDPOTrainer", "OnlineDPOConfig",
                              "PRMTrainer", "PRMConfig")

FACTS: tuple[ApiFact, ...] = (
    # SFTTrainer.__init__ signature (trl/trainer/sft_trainer.py): 0.11.4 takes tokenizer=, dataset_text_field=,
    # max_seq_length=; 0.12.2 takes processing_class= with `@deprecate_kwarg("tokenizer", new_name="processing_class",
    # version="0.16.0")` (l.127) and still dataset_text_field / max_seq_length; 0.13.0 has neither; 0.16.1 has no
    # deprecate_kwarg.
    ApiFact("trl", "kwarg", "SFTTrainer", "tokenizer", None, (0, 16), "trl 0.15.2 sft_trainer.py deprecate_kwarg; gone in 0.16.0"),
    ApiFact("trl", "kwarg", "SFTTrainer", "dataset_text_field", None, (0, 13), "trl 0.12.2 sft_trainer.py SFTTrainer.__init__; gone in 0.13.0"),
    ApiFact("trl", "kwarg", "SFTTrainer", "max_seq_length", None, (0, 13), "trl 0.12.2 sft_trainer.py SFTTrainer.__init__; gone in 0.13.0"),
    ApiFact("trl", "kwarg", "SFTTrainer", "processing_class", (0, 12), None, "trl 0.12.2 sft_trainer.py SFTTrainer.__init__"),
    ApiFact("trl", "kwarg", "DPOTrainer", "tokenizer", None, (0, 16), "trl 0.12.2 dpo_trainer.py:216 deprecate_kwarg (0.16.0); gone in 0.16.1"),
    ApiFact("trl", "kwarg", "DPOTrainer", "processing_class", (0, 12), None, "trl 0.12.2 dpo_trainer.py DPOTrainer.__init__"),
    # transformers Trainer.__init__ / Seq2SeqTrainer.__init__ (trainer.py, trainer_seq2seq.py): 4.45.2 takes
    # `tokenizer` (trainer.py l.386, trainer_seq2seq.py l.50) and no processing_class; 4.46.3 and 4.57.6 take
    # processing_class with `@deprecate_kwarg("tokenizer", new_name="processing_class", version="5.0.0")` (4.46.3
    # trainer.py l.388, trainer_seq2seq.py l.55; 4.57.6 trainer.py l.409); 5.0.0 takes neither `tokenizer` nor
    # **kwargs (trainer.py l.389-401, trainer_seq2seq.py l.56-73): TypeError. A local subclass's call counts when
    # the keyword reaches the base (evidence() below).
    *(ApiFact("transformers", "kwarg", owner, "tokenizer", None, (5,),
              f"transformers 4.57.6 {where} deprecate_kwarg(version='5.0.0'); 5.0.0 {owner}.__init__ has no "
              f"tokenizer= and no **kwargs")
      for owner, where in (("Trainer", "trainer.py"), ("Seq2SeqTrainer", "trainer_seq2seq.py"))),
    *(ApiFact("transformers", "kwarg", owner, "processing_class", (4, 46), None,
              f"transformers 4.46.3 {where} {owner}.__init__ (4.45.2 takes tokenizer= only)")
      for owner, where in (("Trainer", "trainer.py"), ("Seq2SeqTrainer", "trainer_seq2seq.py"))),
    # trl/__init__.py `_import_structure`
    ApiFact("trl", "import", "trl", "setup_chat_format", None, (0, 26), "trl 0.25.1 __init__.py exports it; 0.26.2 does not"),
    ApiFact("trl", "import", "trl", "GRPOTrainer", (0, 14), None, "trl 0.14.0 __init__.py (absent in 0.13.0)"),
    ApiFact("trl", "import", "trl", "GRPOConfig", (0, 14), None, "trl 0.14.0 __init__.py (absent in 0.13.0)"),
    ApiFact("trl", "import", "trl", "GKDTrainer", (0, 11), (0, 29), "trl 0.11.4 __init__.py; trl.experimental.gkd from 0.29.1"),
    ApiFact("trl", "import", "trl", "DistillationTrainer", (1, 10), None, "trl 1.10.0 __init__.py (trl.experimental.distillation before)"),
    *(ApiFact("trl", "import", "trl", name, None, (0, 29), "trl 0.28.0 __init__.py exports it; 0.29.1 moved it to trl.experimental")
      for name in _TRL_MOVED_TO_EXPERIMENTAL if name not in ("GKDTrainer",)),
    # transformers/deepspeed.py, the shim kept after the move to transformers.integrations (PR 25599): in the
    # 4.45.2 wheel, absent from the 4.46.0 and 4.46.3 wheels (read as zip listings)
    ApiFact("transformers", "import", "transformers", "deepspeed", None, (4, 46),
            "transformers 4.45.2 ships transformers/deepspeed.py; 4.46.0 does not"),
    # transformers modeling_utils.py PreTrainedModel.from_pretrained
    ApiFact("transformers", "kwarg", "from_pretrained", "attn_implementation", (4, 36), None,
            "transformers 4.36.0 modeling_utils.py l.1235 (4.35.2 has no such keyword)"),
    ApiFact("transformers", "kwarg", "from_pretrained", "dtype", (4, 56), None,
            "transformers 4.56.2 modeling_utils.py l.4754 `kwargs.pop(\"dtype\")` (4.55.4: swallowed into the config)",
            strict=False),
    ApiFact("transformers", "kwarg", "from_pretrained", "load_in_4bit", None, (5,),
            "transformers 4.57.6 modeling_utils.py l.4635; 5.0.0 pops it no more (TypeError in the model's __init__)"),
    ApiFact("transformers", "kwarg", "from_pretrained", "load_in_8bit", None, (5,),
            "transformers 4.57.6 modeling_utils.py; 5.0.0 pops it no more"),
)




def field_range(lib: str, class_name: str, field: str) -> tuple[V | None, V | None, str] | None:
    """(since, until, source) of a keyword of a library argument class, from the releases read in arguments.json
    (through the api_fields.json index); None when the keyword is not bounded by them (present in every release
    read, or in none: a typo is not a version bound)."""
    found = _index()["libraries"].get(lib, {}).get("classes", {}).get(class_name, {}).get(field)
    if found is None:
        return None
    since, until = (parse_version(x) if x else None for x in found)
    return since, until, f"{lib} {class_name} fields per release (knowledge/arguments.json)"


@lru_cache(maxsize=None)
def scan_field_range(lib: str, class_name: str, field: str) -> tuple[V | None, V | None, str] | None:
    """field_range computed from arguments.json itself (what scripts/gen_api_fields.py writes into the index)."""
    versions, table = _presence(lib)
    present = [v for i, v in enumerate(versions) if field in _fields_at(table, class_name, i)]
    if not present:
        return None
    first, last = versions.index(present[0]), versions.index(present[-1])
    since = None if first == 0 else parse_version(present[0])
    until = None if last == len(versions) - 1 else parse_version(versions[last + 1])
    return since, until, f"{lib} {present[0]}-{present[-1]} {class_name} fields (knowledge/arguments.json)"


@lru_cache(maxsize=None)
def _presence(lib: str) -> tuple[tuple[str, ...], tuple[dict[str, tuple[frozenset[str], tuple[str, ...]]], ...]]:
    """Per release read (oldest first): class -> (its own field names, its same-library bases). Walks the stored
    differences once instead of building every release's full snapshot (arguments._snapshot), which costs a
    pre-commit run more than the rest of linting a file."""
    from trainlint.knowledge import arguments

    entry = arguments._data()["libraries"][lib]
    current: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {}
    out = []
    for v in entry["stored"]:
        for name, cd in entry["data"][v].get("classes", {}).items():
            if cd is None:
                current.pop(name, None)
                continue
            fields, bases = current.get(name, (frozenset(), ()))
            if not cd.get("$diff"):
                fields = frozenset(cd.get("fields", {}))
            elif "fields" in cd:
                changed = cd["fields"]
                fields = frozenset((set(fields) - {f for f, rec in changed.items() if rec is None})
                                   | {f for f, rec in changed.items() if rec is not None})
            if "bases" in cd and cd["bases"] is not None:
                bases = tuple(b for b in cd["bases"] if ":" not in b)  # same-library bases only
            current[name] = (fields, bases)
        out.append(dict(current))
    return tuple(entry["stored"]), tuple(out)


def _fields_at(table, class_name: str, i: int) -> frozenset[str]:
    """The keywords `class_name` declares itself or inherits within its library at release index i."""
    classes = table[i]
    out: set[str] = set()
    todo, seen = [class_name], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in classes:
            continue
        seen.add(name)
        fields, bases = classes[name]
        out |= fields
        todo.extend(bases)
    return frozenset(out)


def _own_trl_keyword(class_name: str, name: str) -> bool:
    """A TRL config keyword that is not a TrainingArguments field in any release read (so TRL's release decides)."""
    return name not in _index()["training_arguments_fields"]


def evidence(facts, text: str = "") -> tuple[Evidence, ...]:
    """What the script's calls and imports say about the versions it can run on (`text`: to place imports)."""
    out: list[Evidence] = []
    by_owner = {(f.owner, f.name): f for f in FACTS if f.kind == "kwarg"}
    owned = [(a.call, a.class_name, a.library, True) for a in facts.args_objects]
    owned += [(t.call, t.class_name, t.library, False) for t in facts.trainers]
    owned += [(c, "from_pretrained", "transformers", False) for c in facts.calls
              if c.short == "from_pretrained" and c.qualname.startswith("transformers.")]
    through = {id(t.call): t.subclass for t in facts.trainers if getattr(t, "subclass", None)}
    for call, owner, lib, dataclass_args in owned:
        subclass = through.get(id(call))
        for name, _ in call.kwargs:
            fact = by_owner.get((owner, name))
            if fact is not None and fact.library == lib:
                if subclass is not None and not reaches_base(facts, subclass, name):
                    continue
                what = f"{owner}({name}=)" + (f" through {subclass}" if subclass else "")
                out.append(Evidence(lib, what, call.span.line, fact.since, fact.until, fact.source, fact.strict))
                continue
            if not dataclass_args or (lib == "trl" and not _own_trl_keyword(owner, name)):
                continue
            found = field_range(lib, owner, name)
            if found is not None and (found[0] or found[1]):
                out.append(Evidence(lib, f"{owner}({name}=)", call.span.line, found[0], found[1], found[2]))
    imported = {q for _, q in facts.imports}
    for fact in FACTS:
        qual = f"{fact.owner}.{fact.name}"
        if fact.kind == "import" and qual in imported:
            out.append(Evidence(fact.library, f"from {fact.owner} import {fact.name}", _import_line(text, fact),
                                fact.since, fact.until, fact.source, fact.strict))
    return tuple(out)


def reaches_base(facts, subclass: str, name: str, depth: int = 0) -> bool:
    """Whether `MySubclass(name=...)` hands `name` to the library class it derives from: no `__init__` of its own
    (or of a local base in between) takes `name` itself, and each one there passes **kwargs on."""
    if depth > 8:
        return False
    init = facts.function(f"class {subclass}.__init__")
    if init is not None and (name in {p for p, _ in init.params} or init.kwstar is None):
        return False
    klass = facts.class_def(subclass)
    local = [b for b in (klass.bases if klass is not None else ()) if "." not in b and b != subclass and
             facts.class_def(b) is not None]
    return all(reaches_base(facts, b, name, depth + 1) for b in local)


def _import_line(text: str, fact: ApiFact) -> int:
    pattern = re.compile(rf"^\s*from\s+{re.escape(fact.owner)}\s+import\b.*\b{re.escape(fact.name)}\b")
    for i, line in enumerate(text.splitlines(), start=1):
        if pattern.search(line):
            return i
    return 1


def bounds(facts, text: str = "") -> dict[str, Bound]:
    found: dict[str, list[Evidence]] = {}
    for e in evidence(facts, text):
        found.setdefault(e.library, []).append(e)
    return {lib: Bound(lib, tuple(es)) for lib, es in found.items()}
