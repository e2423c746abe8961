"""Facts from one script: the collector's walk (facts/collector.py) turned into ScriptFacts, with each call's
arguments resolved statically (facts/evaluate.py), model loads, training arguments, trainers, evidence of the
sequence length and batch, the functions the file defines and the calls that may reach the repository's own."""

from __future__ import annotations

import ast
import re
from dataclasses import replace

import libcst as cst

from trainlint.diagnostics import Span
from trainlint.facts.collector import _Collector, _RawCall  # (tests/test_positions.py patches _Collector here)
from trainlint.facts.evalsets import eval_sets
from trainlint.facts.hydra import INSTANTIATE_NAME
from trainlint.facts.evaluate import MODULE_SCOPE, _dotted, _enclosing_scopes, _Resolver
from trainlint.facts.model import (ArgsObject, Call, Evidence, FunctionDef, ModelLoad, Param, ParsedObject,
                                   ScriptFacts, TrainerCall, registry_class)
from trainlint.facts.names import (  # the tables live apart so lint.py can use them without LibCST
    ACCELERATOR,
    ARGS_CLASSES,
    BATCH_NAMES,
    CONFIG_CLASS_RE,
    DATALOADER,
    MODEL_CLASS_RE,
    NOT_REPOSITORY_MODULES,
    PIN_RE,
    PIP_RE,
    SEQ_NAMES,
    TRAINER_CLASSES,
)
from trainlint.facts.trainers import with_local_trainers
from trainlint.facts.values import UNKNOWN, UNSET, Value, known
from trainlint.facts.walk import Misaligned, Positions, parse_tree, plain_visitor, statement_starts, walk

def _library_of(qualname: str, short: str, star_imports: set[str], table: dict[str, str]) -> str | None:
    """Which library a matched class comes from, or None when it is not the library's class."""
    if short not in table:
        return None
    root = qualname.split(".")[0]
    if root in ("transformers", "trl"):
        return table[short]
    if qualname == short and any(m.split(".")[0] in ("transformers", "trl") for m in star_imports):
        return table[short]
    return None


def extract_facts(module: cst.Module, path: str, text: str,
                  starts: list[tuple[int, int]] | None | bool = True,
                  parse_helpers: frozenset[str] = frozenset(), tree: ast.Module | None = None) -> ScriptFacts:
    """`starts`: the statement starts of `text` (walk.statement_starts of the ast the caller parsed), or
    True to parse them here, or None to take positions from the whole module. `parse_helpers`: names the file
    imports of functions that return `parser.parse_args()` in a repository module (facts/modules.py). `tree`:
    `text`'s ast, when the caller has it (parsed here otherwise, once, for the starts and the functions' lines)."""
    if starts is True:
        tree = tree if tree is not None else parse_tree(text)
        starts = statement_starts(tree) if tree is not None else None
    collector = _collect(module, text, starts, parse_helpers)
    resolver = _Resolver(collector)

    calls: list[Call] = []
    raw_by_id: dict[int, Call] = {}
    for raw in collector.raw_calls:
        call = _build_call(raw, resolver, collector)
        calls.append(call)
        raw_by_id[id(raw.node)] = call

    models: list[ModelLoad] = []
    args_objects: list[ArgsObject] = []
    trainers: list[TrainerCall] = []
    for raw, call in zip(collector.raw_calls, calls):
        lib = _library_of(call.qualname, call.short, collector.star_imports, ARGS_CLASSES)
        if lib is not None:
            args_objects.append(ArgsObject(call, call.short, lib, call.target))
            continue
        lib = _library_of(call.qualname, call.short, collector.star_imports, TRAINER_CLASSES)
        if lib is not None:
            trainers.append(TrainerCall(call, call.short, lib, call.arg_name(1, "args"), call.arg_name(0, "model"),
                                        call.target))
            model_arg = call.arg(0, "model")
            if (model_arg.state == "param" or model_arg.known and isinstance(model_arg.value, str)) and lib == "trl":
                models.append(_string_model(call, model_arg, raw, resolver, collector))
            continue
        model = _model_load(raw, call, resolver, collector) if call.qualname != INSTANTIATE_NAME else \
            _instantiated(call)
        if model is not None:
            models.append(model)

    seq_evidence, batch_evidence, accum_evidence = _evidence(calls, args_objects, trainers, collector, resolver)
    pins = tuple(_pip_pins(text))
    functions = tuple(_functions(collector, resolver, tree, text))
    hops = tuple(_hops(collector, resolver, calls, {f.scope for f in functions})) + tuple(_fire_hops(collector))
    return with_local_trainers(ScriptFacts(
        path=path,
        imports=tuple(sorted(collector.imports.items())),
        calls=tuple(calls),
        models=tuple(models),
        args_objects=tuple(args_objects),
        trainers=tuple(trainers),
        seq_evidence=tuple(seq_evidence),
        batch_evidence=tuple(batch_evidence),
        accum_evidence=tuple(accum_evidence),
        pip_pins=pins,
        logits_accessed=collector.logits_accessed,
        image_slots=tuple(collector.image_slots),
        forward_losses=tuple(collector.forward_losses),
        parsed_args_objects=tuple(sorted(collector.parsed_names)),
        functions=functions,
        hops=hops,
        parse_functions=tuple(sorted(collector.params.parse_functions)),
        marks=tuple(sorted((scope, tuple(sorted(m))) for scope, m in collector.marks.items())),
        loss_accumulations=collector.loops.build(text), eval_sets=eval_sets(collector, resolver, trainers),
        **_with_hydra(collector.params.build(
            lambda node: resolver.value(node, MODULE_SCOPE) if node is not None else UNKNOWN,
            collector.literal_spans), collector),
    ))


