"""Following the repository's own code: a call to a function or class the file defines, or imports from a
module of the repository, brings that function's facts (model loads, training arguments, trainers, the calls
the rules read, sequence/batch evidence) to the call site, with the call's arguments bound to the function's
parameters (positional, keyword, defaults, `**kwargs` passed through). Hops are bounded; each module is read
once per run, never imported or executed; what cannot be found or read stays unknown.

    # train.py                                   # pkg/model_utils.py
    model = get_model(model_args)                def get_model(model_args):
                                                     return AutoModelForCausalLM.from_pretrained(
                                                         model_args.model_name_or_path,
                                                         attn_implementation="flash_attention_2"
                                                         if model_args.use_flash_attn else "eager")

The load is a fact of train.py whose attn_implementation is `Cond(<model_args.use_flash_attn>, ...)`: the launch
decides it, and a finding about it is reported at the expression in model_utils.py (its span names that file),
with the call in train.py as a related location (ScriptFacts.chains).
"""

from __future__ import annotations

from dataclasses import dataclass, field, is_dataclass, replace
from pathlib import Path
from typing import Callable

from trainlint.diagnostics import Span
from trainlint.facts.model import (SYMBOLIC, Arg, Call, Compare, Cond, Evidence, FunctionDef, ModelLoad, Param,
                                   ScriptFacts)
from trainlint.facts.trainers import subclass_trainer
from trainlint.facts.names import MODULE_SCOPE
from trainlint.facts.relocate import Relocator as _Relocator
from trainlint.facts.values import UNKNOWN, UNSET, Value, keep_guard_symbols, map_fields

MAX_HOPS = 3
MAX_MODULES = 64  # files read per linted file, so a large monorepo cannot explode


@dataclass
class _Site:
    facts: ScriptFacts
    file: Path
    display: str | None  # None: the linted file itself (its spans carry no file)


