"""TL101 eager-attention-at-long-context: eager attention keeps batch x heads x seq^2 scores per layer.

Docs: rules/TL101.md. The attention in effect is the Run's (trainlint/run/attention.py; library facts:
trainlint/knowledge/libraries.py default_attention).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace as replace_fields

from trainlint.context import FileContext
from trainlint.diagnostics import ATTENTION, Setting, Fix
from trainlint.edits import literal_in, launch_value_fix, make_fix, quote_of, replace, set_keyword
from trainlint.facts import ModelLoad
from trainlint.knowledge import libraries
from trainlint.memory import attention_scores_per_layer, dtype_bytes, fmt_bytes
from trainlint.rules.base import Rule, rule
from trainlint.rules.fit import peak_saving, with_fit_note
from trainlint.run import resolve
from trainlint.run.vision import sequence_with_images


def _is_eager(impl: str) -> bool:
    return impl in libraries.EAGER


@rule("TL101", "eager-attention-at-long-context", consumer="attention score matrix",
      summary="A model trains with eager attention at a long sequence length: it materialises the full "
              "[batch x heads x seq x seq] score matrix.",
      fix_hint='`attn_implementation="sdpa"` (or `flash_attention_2`; `flex_attention` for soft-capped Gemma 2)',
      fix="safe or unsafe", verifies="memory")
def check(self: Rule, ctx: FileContext):
    run = resolve(ctx)
    # a vision-language sample with no max length is as long as its image tokens (run/vision.py), an assumption
    seq = sequence_with_images(ctx.seq_len, run.images) if ctx.seq_len.unset else ctx.seq_len
    if not (seq.known and seq.value >= ctx.settings.long_context):
        return
    for model in ctx.facts.models:
        spec = ctx.spec(model)
        attention = run.model(model).attention
        impl, why = attention.value, attention.why
        if impl is None or not _is_eager(impl):
            continue
        softcapped = spec is not None and spec.model_type in libraries.SOFTCAPPED
        kind = spec.model_type if spec is not None else None
        traits = dict(softmax_fp32=kind not in libraries.EAGER_SOFTMAX_MODEL_DTYPE,
                      dropout=kind in libraries.ATTENTION_DROPOUT_BY_DEFAULT)
        if spec is not None and spec.remote_attention is not None and why.startswith("trust_remote_code=True"):
            # the checkpoint's own code chooses from its config, not from attn_implementation
            plan = Plan(None, False, 'the checkpoint\'s own code chooses its attention: pass attn_config={"attn_impl": '
                                     '"flash"} in the model\'s config (its flash-attn path; needs the flash-attn '
                                     'package and a CUDA GPU) or shorten the sequence; no fix offered')
        else:
            plan = plan_fix(ctx, spec.model_type if spec else None, softcapped)
        batch = ctx.batch
        heads = spec.num_heads if spec else None
        size = dtype_bytes(model.dtype.value if model.dtype.known and isinstance(model.dtype.value, str) else None)
        if heads and batch.known:
            per_layer = attention_scores_per_layer(batch.value, heads, seq.value, size, softcapped, **traits)
            cost = (f"the score matrix (batch {batch.value} x {heads} heads x {seq.value:,}^2) keeps "
                    f"~{fmt_bytes(per_layer)} per layer")
            if spec.num_layers and ctx.gradient_checkpointing is False:
                cost += f", ~{fmt_bytes(per_layer * spec.num_layers)} over {spec.num_layers} layers"
            cost += peak_saving(ctx, model, "TL101", "SDPA")
        elif heads:
            per_seq = attention_scores_per_layer(1, heads, seq.value, size, softcapped, **traits)
            cost = f"the score matrix ({heads} heads x {seq.value:,}^2) keeps ~{fmt_bytes(per_seq)} per layer per sequence"
        else:
            cost = f"the score matrix grows with batch x heads x {seq.value:,}^2 per layer (model size unknown)"
        # a plan with a target says "set attn_implementation=..."; the file's front end may say it its own way
        advice = ctx.spelling.lever("attention", plan.advice) if plan.target is not None else plan.advice
        diag = self.diagnostic(
            ctx, model.anchor,
            f"eager attention at sequence length {seq.value:,} ({why}): {cost}; "
            f"{advice}",
            model.attn_implementation, seq,
        )
        diag = replace_fields(diag, setting=Setting("attn_implementation", plan.target, not plan.support_unknown, ATTENTION)
                              if plan.target else None)
        if seq.assumed:
            diag = replace_fields(diag, message=f"{diag.message} (assuming {'; '.join(seq.assumed)})",
                                  assumptions=tuple(dict.fromkeys(diag.assumptions + seq.assumed)))
        yield with_fit_note(ctx, diag.with_fix(_fix(ctx, model, plan)), attention="sdpa")


@dataclass(frozen=True)
class Plan:
    """What TL101 may write for the targeted transformers and architecture: `target` None means no fix."""

    target: str | None
    safe: bool
    advice: str  # the message's last clause: what to do, and why there is no fix or why it is unsafe
    support_unknown: bool = False  # whether the architecture takes `target` in the targeted version is not known


def plan_fix(ctx: FileContext, model_type: str | None, softcapped: bool) -> Plan:
    """The attention the fix sets, valid for the file's transformers (libraries.attention_supported): the keyword
    from 4.36, each value from its release, SDPA only on architectures that declare it (an explicit unsupported
    request raises at load), never SDPA on a softcapped architecture (it drops the softcap: different numerics)."""
    tv = ctx.versions.transformers
    if not tv.at_least(*libraries.SDPA_DEFAULT_SINCE):
        return Plan(None, False, f"attn_implementation needs transformers >= 4.36 and this file targets {tv.version}: "
                                 f"upgrade it, or load with use_flash_attention_2=True (needs the flash-attn package "
                                 f"and a CUDA GPU); no fix offered")
    target = ctx.settings.fix_attention
    if softcapped and target == "sdpa":
        target = "flex_attention"
    instead = ('"flash_attention_2" or "flex_attention" (SDPA cannot express its logit softcap)' if softcapped
               else '"sdpa" or "flash_attention_2"')
    since = libraries.ATTN_IMPLEMENTATION_SINCE.get(target)
    if since is not None and not tv.at_least(*since):
        return Plan(None, False, f"set attn_implementation={instead} ({target} needs transformers >= "
                                 f"{'.'.join(map(str, since))}; this file targets {tv.version}, so no fix is offered)")
    arch = model_type or "this model"
    supported = libraries.attention_supported(model_type, target, tv)
    if supported is False and target == "sdpa":
        flash = libraries.attention_supported(model_type, "flash_attention_2", tv)
        if flash:
            return Plan("flash_attention_2", False,
                        f'set attn_implementation="flash_attention_2" ({arch} has no SDPA path in transformers '
                        f'{tv.version}; flash-attention needs the flash-attn package and a CUDA GPU)')
        paths = ("neither an SDPA nor a flash-attention path" if flash is False else
                 "no SDPA path (and whether flash_attention_2 loads for it is not known)")
        return Plan(None, False, f"{arch} has {paths} in transformers {tv.version} (_supports_sdpa): "
                                 f"upgrade transformers or shorten the sequence; no fix offered")
    if supported is False:
        return Plan(None, False, f"{arch} does not support {target} in transformers {tv.version}; no fix offered")
    if supported is None:
        return Plan(target, False, f"set attn_implementation={instead} (whether {arch} supports {target} in "
                                   f"transformers {tv.version} is not known, so the fix is unsafe)", True)
    return Plan(target, target == "sdpa" and not softcapped, f"set attn_implementation={instead}")


def _fix(ctx: FileContext, model: ModelLoad, plan: Plan) -> Fix | None:
    """Ruff's contract: SDPA computes the same attention as eager on an architecture that declares it, so
    switching is safe; anything that needs an extra package, is not known to load for this architecture, or
    drops outputs the script asked for (output_attentions) is unsafe."""
    target = plan.target
    if target is None:
        return None  # no valid edit for the targeted version: the message says what is needed
    safe = plan.safe
    q = quote_of(ctx.text, model.call.kw_span("attn_implementation"))  # the literal's own quotes, else the file's
    value = f"{q}{target}{q}"
    applicability = "safe" if safe else "unsafe"
    message = f"Set attn_implementation={value}"
    impl = model.attn_implementation
    if impl.known and impl.origin is not None and impl.origin.file:  # written in a launcher, a recipe, args file
        return launch_value_fix(applicability, message, impl.origin, target)
    if model.kind == "trainer_string":
        return None  # lives inside model_init_kwargs; not edited
    if impl.known:
        if impl.via == "literal":
            span = model.call.kw_span("attn_implementation")
            if span is not None and span.file and impl.origin is not None and not impl.origin.file:
                # the load is in a followed module; the literal is what this script passes it
                literal = literal_in(ctx.text, impl.origin)
                return make_fix(applicability, message, replace(literal, value)) if literal else None
            return make_fix(applicability, message, replace(span, f"attn_implementation={value}")) if span else None
        if impl.via in ("constant", "argparse default", "dataclass default") and impl.origin is not None:
            return make_fix(applicability, f"{message} where the value is defined ({impl.via})",
                            replace(impl.origin, value))
        return None
    if model.output_attentions.is_(True):
        span = model.call.kw_span("output_attentions")
        if span is None:
            return None
        return make_fix("unsafe", f"{message} instead of output_attentions=True (attention weights are no longer "
                                  f"returned)", replace(span, f"attn_implementation={value}"))
    edits = set_keyword(model.call, "attn_implementation", value, ctx.text)
    return make_fix(applicability, message, *edits) if edits else None