def _with_hydra(built: dict, c: _Collector) -> dict:
    """The Hydra / OmegaConf configs the script reads, each a parsed object of parser "hydra" (facts/hydra.py)."""
    if not c.hydra_sources:
        return built
    seen = {p.variable for p in built["parsed"]}
    extra = []
    for source in c.hydra_sources:
        if source.variable not in seen:
            seen.add(source.variable)
            extra.append(ParsedObject(source.variable, "hydra", None, (source.kind,), source.span or Span.point(1)))
    return dict(built, parsed=built["parsed"] + tuple(extra), hydra=tuple(c.hydra_sources))


def _collect(module: cst.Module, text: str, starts: list[tuple[int, int]] | None,
             parse_helpers: frozenset[str] = frozenset()) -> _Collector:
    collector = _Collector(Positions(module, text, starts), parse_helpers)
    if not plain_visitor(collector):  # a visitor walk() cannot reproduce: LibCST's own traversal
        from libcst.metadata import MetadataWrapper

        MetadataWrapper(module, unsafe_skip_copy=True).visit(collector)
        return collector
    try:
        seen = walk(module, collector, collector._positions)
        if starts is None or seen == len(starts):
            return collector
    except Misaligned:
        pass
    collector = _Collector(Positions(module, text, None), parse_helpers)  # ast and LibCST disagree
    walk(module, collector, collector._positions)
    return collector



def _literals(test: cst.BaseExpression, branch: bool, depth: int = 0):
    """The conditions that hold in one branch of `if test:`, as (expression, truth) pairs: the test itself, and
    each part of a conjunction that the branch implies (`if a and not (b or c):` runs with a true, b and c false;
    its `else` implies no single part, so only the whole test is kept there)."""
    yield test, branch
    if depth > 4:
        return
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = test.expression
        if isinstance(inner, cst.BooleanOperation):
            yield from _literals(inner, not branch, depth + 1)
        return
    if isinstance(test, cst.BooleanOperation):
        joins = cst.And if branch else cst.Or  # a true `and`, a false `or`: every operand has the branch's truth
        if isinstance(test.operator, joins):
            for part in (test.left, test.right):
                yield from _literals(part, branch, depth + 1)