@dataclass
class Follower:
    root: Path
    display: Callable[[Path], str]
    hops: int = MAX_HOPS
    max_modules: int = MAX_MODULES
    modules: list[str] = field(default_factory=list)  # files followed, in order (as displayed)
    paths: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be followed (verbose)
    chains: dict[int, tuple[Span, ...]] = field(default_factory=dict)  # id(instantiated Call) -> call sites
    _keep: list = field(default_factory=list)  # keeps instantiated calls alive while their ids are keys
    _surface: list[_Site] = field(default_factory=list)  # modules whose command-line parsing was inlined
    _fire: list = field(default_factory=list)  # ArgparseParams of `fire.Fire(fn)` entries' parameters

    # -- the whole file -------------------------------------------------------------------------------
    def follow(self, facts: ScriptFacts, path: Path) -> ScriptFacts:
        site = _Site(facts, path, None)
        items = self._items(site, None, self.hops, ())
        calls, models, args, trainers, evidence = items
        from trainlint.facts.modules import module_facts

        # `.logits` read in a followed module (a repository's `concatenated_forward`) counts as the script's own
        accessed = facts.logits_accessed or any(getattr(module_facts(p), "logits_accessed", False) for p in self.paths)
        if self._fire:
            facts = replace(facts, argparse_params=facts.argparse_params + tuple(self._fire))
        out = replace(facts, calls=tuple(calls), models=tuple(models), args_objects=tuple(args), logits_accessed=accessed,
                      trainers=tuple(trainers), seq_evidence=evidence[0], batch_evidence=evidence[1],
                      accum_evidence=evidence[2], modules=tuple(self.modules),
                      chains=tuple((c.span, self.chains[id(c)]) for c in calls if id(c) in self.chains))
        return self._adopt_surface(out)

    # -- the items of one scope, with the calls inside it followed --------------------------------------
    def _items(self, site: _Site, scope: str | None, depth: int, stack: tuple):
        f = site.facts
        targets = [(hop, self._target(hop, site)) for hop in f.hops if _under(hop.scope, scope)]
        targets = [(hop, t) for hop, t in targets if t is not None]
        # a function of this file that is called with arguments is replaced by its instantiations
        replaced = {fn.scope for hop, (callee, fn) in targets if callee.file == site.file and _reads_args(fn)}

        def keep(call: Call) -> bool:
            return _under(call.scope, scope) and not any(_under(call.scope, r) for r in replaced)

        calls = [c for c in f.calls if keep(c)]
        kept = {id(c) for c in calls}
        models = [m for m in f.models if id(m.call) in kept]
        args = [a for a in f.args_objects if id(a.call) in kept]
        trainers = [t for t in f.trainers if id(t.call) in kept]
        spans = _scope_spans(f, scope, replaced)
        evidence = tuple(tuple(e for e in bucket if spans(e.span)) for bucket in
                         (f.seq_evidence, f.batch_evidence, f.accum_evidence))
        for hop, (callee, fn) in targets:
            if depth <= 0 or (str(callee.file), fn.scope) in stack or len(self.modules) > self.max_modules:
                continue
            if any(_under(hop.scope, r) for r in replaced):
                continue  # a call inside a function replaced by its instantiations is followed from there, once
            if callee.file == site.file and fn.scope not in replaced:
                continue  # a same-file function without arguments is already in the facts as it is
            # a class of another module brings all its methods (an override may enable input grads)
            inner = fn.scope.rpartition(".")[0] if callee.file != site.file and fn.scope.startswith("class ") \
                else fn.scope
            sub = self._items(callee, inner, depth - 1, stack + ((str(callee.file), fn.scope),))
            if callee.file != site.file and fn.scope.startswith("class "):
                trainer = subclass_trainer(callee.facts, hop, fn.scope[len("class "):].rpartition(".")[0],
                                           callee.display)
                if trainer is not None:  # the repository's own Trainer subclass, called from here
                    calls.append(hop)
                    trainers.append(trainer)
            if hop.fire and depth == self.hops:
                self._fire.extend(_fire_params(fn, callee))
            bound = _Binder(hop, fn, site, callee, self).bind(sub)
            calls += bound[0]
            models += bound[1]
            args += bound[2]
            trainers += bound[3]
            evidence = tuple(a + b for a, b in zip(evidence, bound[4]))
            if callee.file != site.file and _declares(callee.facts, fn):
                self._surface.append(callee)
        calls.sort(key=lambda c: c.index)
        return calls, models, args, trainers, evidence

    # -- what a call reaches ------------------------------------------------------------------------------
    def _target(self, hop: Call, site: _Site) -> tuple[_Site, FunctionDef] | None:
        fn = _defined(site.facts, hop.qualname)
        if fn is not None:
            return site, fn
        if "." not in hop.qualname:
            return None
        from trainlint.facts.modules import resolve

        found = resolve(hop.qualname, site.file, self.root, lambda facts, name: _defined(facts, name) is not None,
                        self._module)
        if len(found) == 3:
            facts, path, short = found
            return _Site(facts, path, self.display(path)), _defined(facts, short)
        why, what = found
        if why == "missing":
            self.notes.append(f"not followed: {hop.qualname} (no module {what} in the repository)")
        elif why == "unreadable":
            self.notes.append(f"not followed: {hop.qualname} ({self.display(Path(what))} could not be read)")
        return None

    def _module(self, path: Path) -> ScriptFacts | None:
        from trainlint.facts.modules import module_facts

        facts = module_facts(path)
        shown = self.display(path)
        if shown not in self.modules:
            self.modules.append(shown)
            self.paths.append(path)
        return facts

    # -- a thin entry point adopts the command line of the module it runs ----------------------------------
    def _adopt_surface(self, facts: ScriptFacts) -> ScriptFacts:
        if facts.declares_parameters or not self._surface:
            return facts
        callee = self._surface[0]
        shown = callee.display
        relocate = _Relocator(shown)
        classes = tuple(replace(k, fields=tuple(replace(fd, default=relocate.walk(fd.default)) for fd in k.fields))
                        for k in callee.facts.classes)
        def declared(e: Evidence) -> bool:  # a field or argparse default: what the launch now binds
            v = e.value.value
            return e.value.state == "param" and isinstance(v, Param) and (v.obj == "argparse" or
                                                                          v.obj.startswith("class "))

        seq, batch, accum = (tuple(relocate.walk(e) for e in bucket if declared(e)) for bucket in
                             (callee.facts.seq_evidence, callee.facts.batch_evidence, callee.facts.accum_evidence))
        facts = replace(facts, seq_evidence=facts.seq_evidence + seq, batch_evidence=facts.batch_evidence + batch,
                        accum_evidence=facts.accum_evidence + accum)
        return replace(facts, parsed=tuple(replace(p, span=p.span.in_file(shown) if not p.span.file else p.span)
                                           for p in callee.facts.parsed),
                       classes=facts.classes + classes, argparse_params=relocate.walk(callee.facts.argparse_params),
                       json_argv_branch=callee.facts.json_argv_branch,
                       parsed_args_objects=tuple(sorted(set(facts.parsed_args_objects) |
                                                        set(callee.facts.parsed_args_objects))),
                       imports=tuple(sorted((dict(callee.facts.imports) | dict(facts.imports)).items())))


