"""TL301 unfused-cross-entropy-on-large-vocabulary: the loss materialises batch x seq x vocab logits.

Docs: rules/TL301.md. Library facts: trainlint/knowledge/libraries.py (sft_loss_is_chunked).
"""

from __future__ import annotations

import re

from trainlint.context import FileContext
from trainlint.edits import make_fix, set_keyword
from trainlint.diagnostics import Span
from trainlint.facts import Call, ModelLoad, TrainerCall
from trainlint.knowledge import libraries
from trainlint.knowledge.heads import computes_vocab_logits
from trainlint.memory import dtype_bytes, fmt_bytes, logits_bytes, loss_peak_bytes
from trainlint.rules.base import Rule, rule
from trainlint.rules.fit import with_fit_note

_LIGER_CALL = re.compile(r"^(apply_liger_kernel_to_\w+|_apply_liger_kernel_to_instance|LigerFusedLinearCrossEntropyLoss"
                         r"|AutoLigerKernelForCausalLM)$")
_CCE_CALL = {"cce_patch", "linear_cross_entropy", "LinearCrossEntropy"}
_LIGER_FIX = "set use_liger_kernel=True (needs the liger-kernel package and a CUDA GPU)"


def _liger_fix(ctx: FileContext) -> str:
    if ctx.versions.transformers.at_least(*libraries.LIGER_FIELD_SINCE):
        return _LIGER_FIX
    return (f"use_liger_kernel needs transformers >= 4.45 and this file targets {ctx.versions.transformers.version}: "
            f"upgrade it, or patch the model with liger-kernel's apply_liger_kernel_to_*() (needs a CUDA GPU)")


def fused_loss_applied(ctx: FileContext) -> bool:
    """Liger's fused linear cross-entropy or cut-cross-entropy is switched on somewhere in the script."""
    for call in ctx.facts.calls:
        if _LIGER_CALL.match(call.short) or (call.short == "from_pretrained" and "AutoLiger" in call.qualname):
            flce = call.kw("fused_linear_cross_entropy")
            if not flce.is_(False):
                return True
        if call.short in _CCE_CALL:
            return True
    return ctx.facts.imports_module("cut_cross_entropy") and any(
        q.endswith(("cce_patch", "linear_cross_entropy")) for _, q in ctx.facts.imports)


def _cost(ctx: FileContext, model: ModelLoad, vocab: int) -> str:
    size = 4 if model.dtype.known and dtype_bytes(str(model.dtype.value), 2) == 4 else 2
    label = "fp32" if size == 4 else "bf16"
    seq, batch = ctx.seq_len, ctx.batch
    spec = ctx.spec(model)
    # a LoRA script freezes the LM head, which changes what the loss keeps at peak (memory.loss_bytes_per_element)
    head = dict(trainable_head=not ctx.uses_peft, softcap=spec is not None and spec.model_type in libraries.SOFTCAPPED)
    if seq.known and batch.known:
        shape = f"[{batch.value} x {seq.value:,} x {vocab:,}]"
        first = fmt_bytes(logits_bytes(batch.value, seq.value, vocab, size))
        peak = fmt_bytes(loss_peak_bytes(batch.value, seq.value, vocab, size, **head))
        if size == 2:
            fp32 = fmt_bytes(logits_bytes(batch.value, seq.value, vocab, 4))
            return (f"the {shape} logits are ~{first} in {label} plus ~{fp32} for the fp32 copy the loss makes, "
                    f"~{peak} at peak")
        return f"the {shape} logits are ~{first} in {label}, ~{peak} at peak with the loss"
    per_token = fmt_bytes(loss_peak_bytes(1, 1, vocab, size, **head))
    return f"the logits cost ~{per_token} per token at peak ({vocab:,} x {loss_peak_bytes(1, 1, 1, size, **head)} bytes)"


def _diagnose(self: Rule, ctx: FileContext, model: ModelLoad | None, span: Span, what: str, fix: str):
    if model is not None and not computes_vocab_logits(model.class_name, model.kind):
        return None  # a classification / QA head (or none): its logits are num_labels wide, not the vocabulary
    spec = ctx.spec(model) if model is not None else None
    vocab = spec.vocab_size if spec is not None else None
    if vocab is None or vocab < ctx.settings.large_vocab:
        return None
    return self.diagnostic(ctx, span, f"{what} on a {vocab:,}-token vocabulary: {_cost(ctx, model, vocab)}; {fix}",
                           model.model_id if model is not None else None)


def _override_diagnostic(self: Rule, ctx: FileContext, trainer: TrainerCall):
    """The repository's own trainer overrides the loss: it decides, whatever the base class would do."""
    kind, method, span = trainer.loss_override
    if kind != "full":
        return None  # fused (Liger / cut-cross-entropy), or an override that is not read: say nothing
    return _diagnose(self, ctx, ctx.model_for(trainer.model_variable), span,
                     f"{trainer.subclass}.{method} computes a cross-entropy over the model's full logits",
                     "compute the loss with a fused linear cross-entropy (Liger's LigerFusedLinearCrossEntropyLoss or "
                     "cut-cross-entropy's linear_cross_entropy) on the hidden states, or in chunks")


