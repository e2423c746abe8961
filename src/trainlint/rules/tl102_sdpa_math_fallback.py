"""TL102 sdpa-falls-back-to-math-kernel: fp32 attention inputs on a grouped-query model make SDPA run PyTorch's math
kernel on CUDA, which keeps the whole fp32 score matrix per layer, as eager attention does.

Docs: rules/TL102.md. Kernel dispatch: trainlint/knowledge/sdpa.py. The memory: memory.estimate.fix_saving
(the same figure as `trainlint estimate`'s lever).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainlint.context import FileContext
from trainlint.facts import ModelLoad
from trainlint.knowledge import sdpa
from trainlint.knowledge.models import ModelSpec
from trainlint.memory import fmt_bytes, math_scores_per_layer
from trainlint.rules.base import Rule, rule
from trainlint.rules.fit import known_plan, with_fit_note
from trainlint.rules.tl101_eager_attention import attention_in_effect
from trainlint.rules.tl501_frozen_fp32 import _cast_later, computes_in_16_bit, loaded_in_fp32


@dataclass(frozen=True)
class Fallback:
    fp32: str  # why the attention inputs are fp32
    call: sdpa.Call  # the call transformers makes (enable_gqa, head dim)
    refusals: tuple[str, ...]  # why each fused kernel refuses it


def fp32_inputs(ctx: FileContext, model: ModelLoad) -> str | None:
    """Why q/k/v reach SDPA in fp32 (fp32 weights, a trainer's arguments that are known not to autocast, no
    torch.autocast in the script), or None when they do not or it is not known."""
    args = ctx.main_args
    if args is None or args.call.opaque_kwargs or any(args.get(f).unknown for f in ("bf16", "fp16")):
        return None
    if computes_in_16_bit(ctx, args) is not None or any(True for _ in ctx.facts.calls_to("torch.autocast")):
        return None
    if model.quantization.known and model.quantization.value or model.quantization.unknown:
        return None  # the compute dtype of a quantized model is its own setting
    why = loaded_in_fp32(ctx, model)
    if why is None or _cast_later(ctx, model):
        return None
    return f"{why}, no bf16/fp16 autocast"


def math_fallback(ctx: FileContext, model: ModelLoad, spec: ModelSpec | None) -> Fallback | None:
    """The math-kernel fallback of this model's SDPA attention on CUDA, or None. Assumes a batch without padding (the
    worst case, and what fixed-length or packed blocks give): transformers then passes no mask and lets SDPA take the
    grouped K/V heads (enable_gqa)."""
    if spec is None or not (spec.num_heads and spec.num_kv_heads and spec.head_dim):
        return None
    impl, _why = attention_in_effect(ctx, model, spec)
    if impl != "sdpa":
        return None
    why = fp32_inputs(ctx, model)
    if why is None:
        return None
    call = sdpa.transformers_call("fp32", spec.num_heads, spec.num_kv_heads, spec.head_dim,
                                  ctx.versions.transformers.tuple)
    if sdpa.kernel(call) != sdpa.MATH:
        return None
    refusals = tuple(r for k in (sdpa.FLASH, sdpa.EFFICIENT, sdpa.CUDNN) if (r := sdpa.refusal(k, call)))
    return Fallback(why, call, refusals)


@rule("TL102", "sdpa-falls-back-to-math-kernel", consumer="attention score matrix",
      summary="SDPA at a long sequence length will run its math kernel (fp32 inputs with grouped-query heads), "
              "which materialises the score matrix like eager attention.",
      fix_hint="`bf16=True` (autocast) or `dtype=torch.bfloat16`: no fused SDPA kernel takes fp32 with grouped-query "
               "heads")
def check(self: Rule, ctx: FileContext):
    seq = ctx.seq_len
    if not (seq.known and seq.value >= ctx.settings.long_context):
        return
    for model in ctx.facts.models:
        spec = ctx.spec(model)
        fallback = math_fallback(ctx, model, spec)
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