class _Binder:
    """One call site: the callee's items with its parameters replaced by what the call passes."""

    def __init__(self, hop: Call, fn: FunctionDef, caller: _Site, callee: _Site, follower: Follower) -> None:
        self.hop, self.fn, self.caller, self.callee, self.follower = hop, fn, caller, callee, follower
        self.relocate = _Relocator(callee.display if callee.file != caller.file else None)
        self._memo: dict[int, object] = {}
        self.extra = self._extra_keywords()

    def bind(self, items):
        calls, models, args, trainers, evidence = items
        n = len(calls) + 1
        order = {id(c): k for k, c in enumerate(calls)}
        out_calls = []
        for c in calls:
            new = self.walk(c)  # ordered after the call site, before the caller's next call
            # the callee's calls run only when its call site does: they carry the site's `if` conditions too
            new = replace(new, index=self.hop.index + (order[id(c)] + 1) / (n + 1), scope=self.hop.scope,
                          guards=self.hop.guards + new.guards)
            self._memo[id(c)] = new
            site = self.hop.span.in_file(self.caller.display) if self.caller.display and not self.hop.span.file \
                else self.hop.span
            self.follower.chains[id(new)] = (site,) + self.follower.chains.get(id(c), ())
            self.follower._keep.append(new)
            out_calls.append(new)
        models = [self._model(self.walk(m), len(models)) for m in models]
        return (out_calls, models, [self.walk(a) for a in args], [self.walk(t) for t in trainers],
                tuple(tuple(self.walk(e) for e in bucket) for bucket in evidence))

    def _model(self, model: ModelLoad, count: int) -> ModelLoad:
        call = model.call
        variable = model.variable
        if self.hop.target and (variable in self.fn.returns or variable == "<return>" or count == 1):
            variable = self.hop.target
        if call.kw_splat is not None:  # `from_pretrained(name, **kwargs)`: the caller's keywords count
            model = replace(model, attn_implementation=_kw(call, "attn_implementation", model.attn_implementation),
                            output_attentions=_kw(call, "output_attentions", model.output_attentions),
                            use_flash_attention_2=_kw(call, "use_flash_attention_2", model.use_flash_attention_2),
                            dtype=_kw(call, "dtype", _kw(call, "torch_dtype", model.dtype)),
                            anchor=call.kw_span("attn_implementation") or model.anchor)
        return replace(model, variable=variable)

    # -- the walk ---------------------------------------------------------------------------------------
    def walk(self, obj):
        if isinstance(obj, Value):
            return self.value(self.relocate.walk(obj))
        if isinstance(obj, Span):
            return self.relocate.span(obj)
        if isinstance(obj, tuple):
            return tuple(self.walk(x) for x in obj)
        if is_dataclass(obj) and not isinstance(obj, type):
            key = id(obj)
            if key not in self._memo:
                new = map_fields(obj, self.walk)
                if isinstance(new, Call) and new.kw_splat is not None and new.kw_splat == self.fn.kwstar:
                    new = self._splat(new)
                if isinstance(new, Call) and new.guards:
                    new = keep_guard_symbols(obj, new)
                if isinstance(new, Call) and new.target is not None and \
                        (new.target in self.fn.returns or new.target == "<return>") and self.hop.target:
                    new = replace(new, target=self.hop.target)
                self._memo[key] = new
            return self._memo[key]
        return obj

    def value(self, v: Value) -> Value:
        if v.state != "param":
            if v.known and isinstance(v.value, (dict, list)):
                return Value(v.state, _inner(v.value, self), v.origin, v.via)
            return v
        inner = v.value
        if isinstance(inner, Arg) and inner.scope == self.fn.scope:
            return self.argument(inner)
        if isinstance(inner, Cond):
            test = self.value(inner.test)
            then, orelse = self.value(inner.then), self.value(inner.orelse)
            if test.known:
                return then if bool(test.value) != inner.negate else orelse
            if test.state == "param":
                return Value("param", Cond(test, then, orelse, inner.negate), v.origin, v.via)
            if then.known and orelse.known and then.value == orelse.value:
                return then
            return UNKNOWN
        if isinstance(inner, Compare):
            return inner.resolve(self.value)
        return v

    def argument(self, arg: Arg) -> Value:
        """What the call passes for parameter `arg.name` (or the parameter's default)."""
        hop, fn = self.hop, self.fn
        names = [name for name, _ in fn.params]
        if hop.fire:  # `fire.Fire(fn)`: the command line sets each parameter by name (Follower._fire declares it)
            return Value("param", Param("argparse", arg.name), None, "param") \
                if arg.name in names and arg.attr is None else UNKNOWN
        if arg.name == fn.kwstar:
            return UNKNOWN if arg.attr is not None else Value("known", {k: v.value if v.known else UNKNOWN
                                                                        for k, v in self.extra}, hop.span)
        if arg.name not in names:
            return UNKNOWN
        position = names.index(arg.name)
        passed, plain = UNSET, None
        if hop.has_kw(arg.name):
            passed, plain = hop.kw(arg.name), hop.kw_name(arg.name)
        elif position < fn.positional and position < len(hop.args):
            passed, plain = hop.args[position], hop.arg_names[position] if position < len(hop.arg_names) else None
        elif hop.opaque_kwargs:
            return UNKNOWN
        else:
            default = dict(fn.params)[arg.name]
            passed = UNKNOWN if default.unset else self.relocate.walk(default)
            if arg.attr is None:
                return passed
            return UNKNOWN
        if arg.attr is None:
            return passed
        # `model_args.model_name_or_path` where the caller passed `model_args`
        if plain is not None:
            caller = self.caller.facts
            if plain in caller.parsed_args_objects:
                return Value("param", Param(plain, arg.attr), None, "param")
            owner = _parameter_of(caller, hop.scope, plain)
            if owner is not None:
                return Value("param", Arg(owner, plain, arg.attr), None, "param")
        if passed.state == "param" and isinstance(passed.value, Param):
            parsed = self.caller.facts.parsed_object(passed.value.obj)
            if parsed is not None and parsed.parser == "hydra":  # `build_model(cfg.model)`: a node of the config
                return Value("param", Param(passed.value.obj, f"{passed.value.attr}.{arg.attr}"), None, "param")
        if passed.state == "param" and isinstance(passed.value, Arg) and passed.value.attr is None:
            return Value("param", replace(passed.value, attr=arg.attr), None, "param")
        if passed.known and isinstance(passed.value, dict) and arg.attr in passed.value:
            item = passed.value[arg.attr]
            return UNKNOWN if isinstance(item, Value) else Value("known", item, passed.origin, passed.via)
        return UNKNOWN

    def _extra_keywords(self) -> tuple[tuple[str, Value], ...]:
        names = {name for name, _ in self.fn.params}
        return tuple((k, v) for k, v in self.hop.kwargs if k not in names)

    def _splat(self, call: Call) -> Call:
        have = {k for k, _ in call.kwargs}
        extra = tuple((k, v) for k, v in self.extra if k not in have)
        spans = tuple((k, s) for k, s in self.hop.kw_spans if k in dict(extra))
        if self.caller.display and self.caller.file != self.callee.file:
            spans = tuple((k, s.in_file(self.caller.display) if not s.file else s) for k, s in spans)
        # the splat was the function's own **kwargs, now what the caller passed (opaque if the caller's is)
        return replace(call, kwargs=call.kwargs + extra, kw_spans=call.kw_spans + spans, kw_splat=None,
                       opaque_kwargs=self.hop.opaque_kwargs)


