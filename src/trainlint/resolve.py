"""Facts under one launch: every symbolic parameter (facts.Param) replaced by the value the launch binds,
or by its default (the script's own declaration, else the library's for the targeted version); calls in
a branch the resolved condition rules out are dropped; parsed TrainingArguments / TRL configs become
ArgsObjects the rules read like a `TrainingArguments(...)` call."""

from __future__ import annotations

from dataclasses import is_dataclass, replace
from typing import Any

from trainlint.diagnostics import Span
from trainlint.facts.model import (PEFT_CONFIG, SYMBOLIC, Arg, ArgsObject, Call, ClassDef, Compare, Cond,
                                   Evidence, ModelLoad, Param, ParsedObject, ScriptFacts, registry_class)
from trainlint.facts.names import ARGS_CLASSES, MODEL_CLASS_RE
from trainlint.facts.values import UNKNOWN, UNSET, Value, keep_guard_symbols, map_fields
from trainlint.knowledge.versions import Versions
from trainlint.launch.model import Launch, hydra_binding


class Resolver:
    def __init__(self, facts: ScriptFacts, launch: Launch, versions: Versions) -> None:
        self.facts = facts
        self.launch = launch
        self.versions = versions
        self._memo: dict[int, Any] = {}

    # -- one parameter --------------------------------------------------------------------------------
    def param(self, p: Param) -> Value:
        if p.obj == "argparse":
            return self._argparse(p.attr)
        if p.obj.startswith("class "):
            return self._field(p.obj[len("class "):], p.attr)
        parsed = self.facts.parsed_object(p.obj)
        if parsed is None:
            return UNKNOWN
        if p.attr == PEFT_CONFIG:
            return self._peft_config(p.obj)
        if parsed.parser == "argparse":
            return self._argparse(p.attr)
        if parsed.parser == "hydra":
            return self._hydra(p.obj, p.attr)
        if parsed.class_name is None:
            return UNKNOWN
        return self._field(parsed.class_name, p.attr)

    def _argparse(self, dest: str) -> Value:
        declared = [a for a in self.facts.argparse_params if a.dest == dest]
        bound = self.launch.get(dest)
        if bound is not None and declared:
            return bound
        if len(declared) != 1:
            return UNKNOWN
        return declared[0].default if not declared[0].default.unset else UNKNOWN

    def _field(self, cls: str, name: str) -> Value:
        bound = self.launch.get(name)
        if bound is not None:
            return bound
        for klass in self.facts.mro(cls):
            if isinstance(klass, ClassDef):
                for f in klass.fields:
                    if f.name == name:
                        return UNKNOWN if f.default.unset else f.default
            else:
                return library_field_default(klass, name, self.versions)
        return UNKNOWN

    def _hydra(self, obj: str, path: str) -> Value:
        """Key `path` of the composed config (launch/hydra.py binds its leaves): a leaf's Value, or a node's
        mapping (known when every leaf under it is bound; its origin is its first leaf's)."""
        bound = self.launch.get(hydra_binding(obj, path))
        if bound is not None:
            return bound
        items = self._hydra_items(obj, path)
        if not items:
            return UNKNOWN
        origin = next((v.origin for v in items.values() if v.origin is not None), None)
        return Value("known", {k: v.value if v.known else UNKNOWN for k, v in items.items()}, origin,
                     "hydra config", tuple(dict.fromkeys(a for v in items.values() for a in v.assumed)))

    def _hydra_items(self, obj: str, path: str) -> dict[str, Value]:
        """The children of node `path` (every key one level below it), each a Value."""
        prefix = hydra_binding(obj, path) + "."
        children: list[str] = []
        for name, _ in self.launch.bindings:
            if name.startswith(prefix):
                child = name[len(prefix):].split(".", 1)[0]
                if child not in children:
                    children.append(child)
        return {child: self._hydra(obj, f"{path}.{child}") for child in children}

    def _mapping(self, v: Value) -> dict[str, Value] | None:
        """`**cfg.trainer.args`: the keywords it passes, each with the span of its value; None when not known."""
        if v.state != "param" or not isinstance(v.value, Param):
            return None
        parsed = self.facts.parsed_object(v.value.obj)
        if parsed is None or parsed.parser != "hydra":
            return None
        items = self._hydra_items(v.value.obj, v.value.attr)
        return items or None

    def _expanded(self, original: Call, call: Call) -> Call:
        kwargs: dict[str, Value] = {}
        for mapping in original.unpacked:
            items = self._mapping(mapping)
            if items is None:
                return call
            kwargs.update(items)
        kwargs.update(call.kwargs)
        return replace(call, kwargs=tuple(kwargs.items()), opaque_kwargs=original.opaque_rest, unpacked=())

    def _instantiated(self, model: ModelLoad, node: Value) -> ModelLoad:
        """`hydra.utils.instantiate(cfg.model)` with `_target_: transformers.AutoModelForCausalLM.from_pretrained`:
        the load that call makes, its keywords the node's keys (each where it is written); class "" (not judged)
        when the target is not a model class's from_pretrained / from_config or is not known."""
        items = self._mapping(node) or {}
        target = items.get("_target_")
        if target is None or not target.known or not isinstance(target.value, str):
            return model
        owner, _, method = target.value.rpartition(".")
        short = owner.rsplit(".", 1)[-1]
        if method not in ("from_pretrained", "from_config") or not (MODEL_CLASS_RE.match(short) or
                                                                   short == "AutoModel") or short.startswith("Peft"):
            return model
        explicit = dict(model.call.kwargs)

        def kw(*names: str) -> Value:
            for name in names:
                if name in explicit:
                    return explicit[name]
                if name in items:
                    return items[name]
            return UNSET

        quantization = kw("quantization_config")
        four, eight = kw("load_in_4bit"), kw("load_in_8bit")
        quant = Value("known", "4bit", four.origin) if four.is_(True) else \
            Value("known", "8bit", eight.origin) if eight.is_(True) else \
            Value("known", None, None, "library default") if quantization.unset else UNKNOWN
        return replace(model, kind=method, class_name=short,
                       model_id=kw("pretrained_model_name_or_path") if method == "from_pretrained" else UNSET,
                       attn_implementation=kw("attn_implementation"), output_attentions=kw("output_attentions"),
                       use_flash_attention_2=kw("use_flash_attention_2"),
                       dtype=kw("dtype") if not kw("dtype").unset else kw("torch_dtype"), quantization=quant,
                       anchor=target.origin or model.anchor)

    def _peft_config(self, obj: str) -> Value:
        use = self.param(Param(obj, "use_peft"))
        if not use.known:
            return UNKNOWN
        if not use.value:
            return Value("known", None, use.origin, "get_peft_config (use_peft off)")
        cfg = {"__class__": "LoraConfig"}
        for key, attr in (("r", "lora_r"), ("lora_alpha", "lora_alpha"), ("target_modules", "lora_target_modules"),
                          ("task_type", "lora_task_type"), ("modules_to_save", "lora_modules_to_save")):
            value = self.param(Param(obj, attr))
            cfg[key] = value.value if value.known else UNKNOWN
        return Value("known", cfg, use.origin, "get_peft_config")

    # -- whole facts ----------------------------------------------------------------------------------
    def value(self, v: Value) -> Value:
        if v.state == "param":
            if isinstance(v.value, Cond):
                return self._cond(v.value)
            if isinstance(v.value, Compare):
                return v.value.resolve(self.value)
            if not isinstance(v.value, Param):
                return UNKNOWN  # an argument no followed caller passes (facts/inline.py)
            resolved = self.param(v.value)
            return self.value(resolved) if resolved.state == "param" else resolved
        if v.known and isinstance(v.value, (dict, list)) and _has_param(v.value):
            return Value(v.state, self._inner(v.value), v.origin, v.via)
        return v

    def _cond(self, cond: Cond) -> Value:
        """`a if test else b`: the branch the resolved test picks; unknown while the test is."""
        test = self.value(cond.test)
        then, orelse = self.value(cond.then), self.value(cond.orelse)
        if test.known:
            return then if bool(test.value) != cond.negate else orelse
        if then.known and orelse.known and then.value == orelse.value and type(then.value) is type(orelse.value):
            return then
        return UNKNOWN

    def _inner(self, item):
        if isinstance(item, SYMBOLIC):
            value = self.value(Value("param", item))
            return value.value if value.known else UNKNOWN
        if isinstance(item, dict):
            return {k: self._inner(x) for k, x in item.items()}
        if isinstance(item, list):
            return [self._inner(x) for x in item]
        return item

    def walk(self, obj):
        if isinstance(obj, Value):
            return self.value(obj)
        if isinstance(obj, tuple):
            return tuple(self.walk(x) for x in obj)
        if is_dataclass(obj) and not isinstance(obj, (type, Span, ScriptFacts)):
            key = id(obj)
            if key not in self._memo:
                new = map_fields(obj, self.walk)
                if isinstance(obj, Call) and obj.unpacked:
                    new = self._expanded(obj, new)
                if isinstance(obj, Call) and obj.guards:
                    new = keep_guard_symbols(obj, new)
                if isinstance(obj, ModelLoad) and obj.registry and not obj.registry_key.known:
                    new = replace(new, class_name=registry_class(obj.registry, new.registry_key))
                if isinstance(obj, ModelLoad) and obj.instantiated.state == "param":
                    new = self._instantiated(new, obj.instantiated)
                self._memo[key] = new
            return self._memo[key]
        return obj

    def facts_under_launch(self) -> ScriptFacts:
        f = self.facts
        calls = tuple(c for c in self.walk(f.calls) if _runs(c))
        kept = {id(c) for c in calls}
        # a registry lookup whose key stays unknown picks no class: that load is not judged (nothing is guessed)
        models = tuple(m for m in self.walk(f.models) if id(m.call) in kept and not (
            (m.registry or m.instantiated.state == "param") and not m.class_name))
        args_objects = tuple(a for a in self.walk(f.args_objects) if id(a.call) in kept) + self._parsed_args()
        trainers = tuple(t for t in self.walk(f.trainers) if id(t.call) in kept)
        seq = self.walk(f.seq_evidence)
        for args in args_objects[len(args_objects) - len(self.facts.parsed):]:
            if args.call.index != -1:
                continue
            for key in ("max_length", "max_seq_length"):  # as the facts pass reads an SFTConfig(max_length=...)
                if args.call.has_kw(key):
                    seq += (Evidence(args.call.kw(key), f"{args.class_name}({key}=)",
                                     args.call.kw_span(key) or args.call.span),)
        return replace(f, calls=calls, models=models, args_objects=args_objects, trainers=trainers,
                       seq_evidence=seq, batch_evidence=self.walk(f.batch_evidence),
                       accum_evidence=self.walk(f.accum_evidence))

    def _parsed_args(self) -> tuple[ArgsObject, ...]:
        """Each parsed TrainingArguments / TRL config (or a script subclass of one) as an ArgsObject whose
        keywords are what the launch binds and what the script's subclass declares."""
        out = []
        for parsed in self.facts.parsed:
            if parsed.class_name is None:
                continue
            library_class = self._library_base(parsed.class_name)
            if library_class is None:
                continue
            out.append(ArgsObject(self._synthetic_call(parsed, library_class), library_class,
                                  ARGS_CLASSES[library_class], parsed.variable))
        return tuple(out)

    def _library_base(self, cls: str) -> str | None:
        for klass in self.facts.mro(cls):
            if isinstance(klass, str):
                return klass if klass in ARGS_CLASSES else None
        return None

    def _synthetic_call(self, parsed: ParsedObject, library_class: str) -> Call:
        kwargs: dict[str, Value] = {}
        for klass in reversed(list(self.facts.mro(parsed.class_name))):
            if isinstance(klass, ClassDef):
                for f in klass.fields:
                    if not f.default.unset:
                        kwargs[f.name] = self.value(f.default)
        # the other dataclasses of the same parser take their own fields; the rest is this object's
        others = {f.name for p in self.facts.parsed if p.variable != parsed.variable and p.class_name
                  for k in self.facts.mro(p.class_name) if isinstance(k, ClassDef) for f in k.fields}
        for name, value in self.launch.bindings:
            if name not in others and not name.startswith("hydra:"):
                kwargs[name] = value
        spans = tuple((k, v.origin) for k, v in kwargs.items() if v.origin is not None)
        return Call(qualname=library_class, short=library_class, receiver=None, target=parsed.variable, args=(),
                    arg_names=(), kwargs=tuple(kwargs.items()), kw_spans=spans, kw_names=(), opaque_kwargs=False,
                    span=parsed.span, index=-1, scope="<module>")