def _build_call(raw: _RawCall, resolver: _Resolver, c: _Collector) -> Call:
    args: list[Value] = []
    arg_names: list[str | None] = []
    kwargs: dict[str, Value] = {}
    kw_spans: list[tuple[str, Span]] = []
    kw_names: list[tuple[str, str | None]] = []
    opaque = False
    splat = None
    mappings: list[Value] = []
    for arg in raw.node.args:
        if arg.star == "*":
            opaque = True  # positional splat: positions after it are unknown
            continue
        if arg.star == "**" and isinstance(arg.value, cst.Name) and \
                c.func_kwstar.get(raw.scope) == arg.value.value and splat is None:
            splat = arg.value.value  # the function's own **kwargs: what its caller passes (facts/inline.py);
            opaque = True  # until a caller is followed, any keyword may be set
            continue
        if arg.star == "**":
            unpacked = resolver.value(arg.value, raw.scope)
            if unpacked.state == "param" and isinstance(unpacked.value, Param) and c.hydra_names:
                mappings.append(unpacked)  # `**cfg.trainer.args`: expanded once a launch composes the config
                continue
            if unpacked.known and isinstance(unpacked.value, dict):
                for key, item in unpacked.value.items():
                    kwargs[key] = UNKNOWN if isinstance(item, Value) else \
                        Value("param", item, raw.span, "param") if isinstance(item, Param) else \
                        known(item, raw.span, "unpacked dict")
            else:
                opaque = True
            continue
        value = resolver.value(arg.value, raw.scope)
        if value.known and value.origin is None:
            value = Value(value.state, value.value, c._keyword_spans.get(id(arg)) or raw.span, value.via)
        if arg.keyword is None:
            if not opaque:
                args.append(value)
                arg_names.append(arg.value.value if isinstance(arg.value, cst.Name) else None)
        else:
            key = arg.keyword.value
            kwargs[key] = value
            span = c._keyword_spans.get(id(arg))
            if span is not None:
                kw_spans.append((key, span))
            kw_names.append((key, arg.value.value if isinstance(arg.value, cst.Name) else None))
    last_end, trailing_comma, close_paren = c.call_layout[id(raw.node)]
    guards = []
    for test, branch, scope in raw.guards:
        for literal, holds in _literals(test, branch):
            negate = isinstance(literal, cst.UnaryOperation) and isinstance(literal.operator, cst.Not)
            condition = resolver.value(literal.expression if negate else literal, scope)
            if condition.state == "param" or condition.known:
                guards.append((condition, holds != negate))
    return Call(
        kw_splat=splat,
        guards=tuple(guards),
        last_arg=last_end,
        trailing_comma=trailing_comma,
        close_paren=close_paren,
        qualname=raw.qualname,
        short=raw.short,
        qualified=raw.qualified,
        local=raw.local,
        receiver=raw.receiver,
        target=raw.target,
        args=tuple(args),
        arg_names=tuple(arg_names),
        kwargs=tuple(kwargs.items()),
        kw_spans=tuple(kw_spans),
        kw_names=tuple(kw_names),
        opaque_kwargs=opaque or bool(mappings),
        span=raw.span,
        index=raw.index,
        scope=raw.scope,
        unpacked=tuple(mappings),
        opaque_rest=opaque,
    )


def _instantiated(call: Call) -> ModelLoad | None:
    """`hydra.utils.instantiate(cfg.model)`: a model load once the node's `_target_` is read (resolve.py)."""
    node = call.arg(0, "config")
    if node.state != "param" or not isinstance(node.value, Param):
        return None
    return ModelLoad(call=call, kind="from_pretrained", class_name="", model_id=UNKNOWN, attn_implementation=UNSET,
                     output_attentions=UNSET, use_flash_attention_2=UNSET, dtype=UNSET, quantization=UNKNOWN,
                     inline_config=(), config_class=None, variable=call.target, anchor=call.span, instantiated=node)