def _trainer_diagnostic(self: Rule, ctx: FileContext, trainer: TrainerCall):
    if trainer.loss_override is not None:
        return _override_diagnostic(self, ctx, trainer)
    args = ctx.trainer_args(trainer)
    if args is None and ctx.trainer_args_opaque(trainer):
        return None  # arguments come from the command line or elsewhere: use_liger_kernel may be set there
    if args is not None:
        liger = args.get("use_liger_kernel")
        if liger.is_(True) or liger.unknown or args.call.opaque_kwargs:
            return None
    model = ctx.model_for(trainer.model_variable)
    if trainer.class_name in ("Trainer", "Seq2SeqTrainer"):
        diag = _diagnose(self, ctx, model, trainer.call.span, f"{trainer.class_name} computes an unfused cross-entropy",
                         _liger_fix(ctx))
        if diag is None or args is None:
            return diag
        # Unsafe: Liger needs the liger-kernel package and a CUDA GPU, and its kernels are not bit-identical.
        if not ctx.versions.transformers.at_least(*libraries.LIGER_FIELD_SINCE):
            return diag  # no use_liger_kernel field before transformers 4.45: no fix
        edits = set_keyword(args.call, "use_liger_kernel", "True", ctx.text)
        return diag.with_fix(make_fix("unsafe", "Set use_liger_kernel=True (needs liger-kernel and a CUDA GPU)",
                                      *edits) if edits else None)
    if trainer.class_name != "SFTTrainer":
        return None  # other TRL trainers: their loss path per version was not checked (rules/TL301.md)
    trl = ctx.versions.trl
    chunked, forced_by = sft_loss(ctx, trainer, args)
    if chunked is None:
        return None
    if chunked:
        if forced_by is None:
            return None
        return _diagnose(self, ctx, model, trainer.call.span,
                         f"SFTTrainer builds the full logits because of {forced_by}", "drop it to keep TRL's chunked loss")
    fix = ('set loss_type="chunked_nll"' if trl.at_least(1, 4) else "upgrade TRL to >= 1.15 (chunked loss by default)"
           ) + " or " + _liger_fix(ctx)
    return _diagnose(self, ctx, model, trainer.call.span,
                     f"SFTTrainer in TRL {trl.version} computes an unfused cross-entropy", fix)


def sft_loss(ctx: FileContext, trainer: TrainerCall, args) -> tuple[bool | None, str | None]:
    """(whether TRL's SFT loss is chunked for this version and config, what forces full logits back)."""
    loss_type = args.get("loss_type") if args is not None else None
    if loss_type is not None and loss_type.unknown:
        return None, None
    chunked = libraries.sft_loss_is_chunked(ctx.versions.trl, loss_type.get(None) if loss_type is not None else None,
                                            False)
    if not chunked:
        return chunked, None
    smoothing = args.get("label_smoothing_factor") if args is not None else None
    if trainer.call.has_kw("compute_loss_func"):
        return True, "compute_loss_func"
    if smoothing is not None and smoothing.known and isinstance(smoothing.value, (int, float)) and smoothing.value > 0:
        return True, "label_smoothing_factor > 0"
    return True, None


def loss_path(ctx: FileContext) -> str:
    """How the training loss treats the logits: "liger" (fused), "chunked" (TRL) or "full"."""
    if fused_loss_applied(ctx):
        return "liger"
    for trainer in ctx.facts.trainers:
        args = ctx.trainer_args(trainer)
        if args is not None and args.get("use_liger_kernel").is_(True):
            return "liger"
        if trainer.class_name == "SFTTrainer":
            chunked, forced_by = sft_loss(ctx, trainer, args)
            if chunked and forced_by is None:
                return "chunked"
    return "full"


def _manual_loss_calls(ctx: FileContext) -> list[Call]:
    model_vars = {m.variable for m in ctx.facts.models if m.variable}
    model_vars |= {c.target for c in ctx.facts.calls if c.short == "get_peft_model" and c.target}
    out = []
    for call in ctx.facts.calls:
        if call.short in ("cross_entropy", "CrossEntropyLoss") and ctx.facts.logits_accessed:
            out.append(call)
        elif call.has_kw("labels") and call.receiver is None and call.qualname in model_vars:
            out.append(call)
    return out


@rule("TL301", "unfused-cross-entropy-on-large-vocabulary", "logits and loss",
      "Use a fused/chunked loss: use_liger_kernel=True, TRL's chunked SFT loss, or cut-cross-entropy.")
def check(self: Rule, ctx: FileContext):
    if fused_loss_applied(ctx):
        return
    for trainer in ctx.facts.trainers:
        diag = _trainer_diagnostic(self, ctx, trainer)
        if diag is not None:
            yield with_fit_note(ctx, diag, loss="liger")
    if ctx.facts.trainers:
        return
    for call in _manual_loss_calls(ctx)[:1]:
        what = ("the loss is computed on the model's full logits" if call.short in ("cross_entropy", "CrossEntropyLoss")
                else "the model computes its loss from full logits (labels=)")
        diag = _diagnose(self, ctx, ctx.model_for(None if call.short in ("cross_entropy", "CrossEntropyLoss")
                                                     else call.qualname), call.span, what,
                         "use a fused linear cross-entropy (Liger's LigerFusedLinearCrossEntropyLoss or "
                         "cut-cross-entropy's linear_cross_entropy) or compute the loss in chunks")
        if diag is not None:
            yield diag
