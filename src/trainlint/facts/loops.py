"""Loss tensors accumulated in loops (TL203): `total += loss`, `losses.append(outputs.loss)`, `t = t + loss`.

Why this needs its own facts: whether the accumulation keeps memory alive depends on the loop around it.
After `loss.backward()` (retain_graph=False) autograd frees the saved tensors of the graph, so accumulating
the loss afterwards keeps a scalar and a few graph nodes per step: measured with verify's live-bytes
tracker on a tiny Llama, +4 bytes per step (tests/test_tl203_loss_kept_with_graph.py). The graph, with
every activation it saved, stays alive only when nothing frees it:
- "no_backward": the loop never calls backward and is not under torch.no_grad()/inference_mode() (an eval
  loop that forgot no_grad): each iteration's whole graph stays referenced by the accumulator;
- "retained": `loss.backward(retain_graph=True)` keeps the saved tensors, and the accumulator keeps them alive;
- "deferred": the accumulator itself is backpropagated later (`total = total + loss` ... `total.backward()`),
  so every micro-batch's graph stays alive until then.
A loss built from parts in one iteration (`loss = mse(a)`, then `loss = loss + w * mse(b)`, then backward) is not
an accumulation: the target was bound unconditionally earlier in the same iteration, so nothing carries over.
A loop with a backward on something else is left alone (the accumulated value may be part of that graph), and so
is a list whose losses are taken out one by one later in a file that backpropagates (`losses[i]`, `for loss in
losses`: several forwards, then their backwards, as accelerate's no_sync test does): the graphs are kept to be used.

The collector calls `LoopWatcher` from its own visit methods during the facts walk, so spans come from the
same Positions and no second traversal is made.
"""

from __future__ import annotations

import re
import libcst as cst

from trainlint.facts.model import LossAccumulation

_LOSS_CALL = re.compile(r"loss|criterion|cross_entropy|nll", re.I)
# a loop over steps: it iterates batches (`for batch in loader`, `enumerate(tqdm(eval_dataloader))`), or it runs a
# model in its body (`model(**batch)`, `self.ref_model(x)`, `net.forward(x)`, `batch = next(it)`). A loop over the
# samples or chunks of one batch inside a loss function (trl's GOLD trainer: per-sample losses appended, then
# stacked into the one loss the step backpropagates) keeps that graph on purpose, and is not an accumulation
# across steps.
_BATCHES = re.compile(r"loader|batch|dataset|epoch_iterator|\bdata\b", re.I)
_FORWARD_CALL = re.compile(r"(?:\b|_)(?:model|net|network|forward|policy|actor|critic)\s*\(|\bnext\s*\(", re.I)
_NO_GRAD = ("no_grad", "inference_mode")
_CODE = cst.Module(body=[])


def _code(node: cst.CSTNode) -> str:
    return _CODE.code_for_node(node)


def _callee(node: cst.Call) -> str | None:
    if isinstance(node.func, cst.Name):
        return node.func.value
    if isinstance(node.func, cst.Attribute):
        return node.func.attr.value
    return None


def _is_no_grad_call(node: cst.BaseExpression) -> bool:
    """`torch.no_grad()`, `torch.inference_mode()`, `torch.set_grad_enabled(False)` (decorators too)."""
    if not isinstance(node, cst.Call):
        return isinstance(node, (cst.Name, cst.Attribute)) and _code(node).split(".")[-1] in _NO_GRAD
    name = _callee(node)
    if name in _NO_GRAD:
        return True
    return name == "set_grad_enabled" and bool(node.args) and _code(node.args[0].value) == "False"


class LoopWatcher:
    """Fed by the facts collector: function and `with` context, and each loop as the walk reaches it."""

    def __init__(self, span) -> None:
        self._span = span  # the collector's span function
        self._no_grad: list[bool] = [False]
        self._functions: list[str] = []
        self._seen: set[int] = set()
        self.found: list[LossAccumulation] = []
        self.no_grad_bodies: list[str] = []  # code run under no_grad: a function called there runs without grad
        self._pending: list[tuple[int, str]] = []  # (finding, its function) for eval loops inside a function

    # -- context -----------------------------------------------------------------------------------
    def enter_function(self, node: cst.FunctionDef) -> None:
        self._functions.append(node.name.value)
        self._no_grad.append(self._no_grad[-1] or any(_is_no_grad_call(d.decorator) for d in node.decorators))

    def leave_function(self) -> None:
        self._functions.pop()
        self._no_grad.pop()

    def enter_with(self, node: cst.With) -> None:
        no_grad = any(_is_no_grad_call(item.item) for item in node.items)
        if no_grad and not self._no_grad[-1]:
            self.no_grad_bodies.append(_code(node.body))
        self._no_grad.append(self._no_grad[-1] or no_grad)

    def leave_with(self) -> None:
        self._no_grad.pop()

    # -- loops -------------------------------------------------------------------------------------
    def loop(self, node: cst.For | cst.While, scope: str) -> None:
        if id(node) in self._seen:
            return  # a loop nested in one already read
        body = _Body(self._span)
        body.read(node.body, self._no_grad[-1])
        self._seen.update(body.loops)
        function = self._functions[-1] if self._functions else None
        for acc in body.accumulations(self._no_grad[-1], lambda: _over_steps(node)):
            self.found.append(LossAccumulation(scope=scope, **acc))
            if function is not None and acc["shape"] == "no_backward":
                self._pending.append((len(self.found) - 1, function))

    def build(self, text: str) -> tuple[LossAccumulation, ...]:
        """The findings, minus eval loops in a function that is called under no_grad somewhere."""
        drop = {i for i, function in self._pending if any(
            re.search(rf"\b{re.escape(function)}\s*\(", body) for body in self.no_grad_bodies)}
        deferred = []
        for i, acc in enumerate(self.found):
            if i in drop:
                continue
            target = re.escape(acc.target)
            if acc.shape == "no_backward" and re.search(rf"\b{target}\s*\[|\bin\s+{target}\b", text) and \
                    re.search(r"\bbackward\s*\(", text):
                continue  # its losses are taken out one by one, and the file backpropagates: kept to be used
            if acc.shape == "no_backward" and re.search(
                    rf"\b{target}\s*\.\s*backward\s*\(|backward\(\s*{target}\b", text):
                acc = LossAccumulation("deferred", acc.target, acc.value, acc.span, acc.scope)
            deferred.append(acc)
        return tuple(deferred)