def _bound_node(name: str, scope: str, c: _Collector) -> cst.BaseExpression | None:
    for candidate in _enclosing_scopes(scope):
        values = c.bindings.get((candidate, name))
        if values is not None:
            return values[0] if len(values) == 1 else None
    return None


def _registry(node: cst.BaseExpression, scope: str, resolver: _Resolver, c: _Collector):
    """`MODEL_REGISTRY[key]` (directly, or through `cls = MODEL_REGISTRY[key]`) where the registry is a dict literal,
    bound once, of model classes: its (key, class) pairs and the key's Value; None otherwise."""
    if isinstance(node, cst.Name):
        node = _bound_node(node.value, scope, c)
    if not (isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and len(node.slice) == 1
            and isinstance(node.slice[0].slice, cst.Index)):
        return None
    table = _bound_node(node.value.value, scope, c)
    if not isinstance(table, cst.Dict) or not table.elements:
        return None
    pairs = []
    for element in table.elements:
        if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString) or \
                not isinstance(element.value, (cst.Name, cst.Attribute)):
            return None
        short = (c.qualname(element.value) or "").split(".")[-1]
        if not (MODEL_CLASS_RE.match(short) or short == "AutoModel"):
            return None
        pairs.append((element.key.evaluated_value, short))
    return tuple(pairs), resolver.value(node.slice[0].slice.value, scope)


def _model_load(raw: _RawCall, call: Call, resolver: _Resolver, c: _Collector) -> ModelLoad | None:
    func = raw.node.func
    registry = _registry(func.value, raw.scope, resolver, c) \
        if call.short in ("from_pretrained", "from_config") and isinstance(func, cst.Attribute) else None
    if registry is not None:
        model = _model_load_of(raw, call, resolver, c, registry_class(*registry))
        return replace(model, registry=registry[0], registry_key=registry[1]) if model is not None else None
    return _model_load_of(raw, call, resolver, c)


def _model_load_of(raw: _RawCall, call: Call, resolver: _Resolver, c: _Collector,
                   registry_pick: str | None = None) -> ModelLoad | None:
    func = raw.node.func
    if registry_pick is not None:
        kind, class_name = call.short, registry_pick
        model_id = call.arg(0, "pretrained_model_name_or_path") if kind == "from_pretrained" else UNSET
        config_node = _first_arg_node(raw.node, 0, "config") if kind == "from_config" else None
    elif call.short in ("from_pretrained", "from_config") and isinstance(func, cst.Attribute):
        owner = _dotted(func.value)
        owner_qual = c.qualname(func.value) or owner
        owner_short = owner_qual.split(".")[-1]  # through `import ... as` aliases
        if not (MODEL_CLASS_RE.match(owner_short) or owner_short in ("AutoModel", "AutoLigerKernelForCausalLM")):
            return None
        if owner_short.startswith(("AutoPeft", "Peft")) or owner_qual.split(".")[0] == "peft":
            return None
        kind = call.short
        class_name = owner_short
        model_id = call.arg(0, "pretrained_model_name_or_path") if kind == "from_pretrained" else UNSET
        config_node = _first_arg_node(raw.node, 0, "config") if kind == "from_config" else None
    elif MODEL_CLASS_RE.match(call.short) and not call.short.startswith("DataCollator") and \
            isinstance(func, (cst.Name, cst.Attribute)):
        root = (c.qualname(func) or call.short).split(".")[0]
        if root not in ("transformers",) and not c.star_imports:
            return None
        kind, class_name, model_id = "constructor", call.short, UNSET
        config_node = _first_arg_node(raw.node, 0, "config")
    else:
        return None
    config_class, inline = _inline_config(config_node, raw.scope, resolver, c)
    quant = _quantization(call, raw.scope, resolver, c)
    dtype = call.kw("dtype") if call.has_kw("dtype") else call.kw("torch_dtype")
    if config_class is not None and dtype.unset:
        dtype = dict(inline).get("dtype", dict(inline).get("torch_dtype", UNSET))
    return ModelLoad(
        call=call,
        kind=kind,
        class_name=class_name,
        model_id=model_id,
        attn_implementation=call.kw("attn_implementation"),
        output_attentions=call.kw("output_attentions"),
        use_flash_attention_2=call.kw("use_flash_attention_2"),
        dtype=dtype,
        quantization=quant,
        inline_config=inline,
        config_class=config_class,
        variable=call.target,
        anchor=call.kw_span("attn_implementation") or call.span,
    )


