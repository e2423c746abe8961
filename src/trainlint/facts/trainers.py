"""The repository's own trainers: `class MyTrainer(Trainer)` (or a TRL trainer) behaves like its library base
for the rules, unless it overrides the method that computes the loss. An override that reads `.logits` and
takes a cross-entropy / log-softmax over them materialises the full logits (TL301 at that method); one that
calls Liger's or cut-cross-entropy's fused loss does not; any other override is not guessed at."""

from __future__ import annotations

from dataclasses import replace

from trainlint.diagnostics import Span
from trainlint.facts.model import Call, ClassDef, ScriptFacts, TrainerCall
from trainlint.facts.names import TRAINER_CLASSES

# Methods through which the library trainers compute the training loss from the model's logits:
# transformers Trainer.compute_loss; TRL's DPO concatenated_forward / get_batch_logps, GRPO/RLOO
# _get_per_token_logps(_and_entropies), KTO/ORPO/CPO get_batch_loss_metrics.
LOSS_METHODS = ("compute_loss", "concatenated_forward", "get_batch_logps", "_get_per_token_logps",
                "_get_per_token_logps_and_entropies", "get_batch_loss_metrics", "_compute_loss")
FULL_LOSS = {"cross_entropy", "CrossEntropyLoss", "log_softmax", "selective_log_softmax", "nll_loss",
             "logsumexp", "softmax"}
FUSED_LOSS = {"LigerFusedLinearCrossEntropyLoss", "LigerFusedLinearCrossEntropyFunction", "linear_cross_entropy",
              "liger_fused_linear_cross_entropy", "LigerFusedLinearDPOLoss", "LigerFusedLinearGRPOLoss",
              "LigerFusedLinearKTOLoss", "LigerFusedLinearORPOLoss", "LigerFusedLinearCPOLoss", "cce_patch"}
LOSS_CALLS = FULL_LOSS | FUSED_LOSS
# A mark: the scope reads `.loss` / `["loss"]` from a forward it called (the model's own cross-entropy on the
# full logits when the model is a causal LM: transformers LlamaForCausalLM.forward, loss_utils.ForCausalLMLoss).
FORWARD_LOSS = "forward .loss"


def library_trainer(facts: ScriptFacts, name: str, depth: int = 0) -> str | None:
    """The library trainer a class of these facts derives from ("Trainer", "DPOTrainer"), or None."""
    klass = facts.class_def(name)
    if klass is None or depth > 8:
        return None
    for base in klass.bases:
        short = base.split(".")[-1]
        if short in TRAINER_CLASSES and ("." not in base or base.split(".")[0] in ("transformers", "trl")):
            return short
        if "." not in base and short != name:
            found = library_trainer(facts, short, depth + 1)
            if found is not None:
                return found
    return None


def loss_override(facts: ScriptFacts, name: str, display: str | None = None,
                  depth: int = 0) -> tuple[str, str, Span] | None:
    """How the class (or a local base of it) overrides the loss: ("full" | "fused" | "model" | "other", method,
    span); "model": it returns the model's own loss, so what applies to the model (Liger's patch) still decides."""
    klass = facts.class_def(name)
    if klass is None or depth > 8:
        return None
    marks = dict(facts.marks)
    class_marks = set().union(*(set(m) for s, m in facts.marks if s.startswith(f"class {name}.")))
    for method in LOSS_METHODS:
        fn = facts.function(f"class {name}.{method}")
        if fn is None:
            continue
        seen = _marks_through_methods(facts, name, fn.scope, marks)
        if seen & FUSED_LOSS:
            kind = "fused"
        elif "logits" in seen and (seen & FULL_LOSS or "CrossEntropyLoss" in class_marks):
            kind = "full"
        elif FORWARD_LOSS in seen:
            kind = "model"  # the model's own loss (`model(**inputs).loss`), as Trainer.compute_loss takes it
        else:
            kind = "other"
        whole = fn.span or Span.point(1)
        span = Span(whole.line, whole.col, whole.line, whole.col + len(f"def {method}"), whole.file)  # the `def`
        return kind, method, span.in_file(display) if display and not span.file else span
    return _in_local_bases(facts, klass, name, lambda base: loss_override(facts, base, display, depth + 1))


def _in_local_bases(facts: ScriptFacts, klass: ClassDef, name: str, find):
    """`find(base)` for each base class of `klass` defined in these facts (not `name` itself), the first found."""
    for base in klass.bases:
        if "." not in base and base != name:
            found = find(base)
            if found is not None:
                return found
    return None


def _marks_through_methods(facts: ScriptFacts, name: str, scope: str, marks: dict) -> set[str]:
    """What a method and the methods of its class it calls (`self._get_per_token_logps(...)`, transitively, in
    the class or its local bases) do with logits: the marks of all their scopes."""
    seen: set[str] = set()
    todo, done = [scope], set()
    while todo:
        current = todo.pop()
        if current in done:
            continue
        done.add(current)
        for s, m in marks.items():
            if s == current or s.startswith(current + "."):
                seen |= set(m)
                for mark in m:
                    if mark.startswith("self."):
                        target = _method_scope(facts, name, mark[len("self."):])
                        if target is not None:
                            todo.append(target)
    return seen


def _method_scope(facts: ScriptFacts, name: str, method: str, depth: int = 0) -> str | None:
    """The scope of `method` as class `name` resolves it (its own, else a local base's)."""
    if facts.function(f"class {name}.{method}") is not None:
        return f"class {name}.{method}"
    klass = facts.class_def(name)
    if klass is None or depth > 8:
        return None
    return _in_local_bases(facts, klass, name, lambda base: _method_scope(facts, base, method, depth + 1))


def subclass_trainer(facts: ScriptFacts, call: Call, name: str, display: str | None = None) -> TrainerCall | None:
    """`MyTrainer(model=..., args=...)` as a TrainerCall of its library base, when `name` is one of these facts'."""
    base = library_trainer(facts, name)
    if base is None:
        return None
    return TrainerCall(call, base, TRAINER_CLASSES[base], call.arg_name(1, "args"), call.arg_name(0, "model"),
                       call.target, subclass=name, loss_override=loss_override(facts, name, display))


def with_local_trainers(facts: ScriptFacts) -> ScriptFacts:
    """The calls of a file to trainer subclasses it defines, as TrainerCalls (and as calls the rules see)."""
    found = []
    for hop in facts.hops:
        if "." in hop.qualname or facts.class_def(hop.qualname) is None:
            continue
        trainer = subclass_trainer(facts, hop, hop.qualname)
        if trainer is not None:
            found.append(trainer)
    if not found:
        return facts
    have = {id(c) for c in facts.calls}
    calls = facts.calls + tuple(t.call for t in found if id(t.call) not in have)
    return replace(facts, calls=tuple(sorted(calls, key=lambda c: c.index)), trainers=facts.trainers + tuple(found))


__all__ = ["ClassDef", "library_trainer", "loss_override", "subclass_trainer", "with_local_trainers"]