def _fire_params(fn: FunctionDef, callee: _Site):
    """The command line python-fire builds from fn's signature (fire/core.py: `--name value`, `--name=value`,
    hyphens read as underscores), each with fn's default (UNSET for a parameter without one: fire requires it)."""
    from trainlint.facts.model import ArgparseParam

    relocate = _Relocator(callee.display) if callee.display else None
    for name, default in fn.params:
        flags = (f"--{name}",) + ((f"--{name.replace('_', '-')}",) if "_" in name else ())
        value = default.value if default.known else None
        kind = {bool: "bool", int: "int", float: "float", str: "str"}.get(type(value), "other")
        yield ArgparseParam(name, flags, None, kind, None, relocate.walk(default) if relocate else default)


def _inner(item, binder: _Binder):
    if isinstance(item, SYMBOLIC) and not isinstance(item, Param):
        value = binder.value(Value("param", item))
        return value.value if value.known else value.value if value.state == "param" else UNKNOWN
    if isinstance(item, dict):
        return {k: _inner(x, binder) for k, x in item.items()}
    if isinstance(item, list):
        return [_inner(x, binder) for x in item]
    return item


def _kw(call: Call, name: str, fallback: Value) -> Value:
    return call.kw(name) if call.has_kw(name) else fallback


def _under(scope: str, parent: str | None) -> bool:
    return parent is None or scope == parent or scope.startswith(parent + ".")


