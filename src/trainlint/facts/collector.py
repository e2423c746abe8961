"""The facts visitor: one LibCST walk (facts/walk.py) over a script that records its imports, bindings, scopes,
loops and the calls the rules care about, with their spans. extract.py turns what it records into ScriptFacts."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from trainlint.diagnostics import Span
from trainlint.facts import hydra as H
from trainlint.facts import params as P
from trainlint.facts.evaluate import MODULE_SCOPE, _dotted, _dotted_or_none, _enclosing_scopes
from trainlint.facts.loops import LoopWatcher
from trainlint.facts.model import Param
from trainlint.facts.names import (  # the tables live apart so lint.py can use them without LibCST
    ACCUM_NAMES,
    BATCH_NAMES,
    INTERESTING_KWARGS,
    INTERESTING_SHORTS,
    LIGER_APPLY_RE,
    MODEL_CLASS_RE,
    NOT_REPOSITORY_MODULES,
    SEQ_NAMES,
)
from trainlint.facts.trainers import FORWARD_LOSS, LOSS_CALLS
from trainlint.facts.walk import Positions

RETURNED = "<return>"  # the target of a call a function returns directly (its caller's variable, once inlined)

_BUILTINS = frozenset(dir(__import__("builtins")))


@dataclass
class _RawCall:
    node: cst.Call
    qualname: str
    short: str
    receiver: str | None
    target: str | None
    scope: str
    span: Span
    index: int
    guards: tuple[tuple[cst.BaseExpression, bool, str], ...] = ()
    qualified: str | None = None  # the callee through an absolute import (facts/model.py Call.qualified)
    local: bool = False  # the callee's name is bound in the file itself (a def, a class, an assignment, a parameter)


class _Collector(cst.CSTVisitor):
    def __init__(self, positions: Positions | None = None, parse_helpers: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self._positions = positions
        self.imports: dict[str, str] = {}
        self.star_imports: set[str] = set()
        self.bindings: dict[tuple[str, str], list[cst.BaseExpression | None]] = {}
        # `training_args.model_init_kwargs = dict(...)`: (scope, object name, attribute) -> the values assigned
        self.attr_bindings: dict[tuple[str, str, str], list[cst.BaseExpression]] = {}
        self.argparse_defaults: dict[str, list[cst.BaseExpression | None]] = {}
        self.dataclass_fields: dict[str, list[cst.BaseExpression | None]] = {}
        self.raw_calls: list[_RawCall] = []
        # name, expr, scope, span, and the declaration it is (a field or argparse dest a launch may set)
        self.name_evidence: list[tuple[str, cst.BaseExpression, str, Span, Param | None]] = []
        self.params = P.ParamCollector()
        for name in parse_helpers:  # `args = get_args()` where get_args returns parser.parse_args() elsewhere
            self.params.parse_functions[name] = (cst.Name("__module_parser__"), "parse_args", None)
        self._guards: list[tuple[cst.BaseExpression, bool, str]] = []
        self._branches: dict[int, tuple[cst.BaseExpression, bool, str]] = {}  # id(body or else) -> condition
        self.slice_evidence: list[tuple[cst.BaseExpression, str, Span]] = []
        self.logits_accessed = False
        self.image_slots: list[tuple[int, Span]] = []
        # `model(**batch).loss`, `out = model(**batch); out.loss` / `out["loss"]`: (callee, span of the forward call)
        self.forward_losses: list[tuple[str, Span]] = []
        self._class_names: set[str] = set()  # classes defined so far (an alias of one is followed)
        self.parsed_names: set[str] = set()
        self._scopes: list[str] = [MODULE_SCOPE]
        self._class_depth = 0
        self._targets: dict[int, str] = {}
        self._keyword_spans: dict[int, Span] = {}
        self.literal_spans: dict[int, Span] = {}  # where a bound literal is written (fixes edit it there)
        self.call_layout: dict[int, tuple[Span | None, bool, Span]] = {}  # last arg end, trailing comma, ")"
        # the repository's own code: function definitions, their parameters, and calls that may reach them
        self.function_nodes: list[tuple[str, cst.FunctionDef]] = []
        self.func_params: set[tuple[str, str]] = set()  # (function scope, parameter name)
        self.func_kwstar: dict[str, str] = {}  # function scope -> its **kwargs name
        self.returns: dict[str, list[str]] = {}  # function scope -> names it returns
        self.hop_calls: list[_RawCall] = []  # calls to plain or imported names that are not library calls
        self.fire_entries: list[tuple[str, Span, str]] = []  # `fire.Fire(fn)`: (fn through imports, span, scope)
        self.marks: dict[str, set[str]] = {}  # scope -> "logits" read / loss calls made there (facts/trainers.py)
        self.loops = LoopWatcher(self._span)  # loss accumulated in loops (facts/loops.py, TL203)
        # Hydra / OmegaConf configs (facts/hydra.py): the sources, and (scope, variable) -> the variable's source
        self.hydra_sources: list = []
        self.hydra_names: dict[tuple[str, str], str] = {}
        self._hydra_init: tuple[bool, str | None] | None = None  # the last `initialize(config_path=)` seen

    # -- helpers -------------------------------------------------------------------------------------
    def _span(self, node: cst.CSTNode) -> Span:
        # computed for this node alone (walk.py), the same numbers as LibCST's PositionProvider
        return self._positions.span(node)

    @property
    def scope(self) -> str:
        return self._scopes[-1]

    def _bound_once(self, name: str) -> cst.BaseExpression | None:
        """The value `name` is bound to in the current scope, when it is bound exactly once."""
        bound = self.bindings.get((self.scope, name))
        return bound[0] if bound is not None and len(bound) == 1 else None

    def _bind(self, name: str, value: cst.BaseExpression | None) -> None:
        self.bindings.setdefault((self.scope, name), []).append(value)
        self._note_literal(value)

    def _note_literal(self, value: cst.BaseExpression | None) -> None:
        if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString)) or (
                isinstance(value, cst.Name) and value.value in ("True", "False", "None")):
            self.literal_spans[id(value)] = self._span(value)

    def qualname(self, node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.Name):
            return self.imports.get(node.value, node.value)
        if isinstance(node, cst.Attribute):
            base = self.qualname(node.value)
            return None if base is None else f"{base}.{node.attr.value}"
        if isinstance(node, cst.Call):
            base = self.qualname(node.func)
            return None if base is None else f"{base}()"
        return None

    def qualified(self, func: cst.BaseExpression) -> tuple[str | None, bool]:
        """(dotted name through the file's imports, False) when the callee's first name is bound by an absolute
        import (`from torch.utils.data import DataLoader as DL`, `import trl` + `trl.SFTConfig`); (None, True) when
        the callee is a plain name the file binds itself (a def, class, assignment or parameter: in the call's function
        first, then over an import, at module level after it); (None, False) when its origin cannot be seen: no
        binding (a `from x import *`, a snippet), an import relative to the repository's own package, a method of
        a local object (`self.checkpoint(...)`, `model.generate(...)`), a call on a call."""
        root = func
        while isinstance(root, cst.Attribute):
            root = root.value
        if not isinstance(root, cst.Name):
            return None, False
        name, plain = root.value, root is func
        if self.scope != MODULE_SCOPE and (self.scope, name) in self.bindings:
            return None, plain  # a parameter or local of the enclosing function shadows any import
        imported = self.imports.get(name)
        if imported is not None:
            return (None, False) if imported.startswith(".") else (self.qualname(func), False)
        if (MODULE_SCOPE, name) in self.bindings or name in self._class_names:
            return None, plain  # `def get_peft_model(...)`; a method of a local object (`self.checkpoint`): unseen
        return None, False

    # -- imports -------------------------------------------------------------------------------------
    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = _dotted(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.imports[alias.asname.name.value] = full
            else:
                root = full.split(".")[0]
                self.imports[root] = root

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative:  # `from .actor import Actor`: ".actor.Actor", resolved against the file's package
            if isinstance(node.names, cst.ImportStar):
                return
            prefix = "." * len(node.relative) + (_dotted(node.module) if node.module is not None else "")
            for alias in node.names:
                name = _dotted(alias.name)
                local = alias.asname.name.value if alias.asname is not None and \
                    isinstance(alias.asname.name, cst.Name) else name
                self.imports[local] = f"{prefix}.{name}" if not prefix.endswith(".") else f"{prefix}{name}"
            return
        if node.module is None:
            return
        module = _dotted(node.module)
        if isinstance(node.names, cst.ImportStar):
            self.star_imports.add(module)
            return
        for alias in node.names:
            name = _dotted(alias.name)
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name
            self.imports[local] = f"{module}.{name}"

    # -- scopes and bindings -------------------------------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.loops.enter_function(node)
        self._bind(node.name.value, None)
        self._scopes.append(f"{self.scope}.{node.name.value}" if self.scope != MODULE_SCOPE else node.name.value)
        self.function_nodes.append((self.scope, node))
        if node.decorators and self._hydra_imported():
            source = H.main_source(node, self.qualname, self._span(node.name))
            if source is not None:
                self._hydra_found(source)
        for param in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params):
            self._bind(param.name.value, None)
            self.func_params.add((self.scope, param.name.value))
        for star in (node.params.star_arg, node.params.star_kwarg):
            if isinstance(star, cst.Param):
                self._bind(star.name.value, None)
        if isinstance(node.params.star_kwarg, cst.Param):
            self.func_kwstar[self.scope] = node.params.star_kwarg.name.value

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.loops.leave_function()
        self._scopes.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._bind(node.name.value, None)
        self._class_names.add(node.name.value)
        self.params.class_started(node.name.value, [self.qualname(b.value) or "" for b in node.bases
                                                    if b.keyword is None])
        self._scopes.append(f"class {node.name.value}")
        self._class_depth += 1

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._scopes.pop()
        self._class_depth -= 1

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._scopes.append(f"{self.scope}.<lambda>")

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self._scopes.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind_target(target.target, node.value if len(node.targets) == 1 else None, node)
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self._targets[id(node.value)] = node.targets[0].target.value
        # `model_args, training_args = parser.parse_args_into_dataclasses()`: these come from the command line
        parse = P.parse_call(node.value)
        if parse is not None and parse[1] == "parse" and not self.params.is_candidate(parse[0]):
            parse = None  # `.parse()` of something that is not a parser the repository may define
        if parse is None and isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Name):
            parse = self.params.parse_functions.get(node.value.func.value)  # `args = parse_args()` helper
        if parse is not None:
            for target in node.targets:
                for name in _target_names(target.target):
                    self.parsed_names.add(name)
            if len(node.targets) == 1:
                self.params.parse_assigned(node.targets[0].target, *parse, self._span(node.value), self.qualname)
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and self._hydra_imported():
            known_sources = {src.variable: src for src in self.hydra_sources if self._hydra_visible(src.variable)}
            source = H.assigned_source(node.targets[0].target.value, node.value, self.qualname,
                                       self._span(node.value), self._hydra_init, known_sources)
            if source is not None:
                self._hydra_found(source)
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            kind = P.parser_kind(node.value, self.qualname)
            if kind is not None:
                self.params.parser_created(node.targets[0].target.value, kind, node.value, self.qualname,
                                           self._bound_once)

    def visit_Return(self, node: cst.Return) -> None:
        # `def parse(): ...; return parser.parse_args()`: what the function returns is the parsed command line
        parse = P.parse_call(node.value) if node.value is not None else None
        if parse is not None and parse[1] == "parse" and not self.params.is_candidate(parse[0]):
            parse = None
        if parse is not None and self.scope != MODULE_SCOPE:
            self.params.parse_functions[self.scope.split(".")[-1]] = parse
        if self.scope != MODULE_SCOPE:
            if isinstance(node.value, cst.Name):
                self.returns.setdefault(self.scope, []).append(node.value.value)
            elif isinstance(node.value, cst.Tuple):
                self.returns.setdefault(self.scope, []).extend(
                    e.value.value for e in node.value.elements if isinstance(e.value, cst.Name))
            elif isinstance(node.value, cst.Call):
                self._targets.setdefault(id(node.value), RETURNED)  # `return X.from_pretrained(...)`

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self.scope.startswith("class "):
            if isinstance(node.target, cst.Name):
                default = node.value
                if isinstance(default, cst.Call) and _dotted_or_none(default.func) in {"field", "dataclasses.field"}:
                    default = next((a.value for a in default.args if a.keyword and a.keyword.value == "default"),
                                   None)
                self.dataclass_fields.setdefault(node.target.value, []).append(default)
                self._note_literal(default)
                self.params.field(self.scope[len("class "):], node.target.value, node.annotation.annotation,
                                  default, node.value is not None)
                if default is not None:
                    self._record_name_evidence(node.target.value, default, node,
                                               Param(f"class {self.scope[len('class '):]}", node.target.value,
                                                     self._span(node)))
            return
        self._bind_target(node.target, node.value, node)
        if node.value is not None and isinstance(node.target, cst.Name):
            self._targets[id(node.value)] = node.target.value

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind_target(node.target, None, node)

    def visit_For(self, node: cst.For) -> None:
        self._bind_target(node.target, None, node)
        self.loops.loop(node, self.scope)

    def visit_While(self, node: cst.While) -> None:
        self.loops.loop(node, self.scope)

    def visit_With(self, node: cst.With) -> None:
        self.loops.enter_with(node)

    def leave_With(self, original_node: cst.With) -> None:
        self.loops.leave_with()

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind_target(node.asname.name, None, node)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind_target(node.target, None, node)

    def _bind_target(self, target: cst.BaseExpression, value: cst.BaseExpression | None, stmt: cst.CSTNode) -> None:
        if isinstance(target, cst.Name):
            self._bind(target.value, value)
            if value is not None and not self.scope.startswith("class "):
                self._record_name_evidence(target.value, value, stmt)
        elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and value is not None:
            self.attr_bindings.setdefault((self.scope, target.value.value, target.attr.value), []).append(value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind_target(element.value, None, stmt)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value, None, stmt)

    def _record_name_evidence(self, name: str, value: cst.BaseExpression, stmt: cst.CSTNode,
                              param: Param | None = None) -> None:
        if name.lower() in SEQ_NAMES or name.lower() in BATCH_NAMES or name.lower() in ACCUM_NAMES:
            self.name_evidence.append((name, value, self.scope, self._span(stmt), param))

    # -- `if training_args.gradient_checkpointing:` -----------------------------------------------------
    # Plain visit_/leave_ methods only (no attribute callbacks), so the fast read-only walk can run this
    # visitor: an If registers its body and its else branch; entering one pushes the condition.
    def visit_If(self, node: cst.If) -> None:
        self._enter_branch(node)
        self._branches[id(node.body)] = (node.test, True, self.scope)
        if node.orelse is not None:
            self._branches[id(node.orelse)] = (node.test, False, self.scope)

    def leave_If(self, original_node: cst.If) -> None:
        self._leave_branch(original_node)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._enter_branch(node)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        self._leave_branch(original_node)

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._enter_branch(node)

    def leave_SimpleStatementSuite(self, original_node: cst.SimpleStatementSuite) -> None:
        self._leave_branch(original_node)

    def visit_Else(self, node: cst.Else) -> None:
        self._enter_branch(node)

    def leave_Else(self, original_node: cst.Else) -> None:
        self._leave_branch(original_node)

    def _enter_branch(self, node: cst.CSTNode) -> None:
        branch = self._branches.get(id(node))
        if branch is not None:
            self._guards.append(branch)

    def _leave_branch(self, node: cst.CSTNode) -> None:
        if id(node) in self._branches:
            self._guards.pop()

    # -- slicing token tensors to a constant: input_ids[:, :4096] ----------------------------------------
    def visit_Subscript(self, node: cst.Subscript) -> None:
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) and \
                isinstance(node.slice[0].slice.value, cst.SimpleString) and \
                node.slice[0].slice.value.evaluated_value == "loss":
            self._forward_loss(node.value)  # outputs["loss"]
        name = _dotted(node.value).lower()
        if not name or not any(key in name for key in ("input_ids", "tokens", "token_ids")):
            return
        last = node.slice[-1].slice
        if isinstance(last, cst.Slice) and last.upper is not None and last.lower is None:
            self.slice_evidence.append((last.upper, self.scope, self._span(node)))

    # -- attribute reads -----------------------------------------------------------------------------
    def _forward_loss(self, output: cst.BaseExpression) -> None:
        """A `.loss` / `["loss"]` read on what a call returned: the call is a forward that was given labels (a
        transformers model output has a loss only then); rules decide whether the callee is a model."""
        call = output
        if isinstance(output, cst.Name):
            bound = self.bindings.get((self.scope, output.value))
            call = bound[-1] if bound else None
        if isinstance(call, cst.Call):
            callee = _dotted_or_none(call.func)
            if callee:
                self.forward_losses.append((callee, self._span(call)))
                self.marks.setdefault(self.scope, set()).add(FORWARD_LOSS)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "loss":
            self._forward_loss(node.value)
        if node.attr.value == "logits":
            self.logits_accessed = True
            self.marks.setdefault(self.scope, set()).add("logits")

    def visit_List(self, node: cst.List) -> None:
        # a chat message's content as processors' chat templates read it: [{"type": "image"}, {"type": "text", ...}]
        images = sum(1 for el in node.elements if isinstance(el.value, cst.Dict) and _is_image_part(el.value))
        if images:
            self.image_slots.append((images, self._span(node)))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if node.value.strip("'\"") == "logits":  # outputs["logits"]
            self.logits_accessed = True
            self.marks.setdefault(self.scope, set()).add("logits")

    # -- calls ---------------------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Name):
            func = self._alias(func)  # `trainer_cls = MyTrainer; trainer_cls(...)`
            # `from transformers import TrainingArguments as TA`: match on the imported name
            short, receiver = self.imports.get(func.value, func.value).split(".")[-1], None
        elif isinstance(func, cst.Attribute):
            short = func.attr.value
            receiver = func.value.value if isinstance(func.value, cst.Name) else None
        else:
            return
        keywords = {a.keyword.value for a in node.args if a.keyword is not None}
        if short.startswith("initialize") and self._hydra_imported():
            init = H.initialize_path(node, self.qualname)
            if init is not None:
                self._hydra_init = init
        if short in LOSS_CALLS:
            self.marks.setdefault(self.scope, set()).add(short)
        if isinstance(func, cst.Attribute) and receiver == "self":
            self.marks.setdefault(self.scope, set()).add(f"self.{short}")  # a method calling another of its class
        if short == "add_argument":
            self._record_argparse(node)
        if short == "endswith" and P.is_argv_suffix_test(node):
            self.params.json_argv_branch = True
        if short == "Fire" and self.qualname(func) == "fire.Fire" and node.args and node.args[0].keyword is None \
                and isinstance(node.args[0].value, (cst.Name, cst.Attribute)):
            # `fire.Fire(main)`: main's parameters are the command line (`--model_name x`), its defaults the run's
            target = node.args[0].value
            name = self.qualname(self._alias(target) if isinstance(target, cst.Name) else target)
            if name:
                self.fire_entries.append((name, self._span(node), self.scope))
        if short in ("instantiate", "call") and self.qualname(func) in H.INSTANTIATE:
            self._keep_call(node, H.INSTANTIATE_NAME, short, None, self.raw_calls)  # read by facts/extract.py
            return
        interesting = (
            short in INTERESTING_SHORTS
            or MODEL_CLASS_RE.match(short) is not None
            or LIGER_APPLY_RE.match(short) is not None
            or short == "AutoLigerKernelForCausalLM"
            or bool(keywords & INTERESTING_KWARGS)
        )
        if not interesting:
            root = func.value if isinstance(func, cst.Name) else func.value.value \
                if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) else None
            if root is not None and root not in _BUILTINS and (isinstance(func, cst.Name) or root in self.imports) \
                    and self.imports.get(root, ".").split(".")[0] not in NOT_REPOSITORY_MODULES:
                # `get_model(model_args)`, `utils.load(...)`: followed when it is the repository's own code
                self._keep_call(node, self.qualname(func) or short, short, None, self.hop_calls)
            return
        qualname = self.qualname(func) or short
        if receiver is not None and receiver not in self.imports:
            qualname = f"{receiver}.{short}"
        self._keep_call(node, qualname, short, receiver if receiver not in self.imports else None, self.raw_calls)

    def _hydra_imported(self) -> bool:
        return any(q.split(".")[0] in ("hydra", "omegaconf") for q in self.imports.values())

    def _hydra_found(self, source) -> None:
        self.hydra_sources.append(source)
        self.hydra_names[(self.scope, source.variable)] = source.variable
        self.parsed_names.add(source.variable)

    def _hydra_visible(self, name: str, scope: str | None = None) -> bool:
        """`name` is bound to a Hydra / OmegaConf config in `scope` (default: the current one) or one enclosing it."""
        return any((s, name) in self.hydra_names for s in _enclosing_scopes(scope or self.scope))

    def _alias(self, name: cst.Name) -> cst.Name:
        """The class a plain name stands for when every binding of it so far (in this scope, else the module's) is
        that one imported or defined class: `trainer_cls = MyTrainer`. Anything else is left as written."""
        bound = self.bindings.get((self.scope, name.value)) or self.bindings.get((MODULE_SCOPE, name.value))
        if bound and all(isinstance(v, cst.Name) for v in bound) and len({v.value for v in bound}) == 1:
            target = bound[0].value
            if target != name.value and (target in self.imports or target in self._class_names):
                return bound[0]
        return name

    def _keep_call(self, node: cst.Call, qualname: str, short: str, receiver: str | None, into: list) -> None:
        func = self._alias(node.func) if isinstance(node.func, cst.Name) else node.func
        qualified, local = self.qualified(func)
        into.append(_RawCall(node, qualname, short, receiver, self._targets.get(id(node)), self.scope,
                             self._span(node), len(self.raw_calls) + len(self.hop_calls), tuple(self._guards),
                             qualified, local))
        for arg in node.args:
            if arg.keyword is not None:
                self._keyword_spans[id(arg)] = self._span(arg)
        call_span = self._span(node)
        last = node.args[-1] if node.args else None
        self.call_layout[id(node)] = (
            self._span(last) if last is not None else None,
            last is not None and isinstance(last.comma, cst.Comma),
            Span.point(call_span.end_line, call_span.end_col - 1),
        )

    def _record_argparse(self, node: cst.Call) -> None:
        dest = None
        flags = [a.value.evaluated_value for a in node.args
                 if a.keyword is None and isinstance(a.value, cst.SimpleString)]
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "dest" and isinstance(arg.value, cst.SimpleString):
                dest = arg.value.evaluated_value
        if dest is None:
            longs = [f for f in flags if isinstance(f, str) and f.startswith("--")]
            plain = [f for f in flags if isinstance(f, str) and not f.startswith("-")]
            chosen = longs[0][2:] if longs else (plain[0] if plain else None)
            dest = chosen.replace("-", "_") if chosen else None
        if not dest:
            return
        default: cst.BaseExpression | None = None
        for arg in node.args:
            if arg.keyword is None:
                continue
            key = arg.keyword.value
            if key == "default":
                default = arg.value
            elif key == "required" and isinstance(arg.value, cst.Name) and arg.value.value == "True":
                default = None
                break
            elif key == "action" and isinstance(arg.value, cst.SimpleString) and default is None:
                action = arg.value.evaluated_value
                if action == "store_true":
                    default = cst.Name("False")
                elif action == "store_false":
                    default = cst.Name("True")
        self.argparse_defaults.setdefault(dest, []).append(default)
        if default is not None and any(a.value is default for a in node.args):
            self._note_literal(default)  # (a store_true default is synthesised and has no position)
        self.params.argparse_argument(dest, flags, node, default)
        if default is not None:
            self._record_name_evidence(dest, default, node, Param("argparse", dest, self._span(node)))


def _target_names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _target_names(e.value)]
    return []


def _is_image_part(node: cst.Dict) -> bool:
    """`{"type": "image", ...}`: a literal "type" key whose literal value is "image"."""
    for el in node.elements:
        if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString) and \
                isinstance(el.value, cst.SimpleString) and el.key.evaluated_value == "type":
            return el.value.evaluated_value == "image"
    return False