def _first_arg_node(node: cst.Call, index: int, keyword: str) -> cst.BaseExpression | None:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [a for a in node.args if a.keyword is None and not a.star]
    return positional[index].value if index < len(positional) else None


def _inline_config(node, scope: str, resolver: _Resolver, c: _Collector):
    """`LlamaForCausalLM(LlamaConfig(vocab_size=...))`, directly or through a name bound once."""
    depth = 0
    while isinstance(node, cst.Name) and depth < 4:
        bound = None
        for candidate in _enclosing_scopes(scope):
            values = c.bindings.get((candidate, node.value))
            if values is not None:
                bound = values[0] if len(values) == 1 else None
                break
        node = bound
        depth += 1
    if not isinstance(node, cst.Call):
        return None, ()
    name = _dotted(node.func).split(".")[-1]
    if not CONFIG_CLASS_RE.match(name) or name in ("AutoConfig", "BitsAndBytesConfig", "LoraConfig"):
        return None, ()
    items = []
    for arg in node.args:
        if arg.keyword is not None:
            items.append((arg.keyword.value, resolver.value(arg.value, scope)))
    return name, tuple(items)


def _quantization(call: Call, scope: str, resolver: _Resolver, c: _Collector) -> Value:
    for flag, label in (("load_in_4bit", "4bit"), ("load_in_8bit", "8bit")):
        value = call.kw(flag)
        if value.is_(True):
            return known(label, value.origin, value.via)
    qc = call.kw("quantization_config")
    if qc.unset:
        return known(None, None, "library default")
    if qc.known and isinstance(qc.value, dict):
        if qc.value.get("load_in_4bit") is True:
            return known("4bit")
        if qc.value.get("load_in_8bit") is True:
            return known("8bit")
    return UNKNOWN


def _string_model(call: Call, model_arg: Value, raw: _RawCall, resolver: _Resolver, c: _Collector) -> ModelLoad:
    """`SFTTrainer(model="org/id", args=SFTConfig(model_init_kwargs={...}))`."""
    init_kwargs: dict = {}
    args_node = _first_arg_node(raw.node, 1, "args")
    if isinstance(args_node, cst.Name):
        for candidate in _enclosing_scopes(raw.scope):
            bound = c.bindings.get((candidate, args_node.value))
            if bound:
                args_node = bound[0] if len(bound) == 1 else None
                break
    if isinstance(args_node, cst.Call):
        for arg in args_node.args:
            if arg.keyword is not None and arg.keyword.value == "model_init_kwargs":
                resolved = resolver.value(arg.value, raw.scope)
                init_kwargs = resolved.value if resolved.known and isinstance(resolved.value, dict) else {"?": UNKNOWN}
    set_on = _first_arg_node(raw.node, 1, "args")
    if isinstance(set_on, cst.Name):
        # `training_args.model_init_kwargs = dict(dtype=model_args.dtype, ...)` before the trainer is built (TRL's
        # own scripts set it on the parsed config): the last assignment in the trainer's scope or above it
        for candidate in _enclosing_scopes(raw.scope):
            assigned = c.attr_bindings.get((candidate, set_on.value, "model_init_kwargs"))
            if assigned:
                resolved = resolver.value(assigned[-1], candidate) if len(assigned) == 1 else UNKNOWN
                init_kwargs = resolved.value if resolved.known and isinstance(resolved.value, dict) else {"?": UNKNOWN}
                break

    def pick(name: str) -> Value:
        if "?" in init_kwargs:
            return UNKNOWN
        if name not in init_kwargs:
            return UNSET
        item = init_kwargs[name]
        if isinstance(item, Param):  # `dtype=model_args.dtype`: the launch (or the field's default) decides
            return Value("param", item, call.span, "param")
        return UNKNOWN if isinstance(item, Value) else known(item, call.span, "model_init_kwargs")

    dtype = pick("dtype") if not pick("dtype").unset else pick("torch_dtype")
    return ModelLoad(
        call=call,
        kind="trainer_string",
        class_name=call.short,
        model_id=model_arg,
        attn_implementation=pick("attn_implementation"),
        output_attentions=pick("output_attentions"),
        use_flash_attention_2=pick("use_flash_attention_2"),
        dtype=dtype,
        quantization=known(None, None, "library default") if "quantization_config" not in init_kwargs else UNKNOWN,
        inline_config=(),
        config_class=None,
        variable=None,
        anchor=call.span,
    )


