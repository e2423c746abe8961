"""TL702 vllm-colocated-over-card: colocated vLLM (`use_vllm=True`, `vllm_mode="colocate"`) reserves
`vllm_gpu_memory_utilization` x the card next to the training process, and the two do not fit together.

Docs: rules/TL702.md. The share and the mode are the Run's (run/components.py), their defaults per TRL version in
knowledge/trl_trainers.py ("Generation": 0.9 in 0.14-0.17, 0.3 from 0.18; vllm_mode "server" 0.18-0.29, "colocate"
from 1.0); the training process's peak is `estimate`'s (the highest of its phases, with the CUDA context).
"""

from __future__ import annotations

from trainlint.context import FileContext
from trainlint.memory import fmt_bytes
from trainlint.rules.base import Rule, rule
from trainlint.rules.fit import run_fit
from trainlint.run.components import rl_trainer


@rule("TL702", "vllm-colocated-over-card", consumer="the run as a whole",
      summary="Colocated vLLM's vllm_gpu_memory_utilization share plus the training process exceed the GPU.",
      fix_hint="a lower `vllm_gpu_memory_utilization` (the message gives the largest that fits), "
               "`vllm_enable_sleep_mode=True`, or `vllm_mode=\"server\"` on other GPUs; needs a GPU")
def check(self: Rule, ctx: FileContext):
    fit = run_fit(ctx)
    if fit is None or not fit.plan.vllm_share:
        return
    from trainlint.memory.estimate import CUDA_OVERHEAD
    from trainlint.memory.phases import eval_peak, generation_peak

    plan = fit.plan
    own = max(fit.estimate.peak, eval_peak(plan), generation_peak(plan)) + CUDA_OVERHEAD
    share = int(plan.vllm_share * fit.capacity)
    if own + share <= fit.capacity or own > fit.capacity:
        return  # it fits, or the training process alone does not (TL701 says so)
    most = int((fit.capacity - own) / fit.capacity * 100) / 100
    gen = rl_trainer(ctx)
    args = ctx.trainer_args(gen) if gen is not None else None
    written = args.get("vllm_gpu_memory_utilization") if args is not None else None
    # where the share is written; else the key that chose the run (a framework config's `rl:` / the trainer call)
    span = written.origin if written is not None and written.known and written.origin else (
        gen.call.span if gen is not None else ctx.facts.models[0].anchor)
    if ctx.framework_config and args is not None and gen is not None:
        # the key that decides the share: where it is written, else the one that made the framework pass its own
        # default (axolotl passes vllm.gpu_memory_utilization only with trl.vllm_mode: colocate), else the stage
        span = args.call.kw_span("vllm_gpu_memory_utilization") or args.call.kw_span("vllm_mode") or \
            gen.stage_span or span
    how = "" if written is None or not written.known or written.origin else f" ({written.via})"
    say = ctx.spelling
    yield fit.related(self.diagnostic(ctx, span, (
        f"colocated vLLM reserves {say.name('vllm_gpu_memory_utilization')}={plan.vllm_share:g}{how} of "
        f"{fit.where}, ~{fmt_bytes(share)}, and the training process needs ~{fmt_bytes(own)} (its highest phase with "
        f"the CUDA context): ~{fmt_bytes(own + share - fit.capacity)} over; set "
        f"{say.name('vllm_gpu_memory_utilization')} <= {most:.2f}, or {say.setting('vllm_enable_sleep_mode', True)}, "
        f"or {say.setting('vllm_mode', 'server')} on other GPUs")))
