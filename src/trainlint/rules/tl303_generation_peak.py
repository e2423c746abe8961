"""TL303 generation-over-training: in GRPO / RLOO / Online DPO / PPO / GKD the generation phase (HF `generate`'s KV cache
for every completion of a generation round, or the no-grad per-token log-probabilities forward over the vocabulary)
peaks above the training step.

Docs: rules/TL303.md. The phase is the Run's (run/components.py `generation_phase`), its arithmetic
memory.estimate.generation_parts; the TRL facts (batch semantics, steps_per_generation, chunking of the
log-probabilities, the fused LM head from 1.15) are in knowledge/trl_trainers.py ("Generation").
"""

from __future__ import annotations

from trainlint.context import FileContext
from trainlint.memory import GIB, fmt_bytes
from trainlint.rules.base import Rule, rule
from trainlint.run import resolve

MARGIN = GIB  # the generation phase must exceed the training step by this much to be reported


@rule("TL303", "generation-over-training", consumer="logits and loss",
      summary="An RL trainer's generation phase (KV cache of generate, or per-token log-probabilities over the "
              "vocabulary) needs more memory than its training step.",
      fix_hint="fewer completions per generation round (steps_per_generation / generation_batch_size), a shorter "
               "max_completion_length, vLLM, or TRL >= 1.15 (fused LM head)")
def check(self: Rule, ctx: FileContext):
    gen = resolve(ctx).generation
    if gen.value is None or gen.value.vllm == "server":
        return
    from trainlint.memory.estimate import estimate
    from trainlint.memory.phases import generation_parts, generation_peak
    from trainlint.planning import Overrides, PlanError, plan_for

    try:
        plan, _, _, unknown = plan_for(ctx, Overrides())
    except PlanError:
        return
    if unknown or plan.generation is None:
        return
    train, peak = estimate(plan).peak, generation_peak(plan)
    if peak < train + MARGIN:
        return
    part, size = max(generation_parts(plan), key=lambda kv: kv[1])
    what, advice = describe(ctx, plan, part, size)
    yield self.diagnostic(ctx, gen.span, (
        f"{gen.value.trainer} in TRL {ctx.versions.trl.version}: the generation phase peaks at ~{fmt_bytes(peak)}, "
        f"~{fmt_bytes(peak - train)} above the training step (~{fmt_bytes(train)}): {what}; {advice}"))


def describe(ctx: FileContext, plan, part: str, size: int) -> tuple[str, str]:
    """What holds the generation phase's peak (`part` of memory.estimate.generation_parts, `size` bytes) and the
    trainer's levers for it. GKD's are its own (knowledge/trl_trainers.py "GKD"): `lmbda` (the share of steps on which
    the student generates; 0 without seq_kd: never), `max_new_tokens`, the batch, and gradient checkpointing's
    use_cache=False (no KV cache: 0.13.0 gkd_trainer.py:147, 1.16.0 experimental/gkd/gkd_trainer.py:221); it has no
    steps_per_generation and no vLLM."""
    g = plan.generation
    say = ctx.spelling
    if resolve(ctx).generation.value.trainer == "GKDTrainer":
        tokens = g.prompt + g.completion
        levers = (f"lower {say.name('max_new_tokens')} or {say.name('per_device_train_batch_size')}, or "
                  f"{say.name('lmbda')} (the share of steps on which the student generates; 0 without seq_kd: "
                  f"never)")
        if part == "kv_cache":
            return (f"HF generate's KV cache for {g.rows} completions x {tokens:,} tokens is ~{fmt_bytes(size)}",
                    f"{levers}; or {say.advise('gradient_checkpointing', True)}: GKDTrainer then generates with "
                    f"use_cache=False (no KV cache; each new token re-runs the whole prefix: slower)")
        return (f"without a KV cache (use_cache=False under gradient checkpointing) the last decoding step is a "
                f"no-grad forward over {g.rows} x {tokens:,} tokens, ~{fmt_bytes(size)}", levers)
    if resolve(ctx).generation.value.trainer == "DistillationTrainer":  # 1.3-1.9: one generate per slice
        return (f"HF generate's KV cache for {g.rows} completions x {g.prompt + g.completion:,} tokens is "
                f"~{fmt_bytes(size)}" if part == "kv_cache" else f"the decoding step holds ~{fmt_bytes(size)}",
                f"lower {say.name('per_device_train_batch_size')} (the rows each slice generates at once) or "
                f"{say.name('max_completion_length')}, or generate with vLLM ({say.name('use_vllm')})")
    if part == "generation_logits":
        what = (f"the rollout keeps every generated token's fp32 logits, [{g.rows} x {g.completion:,} x "
                f"{plan.geometry.vocab:,}] ~{fmt_bytes(g.rows * g.completion * plan.geometry.vocab * 4)}, copied once "
                f"more when batch_generation pads them")
        advice = ("generate fewer rows per rollout (per_device_train_batch_size x gradient_accumulation_steps) or "
                  "shorter responses (response_length)")
    elif part == "kv_cache":
        what = (f"HF generate's KV cache for {g.rows} completions x {g.prompt + g.completion:,} tokens is "
                f"~{fmt_bytes(size)}")
        say = ctx.spelling
        knobs = " / ".join(say.name(k) for k in ("steps_per_generation", "generation_batch_size") if say.can_set(k))
        if not say.can_set("steps_per_generation"):  # axolotl: TRL's default, gradient_accumulation_steps, applies
            knobs += f", or fewer {say.name('gradient_accumulation_steps')}"
        advice = f"generate fewer completions at once ({knobs}), or use vLLM"
    else:
        what = (f"the no-grad per-token log-probabilities forward builds [{g.logps_rows} x {g.completion:,} x "
                f"{plan.geometry.vocab:,}] logits, ~{fmt_bytes(size)}")
        advice = ("upgrade TRL to >= 1.15 (fused LM head)" if not g.fused_logps else
                  f"lower {ctx.spelling.name('per_device_train_batch_size')}")
    return what, advice
