"""TL103 flash-attention-not-installed: a load asks for flash_attention_2, and the environment the repository declares
has no flash-attn (nor, where the targeted transformers would load a Hub kernel instead, the `kernels` package): the
lever the user configured to keep attention memory down does not exist in the run.

Docs: rules/TL103.md. Library facts: knowledge/libraries.py FLASH_ATTN_KERNELS_FALLBACK_SINCE / KERNELS_REQUIRED_SINCE;
the declared environment: knowledge/environment.py; LLaMA-Factory's fallback: knowledge/frameworks.py LF_ATTENTION.
The GiB: memory.estimate.attention_bytes of the run's plan with the attention that would run instead.
"""

from __future__ import annotations

from dataclasses import replace

from trainlint.context import FileContext
from trainlint.knowledge import libraries
from trainlint.knowledge.environment import FLASH_ATTN, KERNELS, declared_environment
from trainlint.memory import fmt_bytes
from trainlint.rules.base import Rule, rule
from trainlint.rules.fit import known_plan
from trainlint.run import resolve

FLASH_2 = ("flash_attention_2", "paged|flash_attention_2")


@rule("TL103", "flash-attention-not-installed", consumer="attention score matrix",
      summary="A load requests flash_attention_2, but the environment the repository declares does not install flash-attn: "
              "the load raises, or (LLaMA-Factory) the run quietly uses another attention.",
      fix_hint="add flash-attn to the declared environment, or use `attn_implementation=\"sdpa\"` (fused kernels, no "
               "package)")
def check(self: Rule, ctx: FileContext):
    tv = ctx.versions.transformers
    if not tv.at_least(*libraries.ATTN_IMPLEMENTATION_SINCE["flash_attention_2"]) or \
            tv.at_least(*libraries.KERNELS_REQUIRED_SINCE):
        return  # before 4.36 not read; from 5.25 transformers itself brings `kernels` and loads the Hub kernel
    if ctx.facts.imports_module("flash_attn"):
        return  # the script imports the package: it is installed wherever it runs
    run = resolve(ctx)
    models = [m for m in ctx.facts.models if run.model(m).attention.value in FLASH_2]
    if not models:
        return
    env = declared_environment(ctx.path.parent, ctx.text, ctx.display)
    if env is None or env.names(FLASH_ATTN) is not None:
        return
    hub = tv.at_least(*libraries.FLASH_ATTN_KERNELS_FALLBACK_SINCE)
    if hub and env.names(KERNELS, notes=False) is not None:
        return  # 4.56+: the Hub kernel replaces the package (on CUDA)
    llamafactory = ctx.spelling.name("attn_implementation") == "flash_attn"
    for model in models:
        attention = run.model(model).attention
        spec = ctx.spec(model)
        plan = known_plan(ctx, model)
        if llamafactory:
            instead = libraries.default_attention(spec.model_type if spec else None, tv)
            if instead is None:
                continue
            kind = "eager" if instead in libraries.EAGER else "sdpa"
            cost = _attention_cost(plan, kind)
            if kind == "sdpa" or (plan is not None and not cost):
                continue  # its fused kernels keep what flash-attention keeps: nothing lost
            what = (f": LLaMA-Factory logs \"FlashAttention-2 is not installed.\" and loads with the transformers "
                    f"{tv.version} default for {spec.model_type}, eager attention (model/model_utils/attention.py "
                    f"configure_attn_implementation)")
            at_stake = (f"its score matrices keep ~{fmt_bytes(cost)}" if cost else
                        "its score matrices grow with batch x heads x sequence^2 (model size or batch not known)")
        else:
            what = ((" nor the `kernels` package, from which transformers >= 4.56 would load the Hub kernel "
                     "kernels-community/flash-attn instead" if hub else "")
                    + f": transformers {tv.version} raises ImportError at load (\"the package flash_attn seems to be "
                      f"not installed\", modeling_utils.py), so the run stops before its first step")
            cost = _attention_cost(plan, "eager")
            at_stake = (f"a fallback to eager attention would keep ~{fmt_bytes(cost)} of score matrices, what "
                        f"flash-attention is there to save" if cost else "")
        advice = f"add flash-attn to {env.files[0]}"
        if libraries.attention_supported(spec.model_type if spec else None, "sdpa", tv) is not False:
            sdpa = ctx.spelling.advise("attn_implementation", "sdpa", "fused SDPA kernels, no package to install")
            advice += f", or {sdpa}"
        message = (f"{attention.why} requests flash-attention, but the environment this repository declares "
                   f"({env.where}) has no flash-attn{what}" + (f"; {at_stake}" if at_stake else "")
                   + f"; {advice}")
        span = attention.span if attention.span is not None and not attention.span.file else model.anchor
        yield self.diagnostic(ctx, span, message, model.attn_implementation, model.use_flash_attention_2)


def _attention_cost(plan, kind: str) -> int:
    """The attention memory of the run's plan with `kind` ("eager" | "sdpa") in place of flash-attention
    (memory.estimate.attention_bytes); 0 when the plan is not known."""
    if plan is None:
        return 0
    from trainlint.memory.estimate import attention_bytes

    return attention_bytes(replace(plan, attention=kind))