def _evidence(calls, args_objects, trainers, c: _Collector, resolver: _Resolver):
    seq: list[Evidence] = []
    batch: list[Evidence] = []
    accum: list[Evidence] = []
    args_ids = {id(a.call) for a in args_objects}
    trainer_ids = {id(t.call) for t in trainers}
    for call in calls:
        if id(call) in args_ids or id(call) in trainer_ids:
            for key in ("max_length", "max_seq_length"):
                if call.has_kw(key):
                    seq.append(Evidence(call.kw(key), f"{call.short}({key}=)", call.kw_span(key) or call.span))
            continue
        if call.short == "generate":
            continue
        tokenizerish = "tok" in call.qualname.lower() or "collat" in call.qualname.lower()
        for key in ("max_length", "model_max_length", "block_size", "max_seq_length"):
            if call.has_kw(key) and (tokenizerish or key != "max_length"):
                seq.append(Evidence(call.kw(key), f"{call.qualname}({key}=)", call.kw_span(key) or call.span))
        if call.is_api(*ACCELERATOR):
            value = call.kw("gradient_accumulation_steps")
            accum.append(Evidence(value if not value.unset else known(1, None, "library default"),
                                  "Accelerator(gradient_accumulation_steps=)", call.kw_span("gradient_accumulation_steps")
                                  or call.span))
        if call.is_api(*DATALOADER):
            value = call.arg(1, "batch_size")
            batch.append(Evidence(value if not value.unset else known(1, None, "library default"),
                                  "DataLoader(batch_size=)", call.span))
    for expr, scope, span in c.slice_evidence:
        seq.append(Evidence(resolver.value(expr, scope, span), "slice to a constant", span))
    for name, expr, scope, span, param in c.name_evidence:
        value = Value("param", param, span, "param") if param is not None else resolver.value(expr, scope, span)
        lowered = name.lower()
        bucket = seq if lowered in SEQ_NAMES else batch if lowered in BATCH_NAMES else accum
        bucket.append(Evidence(value, f"{name} =", span))
    return seq, batch, accum


def _pip_pins(text: str):
    for line in PIP_RE.findall(text):
        for name, spec in PIN_RE.findall(line):
            yield name, re.sub(r"\s+", "", spec)


def _function_lines(tree: ast.Module | None, names: list[str]) -> list[Span] | None:
    """Each function definition's lines, from `ast` (LibCST's positions for a whole `def` would generate its
    code again: most of a file's cost); None when ast does not read the file the same way. Functions are
    statements, so only statement bodies are searched; sorted by start, they are in the LibCST walk's pre-order."""
    if tree is None:
        return None
    found: list[tuple[int, int, str, Span]] = []
    todo: list[list[ast.stmt]] = [tree.body]
    while todo:
        for stmt in todo.pop():
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((stmt.lineno, stmt.col_offset, stmt.name,
                              Span(stmt.lineno, stmt.col_offset + 1, stmt.end_lineno or stmt.lineno,
                                   (stmt.end_col_offset or 0) + 1)))
            for field in ("body", "orelse", "finalbody"):
                block = getattr(stmt, field, None)
                if block and isinstance(block, list):
                    todo.append(block)
            for holder in (*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())):
                todo.append(holder.body)
    found.sort(key=lambda f: (f[0], f[1]))
    return [span for *_, span in found] if [f[2] for f in found] == names else None