def _defined(facts: ScriptFacts, name: str) -> FunctionDef | None:
    """The module-level function or class (its __init__, or none) called `name` in these facts."""
    if "." in name:
        return None
    found = facts.function(name) or facts.function(f"class {name}.__init__")
    if found is None and facts.class_def(name) is not None:
        return FunctionDef(f"class {name}.__init__", (), 0)  # a class without its own __init__
    return found


def _reads_args(fn: FunctionDef) -> bool:
    return bool(fn.params) or fn.kwstar is not None


def _declares(facts: ScriptFacts, fn: FunctionDef) -> bool:
    """The callee parses the command line inside the function the call reaches (`def train(): parser...`)."""
    if fn.span is None:
        return False
    return any(fn.span.line <= p.span.line <= fn.span.end_line for p in facts.parsed)


def _scope_spans(facts: ScriptFacts, scope: str | None, replaced: set[str]):
    """A test for evidence spans: inside `scope`'s definition and outside the replaced functions'."""
    def within(fn_scope: str, span: Span) -> bool:
        fn = facts.function(fn_scope)
        return fn is not None and fn.span is not None and fn.span.line <= span.line <= fn.span.end_line

    def test(span: Span) -> bool:
        if span.file:
            return scope is None
        if scope is not None and not within(scope, span):
            return False
        return not any(within(r, span) for r in replaced)

    return test


def _parameter_of(facts: ScriptFacts, scope: str, name: str) -> str | None:
    parts = scope.split(".")
    for i in range(len(parts), 0, -1):
        fn = facts.function(".".join(parts[:i]))
        if fn is not None:
            return fn.scope if any(n == name for n, _ in fn.params) else None
    return None


def run_scopes(tree) -> frozenset[str] | None:
    """The scopes of a file that run when it runs: its module level, and, transitively, the functions and classes
    it defines that code which runs names (calls them, passes them: `fire.Fire(main)`, `dataset.map(tokenize)`,
    `spawn(worker)`), as their top-level scope keys (`main`, `class Trainer`). A library module whose module
    level names none of its functions runs none of them: following their calls could not show a run, and is
    most of what following costs on a library's own files. None: no ast (everything is followed)."""
    import ast

    if tree is None:
        return None
    defs: dict[str, list[ast.AST]] = {}
    top: list[ast.stmt] = []
    todo: list[tuple[list[ast.stmt], bool]] = [(tree.body, True)]
    while todo:
        body, module_level = todo.pop()
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defs.setdefault(stmt.name, []).append(stmt)
                todo.append((stmt.body, False))
            elif module_level:
                top.append(stmt)
    reached: set[str] = set()
    names = {n.id for stmt in top for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    # a decorated module-level function may be registered to run (`@app.command()` ... `app()`)
    names.update(s.name for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and
                 s.decorator_list)
    while names:
        name = names.pop()
        if name in reached or name not in defs:
            continue
        reached.add(name)
        for node in defs[name]:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id not in reached)
    return frozenset(f"class {name}" if isinstance(node, ast.ClassDef) else name
                     for name in reached for node in defs[name])


def follow_calls(facts: ScriptFacts, path: Path, root: Path, display: Callable[[Path], str],
                 hops: int = MAX_HOPS, runs: frozenset[str] | None = None) -> tuple[ScriptFacts, list[str], list[Path]]:
    """`facts` with the repository's own functions followed from their call sites; the verbose notes; the
    module files read. `runs` (run_scopes): only calls made where the file runs are followed."""
    if runs is not None:
        facts = replace(facts, hops=tuple(h for h in facts.hops if h.scope.split(".")[0] in runs or
                                          h.scope.split(".")[0] == MODULE_SCOPE))
    if not facts.hops:
        return facts, [], []
    follower = Follower(root, display, hops)
    out = follower.follow(facts, path)
    return out, follower.notes, follower.paths


__all__ = ["follow_calls", "run_scopes", "Follower", "MAX_HOPS"]
