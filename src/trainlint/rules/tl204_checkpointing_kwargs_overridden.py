"""TL204 checkpointing-kwargs-overridden: gradient checkpointing is set in two places and one overrides the other: the
script's `gradient_checkpointing_enable(gradient_checkpointing_kwargs=...)` is replaced when the Trainer enables it again
from its arguments, or `gradient_checkpointing=False` in the arguments leaves on what the script turned on.

Docs: rules/TL204.md. Library facts: transformers Trainer re-enables checkpointing at train() with the arguments'
kwargs (4.36.2 trainer.py:1647-1653, `{}` for None; 4.46.3 :2252-2253 and 4.57.6 :2446-2447, the kwargs as given;
5.25.0 :1518-1545, `gc_kwargs or None`) and never disables it; what each kwargs value runs:
run/checkpointing.py reentrant_in_effect. PPO / RLOO's own train() enables nothing (run/checkpointing.py _own_loop).
"""

from __future__ import annotations

from trainlint.context import FileContext
from trainlint.knowledge import libraries
from trainlint.rules.base import Rule, rule
from trainlint.run.checkpointing import GC_ENABLE, _own_loop, kwargs_of, reentrant_in_effect

FLAGS = ("gradient_checkpointing", "activation_checkpointing")


def _mode(reentrant: bool) -> str:
    return "reentrant" if reentrant else "non-reentrant"


@rule("TL204", "checkpointing-kwargs-overridden", consumer="activations, checkpointing",
      summary="Gradient checkpointing is set both on the model and in the trainer's arguments, and one overrides the "
              "other: the Trainer re-enables it at train() with the arguments' kwargs, and never turns it off.",
      fix_hint="say it once: the same `gradient_checkpointing_kwargs` in the arguments as on the model, or only one of "
               "the two")
def check(self: Rule, ctx: FileContext):
    call = next((c for c in ctx.facts.calls if c.short in GC_ENABLE), None)
    args = ctx.main_args
    if call is None or args is None or not ctx.facts.trainers or _own_loop(ctx) is not None:
        return
    if not ctx.versions.transformers.at_least(*libraries.GC_KWARGS_SINCE):
        return
    name = next((n for n in FLAGS if args.get(n).known and isinstance(args.get(n).value, bool)), None)
    if name is None:
        return
    flag = args.get(name)
    span = args.call.kw_span(name) or args.call.span
    where = f"{call.short}() at line {call.span.line}"
    tv = ctx.versions.transformers.version
    if flag.value is False:
        yield self.diagnostic(
            ctx, span,
            f"{ctx.spelling.setting(name, False)} does not turn gradient checkpointing off: {where} turned it on, and "
            f"the Trainer only ever enables it (transformers {tv} trainer.py: `if args.{name}:` then "
            f"{call.short}), so every layer's forward is recomputed in backward (about one more forward pass per "
            f"step) while the arguments say it is off; drop the {call.short}() call to turn it off, or set "
            f"{ctx.spelling.setting(name, True)} so the arguments say what runs", flag)
        return
    default = libraries.gc_reentrant_default(ctx.versions.transformers)
    if default is None:
        return
    transformers_5 = not default
    mine = reentrant_in_effect(kwargs_of(call), transformers_5, via_trainer=False)
    enabled, theirs_kwargs = ctx.checkpointing(args)
    if not enabled:
        return
    theirs = reentrant_in_effect(theirs_kwargs, transformers_5, via_trainer=True)
    if mine is None or theirs is None or mine == theirs:
        return
    given = (f"{theirs_kwargs.value!r}" if theirs_kwargs.known else "unset")
    consequence = ""
    if theirs and not mine and not any(c.short == "enable_input_require_grads" for c in ctx.facts.calls) and \
            any(c.is_api("peft.get_peft_model", "peft.prepare_model_for_kbit_training") for c in ctx.facts.calls):
        consequence = ("; with adapters on a frozen base and no input requiring grad, reentrant checkpointing gives "
                       "them no gradient (TL201)")
    kwargs_name = "gradient_checkpointing_kwargs" if name == "gradient_checkpointing" else "activation_checkpointing_kwargs"
    wanted = '{"use_reentrant": ' + str(mine) + "}"
    yield self.diagnostic(
        ctx, span,
        f"the {_mode(mine)} checkpointing {where} asks for is replaced: the Trainer calls {call.short}() again at "
        f"train() with the arguments' {kwargs_name} ({given}), so the run checkpoints {_mode(theirs)} (transformers "
        f"{tv}){consequence}; set {kwargs_name}={wanted} in the arguments too, "
        f"or drop one of the two", flag)