def _has_param(item) -> bool:
    if isinstance(item, SYMBOLIC):
        return True
    if isinstance(item, dict):
        return any(_has_param(x) for x in item.values())
    if isinstance(item, list):
        return any(_has_param(x) for x in item)
    return False


def _runs(call: Call) -> bool:
    """False when a resolved `if` condition puts the call in the branch that does not run."""
    for condition, branch in call.guards:
        if condition.known and bool(condition.value) != branch:
            return False
    return True


def library_field_default(class_name: str, name: str, versions: Versions) -> Value:
    """A library argument class's default for `name` in the version the file targets; UNKNOWN when the
    field or the class is not in trainlint's knowledge (knowledge/arguments.py), or when the default is not a
    literal there (an expression, or one that depends on the installed torch, like `optim`)."""
    from trainlint.knowledge.arguments import REQUIRED, is_literal, library_fields

    table = library_fields(class_name, versions)
    if table is None or name not in table:
        return UNKNOWN
    info = table[name]
    if info.default is REQUIRED or not is_literal(info.default):
        return UNKNOWN
    return Value("known", info.default, None, f"{class_name} default ({info.source})")


def resolve_facts(facts: ScriptFacts, launch: Launch, versions: Versions) -> ScriptFacts:
    return Resolver(facts, launch, versions).facts_under_launch()