def _over_steps(node: cst.For | cst.While) -> bool:
    if isinstance(node, cst.For):
        source = _code(node.iter)
        if _BATCHES.search(source) and not source.lstrip().startswith("range("):
            return True
    return bool(_FORWARD_CALL.search(_code(node.body)))


class _Body:
    """What one loop's statements say: loss bindings, forward calls, backward calls, accumulations."""

    def __init__(self, span) -> None:
        self._span = span
        self.bound: dict[str, tuple[cst.BaseExpression, bool]] = {}  # name -> (value, bound under no_grad)
        self.backwards: list[tuple[str, bool]] = []  # (core code of what is backpropagated, retain_graph)
        self.candidates: list[tuple[str, cst.CSTNode, cst.BaseExpression, bool]] = []  # target, stmt, value, no_grad
        self.loops: set[int] = set()
        # names bound earlier in the same iteration of the innermost loop, on every path to the statement being
        # read (before it in its block, or in a block around it): `loss = mse(...)` then `loss = loss + w * prior`
        # adds two parts of one step's loss and carries nothing to the next iteration. A binding inside an `if`
        # branch counts only within that branch; one in an outer loop does not reset the inner loop's iterations.
        self._fresh: list[set[str]] = [set()]
        self.fresh: set[int] = set()  # id() of candidate statements whose target was fresh

    def _candidate(self, target: str, stmt: cst.CSTNode, value: cst.BaseExpression, no_grad: bool) -> None:
        if target in self._fresh[-1]:
            self.fresh.add(id(stmt))
        self.candidates.append((target, stmt, value, no_grad))

    def read(self, block: cst.BaseSuite, no_grad: bool) -> None:
        for stmt in getattr(block, "body", ()):
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    self._small(small, no_grad)
            elif isinstance(stmt, cst.With):
                self.read(stmt.body, no_grad or any(_is_no_grad_call(i.item) for i in stmt.items))
            elif isinstance(stmt, (cst.For, cst.While)):
                self.loops.add(id(stmt))
                self._fresh.append(set())
                self.read(stmt.body, no_grad)
                self._fresh.pop()
                if stmt.orelse is not None:
                    self._branch(stmt.orelse.body, no_grad)
            elif isinstance(stmt, cst.If):
                self._if(stmt, no_grad)
            elif isinstance(stmt, cst.Try):
                self._branch(stmt.body, no_grad)  # an exception may skip any of its bindings
                for handler in stmt.handlers:
                    self._branch(handler.body, no_grad)
                for extra in (stmt.orelse, stmt.finalbody):
                    if extra is not None:
                        self._branch(extra.body, no_grad)

    def _if(self, stmt: cst.If, no_grad: bool) -> None:
        self._branch(stmt.body, no_grad)
        other = stmt.orelse
        if isinstance(other, cst.If):
            self._if(other, no_grad)
        elif other is not None:
            self._branch(other.body, no_grad)

    def _branch(self, block: cst.BaseSuite, no_grad: bool) -> None:
        self._fresh.append(set(self._fresh[-1]))
        self.read(block, no_grad)
        self._fresh.pop()

    def _small(self, small: cst.BaseSmallStatement, no_grad: bool) -> None:
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target = small.targets[0].target
            if isinstance(target, cst.Name):
                value = small.value
                if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
                    for mine, other in ((value.left, value.right), (value.right, value.left)):
                        if isinstance(mine, cst.Name) and mine.value == target.value:
                            self._candidate(target.value, small, other, no_grad)
                self.bound[target.value] = (value, no_grad)
                self._fresh[-1].add(target.value)
        elif isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign):
            self._candidate(_code(small.target), small, small.value, no_grad)
        elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            call = small.value
            name = _callee(call)
            if name == "append" and isinstance(call.func, cst.Attribute) and len(call.args) == 1:
                self._candidate(_code(call.func.value), small, call.args[0].value, no_grad)
            elif name == "backward" and isinstance(call.func, cst.Attribute):
                retain = any(a.keyword is not None and a.keyword.value == "retain_graph" and
                             _code(a.value) != "False" for a in call.args)
                positional = [a for a in call.args if a.keyword is None]
                receiver = call.func.value
                # `loss.backward()`, `scaler.scale(loss).backward()`, `(loss / n).backward()`; and
                # `accelerator.backward(loss)`, `fabric.backward(loss)` (the tensor is the argument)
                tensor = positional[0].value if positional and isinstance(receiver, cst.Name) and \
                    self._core(receiver) is None else receiver
                self.backwards.append((self._core_code(tensor), retain))

    # -- what is a loss ----------------------------------------------------------------------------
    def _core(self, node: cst.BaseExpression, depth: int = 0) -> cst.BaseExpression | None:
        """The part of `node` that is a grad-tracking loss computed in this loop, or None."""
        if depth > 6:
            return None
        if isinstance(node, cst.BinaryOperation):
            return self._core(node.left, depth + 1) or self._core(node.right, depth + 1)
        if isinstance(node, (cst.Attribute, cst.Subscript)):
            key = node.attr.value if isinstance(node, cst.Attribute) else _subscript_key(node)
            owner = node.value
            if key != "loss":
                return None
            if isinstance(owner, cst.Call):  # `model(**batch).loss`
                return node
            if isinstance(owner, cst.Name) and owner.value in self.bound:
                value, no_grad = self.bound[owner.value]
                return node if isinstance(value, cst.Call) and not no_grad else None
            return None
        if isinstance(node, cst.Name) and node.value in self.bound:
            value, no_grad = self.bound[node.value]
            return node if not no_grad and self._core(value, depth + 1) is not None else None
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "scale" and node.args:
                return self._core(node.args[0].value, depth + 1)  # GradScaler.scale(loss)
            name = _callee(node)
            return node if name and _LOSS_CALL.search(name) and name not in ("item",) else None
        return None

    def _model_output(self, core: cst.BaseExpression) -> bool:
        """`model(**batch).loss`, `outputs.loss` with outputs bound to a call in this loop: a forward's loss."""
        if isinstance(core, cst.Name) and core.value in self.bound:
            core = self.bound[core.value][0]
        # (_core keeps a `.loss` only on a call, or on a name bound to one in this loop)
        return isinstance(core, (cst.Attribute, cst.Subscript)) and self._core(core) is not None

    def _core_code(self, node: cst.BaseExpression) -> str:
        core = self._core(node)
        return _code(core if core is not None else node)

    def _aliases(self, code: str) -> set[str]:
        """A name and the expression it is bound to are the same tensor: `loss = outputs.loss`."""
        out = {code}
        if code in self.bound:
            out.add(self._core_code(self.bound[code][0]))
        out.update(name for name, (value, _) in self.bound.items() if self._core_code(value) == code)
        return out

    def accumulations(self, loop_no_grad: bool, over_steps=lambda: True):
        backed = {}
        for code, retain in self.backwards:
            for alias in self._aliases(code):
                backed[alias] = backed.get(alias, False) or retain
        for target, stmt, value, no_grad in self.candidates:
            if id(stmt) in self.fresh:
                continue  # the target was bound earlier in this iteration: parts of one step's value, not a carry
            core = self._core(value)
            # under no_grad an addition records no graph; an appended tensor computed before keeps its own
            if core is None or (no_grad and not (isinstance(stmt, cst.Expr) and isinstance(core, cst.Name))):
                continue
            codes = self._aliases(_code(core))
            if target in backed:
                shape = "deferred"
            elif codes & backed.keys():
                if not any(backed[c] for c in codes & backed.keys()):
                    continue  # backward freed the graph: a scalar per step (see the module docstring)
                shape = "retained"
            elif self.backwards or loop_no_grad:
                continue  # a backward on something else may free this graph too; or no graph is recorded
            elif not self._model_output(core) and not over_steps():
                continue  # one step's loss built from parts (see _BATCHES): its graph is meant to be kept
            else:
                shape = "no_backward"
            fix_span = fix_text = None
            if shape != "deferred":
                fix_span = self._span(core)
                atomic = isinstance(core, (cst.Name, cst.Attribute, cst.Subscript, cst.Call))
                fix_text = f"{_code(core)}.detach()" if atomic else f"({_code(core)}).detach()"
            yield dict(shape=shape, target=target, value=_code(value), span=self._span(stmt), fix_span=fix_span,
                       fix_text=fix_text)


def _subscript_key(node: cst.Subscript) -> str | None:
    if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        key = node.slice[0].slice.value
        if isinstance(key, cst.SimpleString):
            return key.evaluated_value
    return None
