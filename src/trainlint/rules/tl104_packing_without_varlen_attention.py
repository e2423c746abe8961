"""TL104 packing-without-varlen-attention: padding-free (flattened) batches with an attention that does not read
the sequence boundaries as varlen: eager attention keeps the scores of one (batch x seq)-long row, batch times the
padded batch's; SDPA where transformers drops the boundaries runs the row as one causal sequence.

Docs: rules/TL104.md. Library facts: knowledge/packing.py (TRL's SFTTrainer per release, transformers'
DataCollatorWithFlattening and masking_utils). The GiB: memory.estimate.attention_bytes of the run's plan, as one row
of batch x seq tokens vs the padded batch.
"""

from __future__ import annotations

import re
from dataclasses import replace

from trainlint.context import FileContext
from trainlint.facts import Value
from trainlint.knowledge import libraries, packing
from trainlint.memory import fmt_bytes
from trainlint.rules.base import Rule, rule
from trainlint.rules.fit import known_plan
from trainlint.run import resolve

FLATTENING = ("transformers.DataCollatorWithFlattening",)


def _flag(value: Value) -> bool | None:
    if value.unset:
        return False
    return value.value if value.known and isinstance(value.value, bool) else None


def _strategy(value: Value) -> str | None:
    return value.value if value.known and isinstance(value.value, str) else None


@rule("TL104", "packing-without-varlen-attention", consumer="attention score matrix",
      summary="Padding-free (flattened) batches from TRL's packing / padding_free or DataCollatorWithFlattening with an "
              "attention that does not take the sequence boundaries as varlen: eager keeps the scores of one "
              "(batch x seq)-long row; SDPA, where transformers drops the boundaries, mixes the sequences.",
      fix_hint='`attn_implementation="flash_attention_2"` (varlen kernels), or `padding_free=False` / '
               '`packing_strategy="wrapped"`')
def check(self: Rule, ctx: FileContext):
    tv = ctx.versions.transformers
    sources = list(_trl_sources(ctx)) + list(_collator_sources(ctx))
    if not sources:
        return
    run = resolve(ctx)
    for model in ctx.facts.models:
        model_run = run.model(model)
        attention = model_run.attention
        impl = attention.value
        if impl not in ("eager", "sdpa"):
            continue  # flash / flex keep the boundaries; an unknown attention decides nothing
        kernel = model_run.kernel.value
        for flattened, span, deciding, trl_off in sources:
            if callable(flattened):
                flattened = flattened(impl)
            if not isinstance(flattened, packing.Flattened):
                continue
            cache_off = trl_off or _cache_off(ctx, model)
            kept = packing.boundaries_kept(tv.tuple, flattened.positions, cache_off is not None)
            if impl == "sdpa" and kept.startswith("mask") and kernel != "sdpa-math":
                continue  # the fused kernel with the same-sequence mask: the boundaries hold, memory stays linear
            if kept.startswith("mask") and ctx.batch.known and ctx.batch.value == 1:
                continue  # one sequence per micro-batch: the row is no longer than a padded one, and kept apart
            message = _message(ctx, model, impl, kernel, attention.why, flattened, kept, tv.version, cache_off)
            diag = self.diagnostic(ctx, span, message, *deciding, model.attn_implementation)
            assumed = []
            if not attention.certain:
                assumed.append(f"the attention is {impl}, {attention.why}: a default the load could override")
            if kept == "cache":
                assumed.append("the model's config keeps use_cache=True, its default: nothing in the script turns "
                               "it off")
            if assumed:
                diag = replace(diag, message=f"{diag.message} (assuming {'; '.join(assumed)})",
                               assumptions=tuple(dict.fromkeys(diag.assumptions + tuple(assumed))))
            yield diag


_CACHE_OFF_TEXT = re.compile(r"\buse_cache\s*=\s*False\b")


def _cache_off(ctx: FileContext, model) -> str | None:
    """Why the training forward runs without a cache (knowledge/packing.py: the packed format is looked for only
    then), or None when the model config's default use_cache=True stands."""
    args = ctx.main_args
    if ctx.versions.transformers.at_least(*packing.TRAINER_CACHE_OFF_SINCE):
        if args is None or not args.get("use_cache").is_(True):
            return (f"transformers {ctx.versions.transformers.version}'s Trainer sets the config's use_cache from "
                    f"TrainingArguments.use_cache (default False)")
    if model.call.kw("use_cache").is_(False) or _CACHE_OFF_TEXT.search(ctx.text):
        return "the script sets use_cache=False"
    return None


