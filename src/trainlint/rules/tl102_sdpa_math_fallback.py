"""TL102 sdpa-falls-back-to-math-kernel: fp32 attention inputs on a grouped-query model make SDPA run PyTorch's math
kernel on CUDA, which keeps the whole fp32 score matrix per layer, as eager attention does.

Docs: rules/TL102.md. The fallback is the Run's (trainlint/run/attention.py math_fallback; kernel dispatch:
trainlint/knowledge/sdpa.py). The memory: memory.estimate.fix_saving
(the same figure as `trainlint estimate`'s lever).
"""

from __future__ import annotations

from trainlint.context import FileContext
from trainlint.knowledge.models import ModelSpec
from trainlint.memory import fmt_bytes, math_scores_per_layer
from trainlint.rules.base import Rule, rule
from trainlint.rules.fit import known_plan, with_fit_note
from trainlint.run import resolve


@rule("TL102", "sdpa-falls-back-to-math-kernel", consumer="attention score matrix",
      summary="SDPA at a long sequence length will run its math kernel (fp32 inputs with grouped-query heads), "
              "which materialises the score matrix like eager attention.",
      fix_hint="`bf16=True` (autocast) or `dtype=torch.bfloat16`: no fused SDPA kernel takes fp32 with grouped-query "
               "heads")
def check(self: Rule, ctx: FileContext):
    seq = ctx.seq_len
    if not (seq.known and seq.value >= ctx.settings.long_context):
        return
    run = resolve(ctx)
    for model in ctx.facts.models:
        spec = ctx.spec(model)
        fallback = run.model(model).math_fallback
        if fallback is None:
            continue
        tv = ctx.versions.transformers.version
        cause = (f"fp32 inputs: {fallback.fp32}; transformers {tv} passes enable_gqa=True for the {spec.num_heads} "
                 f"query / {spec.num_kv_heads} K/V heads, and no fused kernel takes that: "
                 f"{'; '.join(fallback.refusals)}")
        message = (f"SDPA falls back to PyTorch's math kernel on CUDA at sequence length {seq.value:,} ({cause}): "
                   f"{_cost(ctx, spec, seq.value)}; load the weights in bf16 (dtype=torch.bfloat16) or set "
                   f"bf16=True (autocast hands SDPA bf16 inputs)")
        diag = self.diagnostic(ctx, model.anchor, message, model.dtype, seq)
        yield with_fit_note(ctx, diag, attention="sdpa")


def _cost(ctx: FileContext, spec: ModelSpec, seq: int) -> str:
    """The score matrix per layer, and what it adds to the run's peak (the estimate's own figure)."""
    from trainlint.memory.estimate import fix_saving

    plan = known_plan(ctx)
    if plan is None or plan.attention != "sdpa-math":
        per_seq = math_scores_per_layer(1, spec.num_heads, seq)
        return (f"it keeps the fp32 score matrix ({spec.num_heads} heads x {seq:,}^2), ~{fmt_bytes(per_seq)} per "
                f"layer per sequence")
    per_layer = math_scores_per_layer(plan.batch, spec.num_heads, seq)
    cost = (f"it keeps the fp32 score matrix (batch {plan.batch} x {spec.num_heads} heads x {seq:,}^2), "
            f"~{fmt_bytes(per_layer)} per layer")
    added = fix_saving(plan, "TL102")
    if added > 0:
        return f"{cost}, ~{fmt_bytes(added)} more at the run's peak than a fused kernel"
    return f"{cost} (under checkpointing one layer at a time, which does not raise this run's peak)"
