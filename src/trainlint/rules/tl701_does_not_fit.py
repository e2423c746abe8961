"""TL701 run-does-not-fit: a GPU is known and the predicted peak per device exceeds it. One finding for the
run, with the consumers and the cheapest levers that make it fit; silent when one more specific finding
(TL101, TL202, TL301) names the single change that makes it fit, so the overflow is said once.

Docs: rules/TL701.md. The numbers: memory.estimate (consumers, peak, levers), judged as `trainlint estimate`
judges (rules/fit.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainlint.context import FileContext
from trainlint.memory import fmt_bytes
from trainlint.rules.base import REGISTRY, Rule, rule
from trainlint.rules.fit import Fit, anchor, consumers_text, run_fit

if TYPE_CHECKING:
    from trainlint.memory.estimate import Lever

# The lesson's diagnostic sequence: what costs least comes first (memory.estimate.levers names them).
COST_ORDER = ("SDPA", "fused or chunked", "gradient checkpointing", "micro-batch", "8-bit", "sequences of", "LoRA",
              "QLoRA", "4-bit base", "FSDP", "CPU offload")
# A lever that a more specific rule reports, when that rule fires on the same context.
SPECIFIC = {"SDPA": "TL101", "fused or chunked": "TL301", "gradient checkpointing": "TL202"}


def _rank(lever: Lever) -> int:
    return next((i for i, prefix in enumerate(COST_ORDER) if lever.name.startswith(prefix)), len(COST_ORDER))


def fitting_levers(fit: Fit) -> list[Lever]:
    """The levers that alone bring the run within the GPU, cheapest first."""
    over = fit.need - fit.capacity
    return sorted((lv for lv in fit.estimate.levers if lv.saves >= over), key=_rank)


def reported_by(ctx: FileContext, lever: Lever) -> str | None:
    """The code of the more specific rule that reports this lever, when that rule fires here."""
    code = next((c for prefix, c in SPECIFIC.items() if lever.name.startswith(prefix)), None)
    if code is not None and code in REGISTRY and any(True for _ in REGISTRY[code].run(ctx)):
        return code
    return None


def said_elsewhere(ctx: FileContext, levers: list[Lever]) -> str | None:
    """The code of a more specific finding whose one change makes the run fit, when that rule fires here."""
    return next((code for code in (reported_by(ctx, lv) for lv in levers) if code), None)


@rule("TL701", "run-does-not-fit", consumer="the run as a whole",
      summary="The estimated peak of the run exceeds the GPU's memory.",
      fix_hint="the levers the message ranks, or a larger GPU; needs a GPU (`--gpu`, `gpu`, `gpus`, or the one a "
               "Slurm launch requests)")
def check(self: Rule, ctx: FileContext):
    fit = run_fit(ctx)
    if fit is None or fit.fits:
        return
    levers = fitting_levers(fit)
    if said_elsewhere(ctx, levers):
        return
    est = fit.estimate
    if levers:
        advice = "levers that alone make it fit, cheapest first: " + "; ".join(
            f"{lv.name} (saves ~{fmt_bytes(lv.saves)}; {lv.cost})" for lv in levers[:3])
    elif est.levers:
        # a lever a specific finding already prices is named by its code, not repeated
        told = [(lv, reported_by(ctx, lv)) for lv in est.levers[:3]]
        others = [lv for lv, code in told if code is None]
        codes = sorted({code for _, code in told if code})
        advice = "no single lever makes it fit" + (
            f" (the changes {' and '.join(codes)} report{'s' if len(codes) == 1 else ''} are not enough alone)"
            if codes else "")
        if others:
            advice += (f"; the largest{' other' if codes else ''}: {others[0].name} (saves ~{fmt_bytes(others[0].saves)})"
                       f", then combine or pick a larger GPU")
        else:
            advice += "; combine levers or pick a larger GPU"
    else:
        advice = "no lever trainlint knows would make it fit: pick a larger GPU"
    span, _ = anchor(ctx)
    message = (f"the run does not fit {fit.where}: predicted peak ~{fmt_bytes(est.peak)} per device at the "
               f"{est.peak_phase} plus ~{fmt_bytes(fit.need - est.peak)} of CUDA context, "
               f"~{fmt_bytes(fit.need - fit.capacity)} over ({consumers_text(est)}); {advice}")
    yield fit.related(self.diagnostic(ctx, span, message))