def _trl_sources(ctx: FileContext):
    """(flattened-or-function-of-attention, span, deciding values) for an SFTTrainer run's arguments."""
    args = ctx.main_args
    if args is None or args.class_name != "SFTConfig" or args.call.opaque_kwargs:
        return
    if not any(t.class_name == "SFTTrainer" or t.trl_base == "SFTTrainer" for t in ctx.facts.trainers):
        return
    trl = ctx.versions.trl.tuple
    free, pack, strategy = args.get("padding_free"), args.get("packing"), args.get("packing_strategy")
    if strategy.unknown:
        return
    span = (args.call.kw_span("padding_free") if free.is_(True) else args.call.kw_span("packing")) or args.call.span

    def decide(impl: str):
        return packing.trl_flattens(trl, _flag(free), _flag(pack), _strategy(strategy), impl)

    off = (f"trl {ctx.versions.trl.version}'s SFTTrainer.compute_loss passes use_cache=False"
           if ctx.versions.trl.at_least(*packing.TRL_CACHE_OFF_SINCE) else None)
    yield decide, span, (free, pack, strategy), off


def _collator_sources(ctx: FileContext):
    """transformers' DataCollatorWithFlattening passed to a Trainer: one row, position_ids unless turned off."""
    if not ctx.versions.transformers.at_least(*packing.FLATTENING_COLLATOR_SINCE) or not ctx.facts.trainers:
        return
    for call in ctx.facts.calls_to(*FLATTENING):
        positions = call.kw("return_position_ids")
        if positions.unknown:
            continue
        keeps = not positions.is_(False)
        yield (packing.Flattened("DataCollatorWithFlattening()", keeps,
                                 "it concatenates the micro-batch into one row" +
                                 (" with position_ids restarting per sequence and no attention_mask" if keeps else
                                  " without position_ids (return_position_ids=False) or attention_mask")),
               call.span, (positions,), None)


def _message(ctx: FileContext, model, impl: str, kernel: str, why: str, flattened: packing.Flattened, kept: str,
             tv: str, cache_off: str | None) -> str:
    plan = known_plan(ctx, model)
    batch = ctx.batch.value if ctx.batch.known else None
    seq = ctx.seq_len.value if ctx.seq_len.known else None
    row = (f"one row of up to {batch} x {seq:,} = {batch * seq:,} tokens" if batch and seq else
           "one row of the whole micro-batch's tokens")
    named = why if impl in why else f"{why} ({impl})"
    head = f"{flattened.why} flattens each micro-batch into {row}: {flattened.cite}; with {named}"
    if kept == "ignored":
        what = (f", transformers {tv} runs the row as ONE causal sequence (no position_ids reach it, positions run "
                f"0..N-1)" if not flattened.positions else
                f", transformers {tv} reads the position_ids for the rotary positions only and masks the row causally "
                f"as one sequence (_update_causal_mask, before 4.53's find_packed_sequence_indices)")
        what += ": each sequence attends to the ones packed before it (cross-contamination)"
    elif kept == "cache":
        what = (f", transformers {tv} looks for packed sequences in the position_ids only when the forward has no "
                f"cache, and the Trainer leaves the config's use_cache=True (it turns it off from 5.0), so the model "
                f"builds a DynamicCache and masks the row causally as one sequence: each sequence attends to the "
                f"ones packed before it (cross-contamination)")
    else:
        torch = ", with torch >= 2.6" if kept != "mask" else ""
        what = (f", transformers {tv} keeps the sequences apart with a dense same-sequence mask built from the "
                f"position_ids (masking_utils.find_packed_sequence_indices{torch}; {cache_off})")
    cost = ""
    counted = "sdpa-math" if kernel == "sdpa-math" else impl
    if counted != "sdpa" and plan is not None and plan.batch > 1:
        from trainlint.memory.estimate import attention_bytes

        padded = attention_bytes(replace(plan, attention=counted))
        flat = attention_bytes(replace(plan, attention=counted, batch=1, seq=plan.batch * plan.seq))
        kind = "eager" if counted == "eager" else "SDPA's math kernel (fp32)"
        cost = (f"; {kind} keeps ~{fmt_bytes(flat)} of scores and mask for that row, {plan.batch}x the "
                f"~{fmt_bytes(padded)} of {plan.batch} padded rows of {plan.seq:,}: the padding the user removes is "
                f"paid back {plan.batch}x in attention memory")
    elif counted != "sdpa" and plan is not None:
        cost = "; at one sequence per micro-batch the row is no longer than a padded one: no extra attention memory"
    elif counted != "sdpa":
        cost = "; its scores grow with (batch x seq)^2 per layer instead of batch x seq^2 (model or batch not known)"
    else:
        cost = "; SDPA's fused kernel keeps memory linear, so the padding-free saving is real but the loss mixes samples"
    advice = ctx.spelling.advise("attn_implementation", "flash_attention_2", "its varlen kernel reads the boundaries")
    spec = ctx.spec(model)
    if libraries.attention_supported(spec.model_type if spec else None, "flash_attention_2",
                                     ctx.versions.transformers) is False:
        advice = f"this architecture has no flash-attention path in transformers {tv}: shorten the micro-batch"
    return f"{head}{what}{cost}; {advice}, or train without padding-free batches"
