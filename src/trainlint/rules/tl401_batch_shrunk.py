"""TL401 batch-shrunk-without-accumulation: the per-device batch went down (against the file's git base)
and gradient accumulation did not rise to keep the effective batch; or `auto_find_batch_size=True`,
which shrinks the batch on OOM without touching accumulation.

Docs: rules/TL401.md. The batch shape is the Run's (trainlint/run/batch.py).
"""

from __future__ import annotations

import math
from dataclasses import replace as replace_fields

from trainlint.context import FileContext
from trainlint.diagnostics import ACCUMULATION, Setting, Fix
from trainlint.edits import launch_value_fix, make_fix, replace, set_keyword
from trainlint.facts import ScriptFacts
from trainlint.facts.names import DATALOADER
from trainlint.rules.base import Rule, rule
from trainlint.run import Run, resolve
from trainlint.run.batch import Shape, args_shape, loop_shape


def _pairs(run: Run, old: ScriptFacts):
    """The shapes (old, new) of arguments objects of the two versions that describe the same run: the new one as
    the Run reads it (run/batch.py), the old one read the same way from the base's facts."""
    new = run.ctx.facts
    used: set[int] = set()
    for args in new.args_objects:
        match = [o for o in old.args_objects if o.class_name == args.class_name and o.variable == args.variable]
        if len(match) != 1:
            same_class_new = [a for a in new.args_objects if a.class_name == args.class_name]
            same_class_old = [o for o in old.args_objects if o.class_name == args.class_name]
            match = same_class_old if len(same_class_new) == 1 and len(same_class_old) == 1 else []
        if len(match) == 1 and id(match[0]) not in used:
            used.add(id(match[0]))
            yield args_shape(match[0]), run.batch.shape_for(args)
    if not new.args_objects and not old.args_objects:
        yield loop_shape(old), run.batch.loop


def _keep_message(ctx: FileContext, old: Shape, new: Shape) -> str:
    target = old.batch * old.accum
    if target % new.batch == 0:
        return f"{ctx.spelling.advise(new.accum_name, target // new.batch)} to keep {target}"
    up = math.ceil(target / new.batch)
    return (f"no integer {ctx.spelling.name(new.accum_name)} keeps {target} at batch {new.batch}; {up} gives {up * new.batch}, "
            f"or pick a batch that divides {target}")


@rule("TL401", "batch-shrunk-without-accumulation", consumer="batch, accumulation",
      summary="The micro-batch was shrunk (against the git base, or by auto_find_batch_size) without raising "
              "gradient accumulation, so the effective batch changed.",
      fix_hint="raise `gradient_accumulation_steps` so batch x accumulation stays the same; avoid "
               "`auto_find_batch_size`",
      fix="safe", verifies="samples-per-step")
def check(self: Rule, ctx: FileContext):
    for args in ctx.facts.args_objects:
        if args.get("auto_find_batch_size").is_(True):
            name = ctx.spelling.name
            yield self.diagnostic(
                ctx, args.call.kw_span("auto_find_batch_size") or args.call.span,
                f"{ctx.spelling.setting('auto_find_batch_size', True)}: on each out-of-memory retry the Trainer "
                f"multiplies the batch by 0.9 and never rescales gradient_accumulation_steps, so the effective batch "
                f"(and the learning-rate schedule) changes silently; set {name('per_device_train_batch_size')} and "
                f"raise {name('gradient_accumulation_steps')} instead")
    if not ctx.facts.args_objects and not any(c.is_api(*DATALOADER) for c in ctx.facts.calls):
        return
    old_facts, _ = ctx.base
    if old_facts is None:
        return
    for old, new in _pairs(resolve(ctx), old_facts):
        if old is None or new is None or new.batch >= old.batch:
            continue
        before, after = old.batch * old.accum, new.batch * new.accum
        if after >= before:
            continue
        accum_name, batch_name = ctx.spelling.name(new.accum_name), ctx.spelling.name(new.batch_name)
        accum_change = (f"{accum_name} stays {new.accum}" if new.accum == old.accum
                        else f"{accum_name} {old.accum} -> {new.accum}")
        diag = self.diagnostic(
            ctx, new.span,
            f"{batch_name} {old.batch} -> {new.batch} but {accum_change}: effective batch per device "
            f"{before} -> {after}; {_keep_message(ctx, old, new)}")
        target = old.batch * old.accum
        setting = Setting(new.accum_name, target // new.batch, target=ACCUMULATION) if target % new.batch == 0 else None
        yield replace_fields(diag, setting=setting, data={"effective_batch": target}).with_fix(_fix(ctx, old, new))


def _fix(ctx: FileContext, old: Shape, new: Shape) -> Fix | None:
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