def _functions(c: _Collector, resolver: _Resolver, tree: ast.Module | None, text: str):
    """Each function (and method) the file defines, with its parameters' defaults, for the calls that bind them."""
    lines = _function_lines(tree if tree is not None else parse_tree(text),
                            [node.name.value for _, node in c.function_nodes]) if c.function_nodes else []
    for i, (scope, node) in enumerate(c.function_nodes):
        outer = scope.rpartition(".")[0] if "." in scope else MODULE_SCOPE
        params = [*node.params.posonly_params, *node.params.params]
        is_method = scope.split(".")[-2:-1] and scope.split(".")[-2].startswith("class ")
        static = any(_dotted(d.decorator) == "staticmethod" for d in node.decorators)
        if is_method and not static and params:
            params = params[1:]  # self / cls
        out = []
        for param in (*params, *node.params.kwonly_params):
            default = UNSET if param.default is None else resolver.value(param.default, outer or MODULE_SCOPE)
            out.append((param.name.value, default))
        star = node.params.star_arg.name.value if isinstance(node.params.star_arg, cst.Param) else None
        kwstar = node.params.star_kwarg.name.value if isinstance(node.params.star_kwarg, cst.Param) else None
        yield FunctionDef(scope, tuple(out), len(params), star, kwstar, tuple(c.returns.get(scope, ())),
                          lines[i] if lines is not None else c._span(node))


def _hops(c: _Collector, resolver: _Resolver, calls: list[Call], defined: set[str]):
    """Calls that may reach the repository's own functions or classes: a function or class defined in this
    file, or a name imported from a module that is not a library's (followed later, if it is found)."""
    classes = {f"class {name}" for name in c.params.class_names()}
    for raw in (*c.raw_calls, *c.hop_calls):
        root = raw.qualname.split(".")[0]
        own = (raw.qualname in defined and raw.qualname != raw.scope) or f"class {raw.qualname}" in classes
        written = raw.node.func
        while isinstance(written, cst.Attribute):
            written = written.value
        # `utils.load`, `load` imported, or a name bound to an imported class (its qualname came through imports)
        imported = isinstance(written, cst.Name) and (written.value in c.imports or
                                                      (written is raw.node.func and "." in raw.qualname))
        if not own and not (imported and root not in NOT_REPOSITORY_MODULES and "(" not in raw.qualname):
            continue
        if raw.receiver is not None and raw.receiver not in c.imports:
            continue
        for call in calls:  # an interesting call that is also a local one (`train(...)`) is built already
            if call.span == raw.span and call.qualname == raw.qualname:
                yield call
                break
        else:
            yield _build_call(raw, resolver, c)


def _fire_hops(c: _Collector):
    """`fire.Fire(main)` (python-fire): a call of `main` (defined here or imported from the repository) whose
    parameters the command line sets by name (`--model_name x`, `--model-name=x`); facts/inline.py binds each to
    Param("argparse", name) and declares it with main's default. fire.Fire of a class or a dict is not read."""
    for name, span, scope in c.fire_entries:
        if name.split(".")[0] in NOT_REPOSITORY_MODULES:
            continue
        yield Call(qualname=name, short=name.split(".")[-1], receiver=None, target=None, args=(), arg_names=(),
                   kwargs=(), kw_spans=(), kw_names=(), opaque_kwargs=False, span=span,
                   index=len(c.raw_calls) + len(c.hop_calls), scope=scope, fire=True)

