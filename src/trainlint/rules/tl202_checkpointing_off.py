"""TL202 checkpointing-off-over-budget: the run does not fit its GPU, gradient checkpointing is off, and
turning it on alone would make it fit (or is the largest single lever).

Docs: rules/TL202.md. The numbers: memory.estimate (activations with and without checkpointing), judged
against the GPU as `trainlint estimate` does (rules/fit.py).
"""

from __future__ import annotations

from trainlint.context import FileContext
from trainlint.diagnostics import Fix
from trainlint.edits import make_fix, non_reentrant_kwargs, replace, set_keyword
from trainlint.knowledge import libraries
from trainlint.memory import fmt_bytes
from trainlint.rules.base import Rule, rule
from trainlint.rules.fit import Fit, run_fit

LEVER = "gradient checkpointing"


def checkpointing_lever(ctx: FileContext, fit: Fit | None) -> tuple[int, bool] | None:
    """(what the GPU must hold with checkpointing on, whether that fits) when TL202 applies: the run does not
    fit, checkpointing is definitely off, and turning it on fits or is the largest lever; else None."""
    if fit is None or fit.fits or fit.plan.checkpointing:
        return None
    if ctx.gradient_checkpointing is not False and ignored_flag(ctx) is None:
        return None
    with_gc = fit.need_with(checkpointing=True)
    largest = bool(fit.estimate.levers) and fit.estimate.levers[0].name == LEVER
    if with_gc > fit.capacity and not largest:
        return None
    return with_gc, with_gc <= fit.capacity


def ignored_flag(ctx: FileContext) -> str | None:
    """Why `gradient_checkpointing=True` does nothing in this run (a TRL trainer with its own train():
    run/checkpointing.py `_own_loop`), or None."""
    from trainlint.run import resolve

    on = resolve(ctx).checkpointing.on
    return on.why if ctx.gradient_checkpointing and on.value is False else None


@rule("TL202", "checkpointing-off-over-budget", consumer="activations, checkpointing",
      summary="Gradient checkpointing is off and the run does not fit the GPU, where turning it on alone makes it fit "
              "or is the largest single saving.",
      fix_hint="`gradient_checkpointing=True` (non-reentrant with LoRA); needs a GPU (`--gpu`, `gpu`, `gpus`, or the "
               "one a Slurm launch requests)",
      fix="safe", verifies="memory")
def check(self: Rule, ctx: FileContext):
    fit = run_fit(ctx)
    lever = checkpointing_lever(ctx, fit)
    if lever is None:
        return
    with_gc, fits = lever
    est = fit.estimate
    saved = est.consumers["activations"] - estimate_activations_with_gc(fit)
    outcome = (f"with it the peak is ~{fmt_bytes(with_gc)}, which fits" if fits else
               f"with it ~{fmt_bytes(with_gc)}: still over, but no other single change saves more")
    lora = fit.plan.lora_r is not None
    what = "set gradient_checkpointing=True" + (
        ' with gradient_checkpointing_kwargs={"use_reentrant": False} (LoRA: reentrant checkpointing needs input '
        'grads, TL201)' if lora else "")
    ignored = ignored_flag(ctx)
    if ignored is not None:
        what = ("call gradient_checkpointing_enable(" + ('gradient_checkpointing_kwargs={"use_reentrant": False}'
                                                         if lora else "") + ") on the policy model before building the "
                "trainer")
        message = (f"gradient checkpointing is off and the run does not fit {fit.where}: {ignored}; it needs "
                   f"~{fmt_bytes(fit.need)} (activations kept for backward ~{fmt_bytes(est.consumers['activations'])}"
                   f", of which checkpointing would free ~{fmt_bytes(saved)}); {outcome}; {what}")
        args = ctx.main_args
        span = args.call.kw_span("gradient_checkpointing") or args.call.span
        yield fit.related(self.diagnostic(ctx, span, message, args.get("gradient_checkpointing")))
        return
    if ctx.main_args is None:
        what = "call model.gradient_checkpointing_enable(" + (
            'gradient_checkpointing_kwargs={"use_reentrant": False}' if lora else "") + ") before training"
    message = (f"gradient checkpointing is off and the run does not fit {fit.where}: it needs ~{fmt_bytes(fit.need)} "
               f"(activations kept for backward ~{fmt_bytes(est.consumers['activations'])}, of which checkpointing "
               f"would free ~{fmt_bytes(saved)}); {outcome}; {what} (about one more forward pass per step)")
    args = ctx.main_args
    span = args.call.span if args is not None else ctx.facts.models[0].anchor if ctx.facts.models else None
    if span is None:
        return
    deciding = args.get("gradient_checkpointing") if args is not None else None
    yield fit.related(self.diagnostic(ctx, span, message, deciding)).with_fix(_fix(ctx, lora))


def estimate_activations_with_gc(fit: Fit) -> int:
    from dataclasses import replace as dc_replace

    from trainlint.memory.estimate import activations_bytes

    return activations_bytes(dc_replace(fit.plan, checkpointing=True))


def _fix(ctx: FileContext, lora: bool) -> Fix | None:
    """Safe: checkpointing recomputes the same forward (same numerics), at ~30% more compute. With LoRA the
    non-reentrant variant, so the fix cannot create TL201 (transformers >= 4.35 has the kwargs)."""
    args = ctx.main_args
    if args is None or args.call.opaque_kwargs:
        return None
    value = args.get("gradient_checkpointing")
    needs_kwargs = lora and args.get("gradient_checkpointing_kwargs").unset
    if needs_kwargs and not ctx.versions.transformers.at_least(*libraries.GC_KWARGS_SINCE):
        return None
    extra = f", gradient_checkpointing_kwargs={non_reentrant_kwargs(ctx.text)}" if needs_kwargs else ""
    if value.known:
        span = args.call.kw_span("gradient_checkpointing")
        if value.via != "literal" or span is None or (value.origin is not None and value.origin.file):
            return None  # written through a name, or in a launcher: not edited here
        edits = [replace(span, "gradient_checkpointing=True" + extra)]
    elif value.unset:
        edits = set_keyword(args.call, "gradient_checkpointing", "True" + extra, ctx.text)
    else:
        return None
    if not edits:
        return None
    return make_fix("safe", "Set gradient_checkpointing=True" + (" (non-reentrant)" if needs_kwargs else ""), *edits)
