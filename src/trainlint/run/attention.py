"""Attention: the implementation a model load runs (requested or the library's default for the targeted
transformers and architecture), and the kernel in effect on CUDA (SDPA's math-kernel fallback included).

Library facts: trainlint/knowledge/libraries.py (default_attention); kernel dispatch: trainlint/knowledge/sdpa.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainlint.context import FileContext
from trainlint.facts import ModelLoad
from trainlint.knowledge import libraries, sdpa
from trainlint.knowledge.models import ModelSpec
from trainlint.run.decided import Decided
from trainlint.run.precision import cast_later, computes_in_16_bit, loaded_in_fp32


def attention_in_effect(ctx: FileContext, model: ModelLoad, spec: ModelSpec | None) -> tuple[str | None, str]:
    """(implementation, why) for a model load; implementation None when it cannot be known."""
    impl = model.attn_implementation
    if impl.known and isinstance(impl.value, str):
        return impl.value, ctx.spelling.setting("attn_implementation", impl.value)
    if impl.unknown:
        return None, "attn_implementation is not statically known"
    if model.call.kw("trust_remote_code").is_(True) and impl.unset:
        # the checkpoint's own modeling code picks its attention (Qwen-7B reads config.use_flash_attn); known only
        # where its config.json says (knowledge/models.py _remote_attention)
        if spec is not None and spec.remote_attention is not None:
            return spec.remote_attention[0], f"trust_remote_code=True: {spec.remote_attention[1]}"
        return None, "trust_remote_code=True: the model's own code chooses its attention"
    if model.use_flash_attention_2.is_(True):
        return "flash_attention_2", "use_flash_attention_2=True"
    if model.output_attentions.is_(True):
        # configuration_utils.py `output_attentions` setter: eager when no implementation was chosen
        return "eager", "output_attentions=True selects eager at load time"
    default = libraries.default_attention(spec.model_type if spec else None, ctx.versions.transformers)
    if default is None:
        return None, "default attention for this model and version not known"
    tv = ctx.versions.transformers.version
    if default == "eager":
        if not ctx.versions.transformers.at_least(*libraries.SDPA_DEFAULT_SINCE):
            return "eager", f"transformers {tv} (< 4.36) uses eager unless flash-attention is chosen"
        if not ctx.versions.transformers.at_least(5):
            return "eager", (f"{spec.model_type} does not declare _supports_sdpa in transformers {tv}, so it loads with "
                             f"eager attention when attn_implementation is unset")
        return "eager", f"{spec.model_type} falls back to eager in transformers {tv} when attn_implementation is unset"
    return default, f"transformers {tv} default"


def requested(ctx: FileContext, model: ModelLoad, spec: ModelSpec | None) -> Decided[str | None]:
    """The implementation in effect as a decision: certain when the load (or its launch) chooses it, assumed when
    it is the library's default for the targeted version, None when not known."""
    impl, why = attention_in_effect(ctx, model, spec)
    written = model.attn_implementation
    if written.known and isinstance(written.value, str):
        return Decided(impl, written.origin, not written.assumed, why)
    if impl is not None and (model.use_flash_attention_2.is_(True) or model.output_attentions.is_(True)):
        flag = model.use_flash_attention_2 if model.use_flash_attention_2.is_(True) else model.output_attentions
        return Decided(impl, flag.origin, True, why)
    return Decided(impl, None, False, why)


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
    if why is None or cast_later(ctx, model):
        return None
    return f"{why}, no bf16/fp16 autocast"


def math_fallback(ctx: FileContext, model: ModelLoad, spec: ModelSpec | None,
                  impl: str | None) -> Fallback | None:
    """The math-kernel fallback of this model's SDPA attention (`impl`, attention_in_effect's) on CUDA, or None.
    Assumes a batch without padding (the worst case, and what fixed-length or packed blocks give): transformers
    then passes no mask and lets SDPA take the grouped K/V heads (enable_gqa)."""
    if spec is None or not (spec.num_heads and spec.num_kv_heads and spec.head_dim):
        return None
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


def kernel(impl: Decided[str | None], fallback: Fallback | None) -> Decided[str]:
    """What the estimator counts: "eager", "sdpa" (any fused kernel: SDPA's fused ones, flash, flex) or "sdpa-math";
    an implementation that is not known is assumed to be SDPA (said in `notes`)."""
    notes = []
    if impl.value is None:
        notes.append(f"attention: {impl.why}; assumed SDPA")
    choice = "eager" if impl.value in ("eager", "paged|eager") else "sdpa"
    if choice == "sdpa" and fallback is not None:
        choice = "sdpa-math"
        notes.append(f"SDPA on CUDA runs the math kernel ({'; '.join(fallback.refusals)}): fp32 scores per layer, "
                     f"assuming batches without padding (TL102)")
    return Decided(choice, impl.span, impl.certain and impl.value is not None, impl.why, tuple(notes))
