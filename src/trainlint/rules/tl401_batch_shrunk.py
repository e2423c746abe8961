"""TL401 batch-shrunk-without-accumulation: the per-device batch went down (against the file's git base)
and gradient accumulation did not rise to keep the effective batch; or `auto_find_batch_size=True`,
which shrinks the batch on OOM without touching accumulation.

Docs: rules/TL401.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainlint.context import FileContext
from trainlint.edits import launch_value_fix, make_fix, replace, set_keyword
from trainlint.diagnostics import Span
from trainlint.facts import ArgsObject, Call, ScriptFacts, Value
from trainlint.facts.names import ACCELERATOR, DATALOADER
from trainlint.knowledge.libraries import TRAINING_ARGS_DEFAULTS
from trainlint.rules.base import Rule, rule


@dataclass(frozen=True)
class Shape:
    batch: int
    accum: int
    batch_name: str
    accum_name: str
    span: Span  # where the batch is set in this version
    accum_span: Span | None
    call: Call | None = None  # the call that takes the accumulation keyword, for the fix
    accum_value: Value | None = None
    accum_keyword: str = "gradient_accumulation_steps"


def _int(value: Value, default: int | None) -> int | None:
    if value.unset:
        return default
    if value.known and isinstance(value.value, int) and not isinstance(value.value, bool) and value.value > 0:
        return value.value
    return None


def _args_shape(args: ArgsObject) -> Shape | None:
    if args.call.opaque_kwargs:
        return None
    batch = _int(args.get("per_device_train_batch_size"), TRAINING_ARGS_DEFAULTS["per_device_train_batch_size"])
    accum = _int(args.get("gradient_accumulation_steps"), TRAINING_ARGS_DEFAULTS["gradient_accumulation_steps"])
    if batch is None or accum is None:
        return None
    return Shape(batch, accum, "per_device_train_batch_size", "gradient_accumulation_steps",
                 args.call.kw_span("per_device_train_batch_size") or args.call.span,
                 args.call.kw_span("gradient_accumulation_steps"), args.call, args.get("gradient_accumulation_steps"))


def _loop_shape(facts: ScriptFacts) -> Shape | None:
    loaders = [c for c in facts.calls if c.is_api(*DATALOADER)]
    if len(loaders) != 1:
        return None
    batch = _int(loaders[0].arg(1, "batch_size"), 1)
    accums = {e.value.value for e in facts.accum_evidence if e.value.known}
    if any(not e.value.known for e in facts.accum_evidence) or len(accums) > 1:
        return None
    accum = accums.pop() if accums else 1
    if batch is None or not isinstance(accum, int) or isinstance(accum, bool) or accum <= 0:
        return None
    span = loaders[0].kw_span("batch_size") or loaders[0].span
    where = next((e for e in facts.accum_evidence), None)
    name = "accumulation steps"
    if where is not None:
        name = ("Accelerator gradient_accumulation_steps" if where.source.startswith("Accelerator(")
                else where.source.removesuffix(" ="))
    accelerators = [c for c in facts.calls if c.is_api(*ACCELERATOR)]
    call = accelerators[0] if len(accelerators) == 1 and where is not None and where.source.startswith("Accelerator(") \
        else None
    return Shape(batch, accum, "DataLoader batch_size", name, span, where.span if where else None, call,
                 where.value if where is not None else None)


def _pairs(new: ScriptFacts, old: ScriptFacts):
    """Arguments objects of the two versions that describe the same run."""
    used: set[int] = set()
    for args in new.args_objects:
        match = [o for o in old.args_objects if o.class_name == args.class_name and o.variable == args.variable]
        if len(match) != 1:
            same_class_new = [a for a in new.args_objects if a.class_name == args.class_name]
            same_class_old = [o for o in old.args_objects if o.class_name == args.class_name]
            match = same_class_old if len(same_class_new) == 1 and len(same_class_old) == 1 else []
        if len(match) == 1 and id(match[0]) not in used:
            used.add(id(match[0]))
            yield _args_shape(match[0]), _args_shape(args)
    if not new.args_objects and not old.args_objects:
        yield _loop_shape(old), _loop_shape(new)


def _keep_message(old: Shape, new: Shape) -> str:
    target = old.batch * old.accum
    if target % new.batch == 0:
        return f"set {new.accum_name}={target // new.batch} to keep {target}"
    up = math.ceil(target / new.batch)
    return (f"no integer {new.accum_name} keeps {target} at batch {new.batch}; {up} gives {up * new.batch}, "
            f"or pick a batch that divides {target}")


@rule("TL401", "batch-shrunk-without-accumulation", consumer="batch, accumulation",
      summary="The micro-batch was shrunk (against the git base, or by auto_find_batch_size) without raising "
              "gradient accumulation, so the effective batch changed.",
      fix_hint="raise `gradient_accumulation_steps` so batch x accumulation stays the same; avoid "
               "`auto_find_batch_size`",
      fix="safe")
def check(self: Rule, ctx: FileContext):
    for args in ctx.facts.args_objects:
        if args.get("auto_find_batch_size").is_(True):
            yield self.diagnostic(
                ctx, args.call.kw_span("auto_find_batch_size") or args.call.span,
                "auto_find_batch_size=True: on each out-of-memory retry the Trainer multiplies the batch by 0.9 "
                "and never rescales gradient_accumulation_steps, so the effective batch (and the learning-rate "
                "schedule) changes silently; set per_device_train_batch_size and raise gradient_accumulation_steps "
                "instead")
    if not ctx.facts.args_objects and not any(c.is_api(*DATALOADER) for c in ctx.facts.calls):
        return
    old_facts, _ = ctx.base
    if old_facts is None:
        return
    for old, new in _pairs(ctx.facts, old_facts):
        if old is None or new is None or new.batch >= old.batch:
            continue
        before, after = old.batch * old.accum, new.batch * new.accum
        if after >= before:
            continue
        accum_change = (f"{new.accum_name} stays {new.accum}" if new.accum == old.accum
                        else f"{new.accum_name} {old.accum} -> {new.accum}")
        diag = self.diagnostic(
            ctx, new.span,
            f"{new.batch_name} {old.batch} -> {new.batch} but {accum_change}: effective batch per device "
            f"{before} -> {after}; {_keep_message(old, new)}")
        yield diag.with_fix(_fix(ctx, old, new))


def _fix(ctx: FileContext, old: Shape, new: Shape) -> dict | None:
    """Safe when the division is exact: the same samples per optimizer step, in more micro-steps."""
    target = old.batch * old.accum
    if target % new.batch:
        return None
    steps = str(target // new.batch)
    message = f"Set {new.accum_name}={steps} (effective batch {target})"
    value = new.accum_value
    if value is not None and value.known and value.origin is not None and value.origin.file:
        return launch_value_fix("safe", message, value.origin, steps)  # `--gradient_accumulation_steps 8` in a launch
    if value is not None and value.known and value.via in ("constant", "argparse default", "dataclass default") \
            and value.origin is not None:
        return make_fix("safe", message + f" where it is defined ({value.via})", replace(value.origin, steps))
    if new.call is None or (value is not None and value.known and value.via not in ("literal", "library default")):
        return None
    edits = set_keyword(new.call, new.accum_keyword, steps, ctx.text)
    return make_fix("safe", message, *edits) if edits else None
