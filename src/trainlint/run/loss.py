"""The loss path: how the training loss treats the vocabulary logits, for the targeted library versions.

"liger" (Liger's fused linear cross-entropy or cut-cross-entropy: no logits), "chunked" (TRL's chunked SFT loss,
TRL >= 1.15's fused LM head, the chunked distillation loss), "chunked-upcast" (axolotl's chunked_cross_entropy: the
full logits in the compute dtype, their fp32 copy one chunk at a time) or "full" (the [batch x seq x vocab] logits
and the loss's fp32 copy). Library facts: trainlint/knowledge/libraries.py (sft_loss_is_chunked), knowledge/trl_trainers.py
(per TRL trainer and version: full logits, rows per example, the reference / teacher model, the fused flags).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainlint.context import FileContext
from trainlint.facts import TrainerCall
from trainlint.facts.values import UNSET
from trainlint.knowledge import libraries, trl_trainers
from trainlint.run.decided import Decided

_LIGER_CALL = re.compile(r"^(apply_liger_kernel_to_\w+|_apply_liger_kernel_to_instance|LigerFusedLinearCrossEntropyLoss"
                         r"|AutoLigerKernelForCausalLM)$")
_CCE_CALL = {"cce_patch", "linear_cross_entropy", "LinearCrossEntropy"}


def fused_loss_applied(ctx: FileContext) -> bool:
    """Liger's fused linear cross-entropy or cut-cross-entropy is switched on somewhere in the script."""
    return _fused_call(ctx) is not None or (ctx.facts.imports_module("cut_cross_entropy") and any(
        q.endswith(("cce_patch", "linear_cross_entropy")) for _, q in ctx.facts.imports))


def _fused_call(ctx: FileContext):
    for call in ctx.facts.calls:
        if (_LIGER_CALL.match(call.short) or (call.short == "from_pretrained" and "AutoLiger" in call.qualname)) \
                and call.in_library("liger_kernel"):
            flce = call.kw("fused_linear_cross_entropy")
            if not flce.is_(False):
                return call
        if call.short in _CCE_CALL and call.in_library("cut_cross_entropy"):
            return call
    return None


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


def row_flags(ctx: FileContext, trainer: TrainerCall) -> tuple[str, ...]:
    """The arguments that switch a TRL trainer to its fused loss (knowledge/trl_trainers.py, per version)."""
    row = trl_trainers.loss_row(trainer.class_name, ctx.versions.trl)
    return row.flags if row is not None else ()


def liger_does_nothing(ctx: FileContext, trainer: TrainerCall) -> str | None:
    """Why `use_liger_kernel=True` patches nothing for this trainer's model, or None (it does, or it is not known):
    transformers' Trainer hands the model to liger's `_apply_liger_kernel_to_instance`, which returns without a
    patch for a model type the targeted liger-kernel release has no kernels for (knowledge/liger.py)."""
    if trainer.class_name not in ("Trainer", "Seq2SeqTrainer", "SFTTrainer"):
        return None
    model = ctx.model_for(trainer.model_variable)
    spec = ctx.spec(model) if model is not None else None
    model_type = spec.model_type if spec is not None else None
    from trainlint.knowledge import liger

    version, why = liger.release(ctx.path.parent)
    if liger.patches(model_type, version) is not False:
        return None
    first = liger.first_release(model_type)
    later = f"; liger-kernel >= {first} patches it" if first else ""
    return (f"use_liger_kernel=True does nothing for model type {model_type}: liger-kernel {version} ({why}) has no "
            f"kernels for it (monkey_patch.py MODEL_TYPE_TO_APPLY_LIGER_FN), so the model's own loss runs on the full "
            f"logits{later}")


def _liger_not_the_loss(ctx: FileContext, trainer: TrainerCall) -> str | None:
    """A TRL trainer whose loss reads `outputs.logits` in this version and whose fused flag is not
    use_liger_kernel (knowledge/trl_trainers.py LOSS: GRPO 0.17-0.24, DPO 0.19-0.24 use `use_liger_loss`; ORPO, CPO,
    PPO, RLOO have none): use_liger_kernel=True only patches the model's layers (transformers' Trainer), the forward
    runs without labels and builds the full logits (issue 27: open-r1's GRPO recipes on TRL 0.18)."""
    if trainer.library != "trl":
        return None
    row = trl_trainers.loss_row(trainer.class_name, ctx.versions.trl)
    if row is None or not row.full_logits or "use_liger_kernel" in row.flags:
        return None
    return (f"use_liger_kernel=True does not fuse {trainer.class_name}'s loss in TRL {ctx.versions.trl.version}: "
            f"its forward reads the full logits" + (f" (the fused loss is {row.flags[0]}=True)" if row.flags else ""))


def chunked_upcast(ctx: FileContext) -> tuple[Decided[str], int] | None:
    """axolotl's chunked cross-entropy patch (knowledge/libraries.py CHUNKED_UPCAST_PATCH) under a transformers
    Trainer, whose loss is the model's own (the patched ForCausalLMLoss): (the path, its number of chunks); else
    None (no patch, or a TRL trainer whose loss does not go through it)."""
    if not ctx.facts.trainers or any(t.library == "trl" for t in ctx.facts.trainers):
        return None
    for call in ctx.facts.calls:
        if call.is_api(libraries.CHUNKED_UPCAST_PATCH):
            n = call.kw("num_output_chunks")
            chunks = n.value if n.known and isinstance(n.value, int) and not isinstance(n.value, bool) and \
                n.value > 0 else libraries.CHUNKED_UPCAST_CHUNKS
            return Decided("chunked-upcast", call.span, True,
                           f"axolotl's chunked_cross_entropy (the fp32 upcast in {chunks} chunks)"), chunks
    return None


def loss_path(ctx: FileContext) -> Decided[str]:
    """How the training loss treats the logits: "liger" (fused), "chunked" (TRL), "chunked-upcast" (axolotl) or "full"; `span` is where the
    deciding setting is written (None for a library default); `certain` False when the path is the targeted
    version's default (the caller could pass another loss_type)."""
    call = _fused_call(ctx)
    if call is not None:
        return Decided("liger", call.span, True, f"{call.short}(...)")
    if fused_loss_applied(ctx):
        return Decided("liger", None, True, "cut-cross-entropy imported")
    upcast = chunked_upcast(ctx)
    if upcast is not None:
        return upcast[0]
    for trainer in ctx.facts.trainers:
        args = ctx.trainer_args(trainer)
        void = None
        if args is not None and args.get("use_liger_kernel").is_(True):
            flag = args.get("use_liger_kernel")
            void = liger_does_nothing(ctx, trainer) or _liger_not_the_loss(ctx, trainer)
            if void is None:
                return Decided("liger", flag.origin, not flag.assumed, "use_liger_kernel=True")
        if trainer.class_name == "SFTTrainer":
            chunked, forced_by = sft_loss(ctx, trainer, args)
            if chunked and forced_by is None:
                loss_type = args.get("loss_type") if args is not None else UNSET
                return Decided("chunked", loss_type.origin if loss_type.known else None,
                               loss_type.known and not loss_type.assumed,
                               f"SFTTrainer in TRL {ctx.versions.trl.version} computes a chunked loss")
        if void is not None:
            return Decided("full", flag.origin, not flag.assumed, void)
        elif trainer.library == "trl":
            row = trl_trainers.loss_row(trainer.class_name, ctx.versions.trl)
            if row is not None and not row.full_logits:
                # TRL >= 1.15's fused LM head / the chunked distillation loss
                return Decided("chunked", None, False,
                               f"{trainer.class_name} in TRL {ctx.versions.trl.version} fuses its LM head")
            if row is not None and args is not None and any(args.get(f).is_(True) for f in row.flags):
                flag = next(args.get(f) for f in row.flags if args.get(f).is_(True))
                return Decided("liger", flag.origin, not flag.assumed, f"{trainer.class_name}'s fused loss flag")
    return Decided("full", None, False, "no fused or chunked loss found")


def reference_copy(ctx: FileContext) -> str | None:
    """The TRL trainer that keeps a frozen copy of the model as its reference (knowledge/trl_trainers.py
    REFERENCE_COPY): no PEFT, no `ref_model` passed, no precomputed reference log-probabilities; else None."""
    if ctx.uses_peft:
        return None
    for trainer in ctx.facts.trainers:
        if trainer.library != "trl" or trainer.class_name not in trl_trainers.REFERENCE_COPY:
            continue
        ref = trainer.call.kw("ref_model")
        if not (ref.unset or ref.is_(None)):
            continue  # the script's own reference model: not this model's copy
        args = ctx.trainer_args(trainer)
        pre = args.get("precompute_ref_log_probs") if args is not None else UNSET
        if pre.unset or pre.is_(False):
            return trainer.class_name
    return None


@dataclass(frozen=True)
class LogitsShape:
    """A TRL trainer that builds the full logits of more than one row per example, or of a second model, per step."""

    rows: int
    reference: str | None  # "reference" | "teacher" | None
    trainer: str


def logits_shape(ctx: FileContext) -> LogitsShape | None:
    """The first TRL trainer that builds the full logits of more than one row per example or of a second model in
    the same step (knowledge/trl_trainers.py); else None."""
    for trainer in ctx.facts.trainers:
        framework = trl_trainers.FRAMEWORK_FULL_LOGITS.get((trainer.library, trainer.class_name))
        if framework is not None and trainer.loss_override is not None:
            # a framework's own preference trainer (LLaMA-Factory's CustomDPOTrainer: chosen + rejected in one
            # forward, the reference's logits in the same step unless its loss is reference-free)
            _, rows, (reference, setting, without), _ = framework
            args = ctx.trainer_args(trainer)
            chosen = args.get(setting) if args is not None and setting else UNSET
            if chosen.known and chosen.value in without:
                reference = None
            return LogitsShape(rows, reference, trainer.class_name)
        if trainer.library != "trl" or trainer.class_name == "SFTTrainer":
            continue
        row = trl_trainers.loss_row(trainer.class_name, ctx.versions.trl)
        if row is None or not row.full_logits:
            continue
        args = ctx.trainer_args(trainer)
        reference = row.reference
        if reference == "ref":
            pre = args.get("precompute_ref_log_probs") if args is not None else UNSET
            reference = None if pre.is_(True) else "reference"
        if row.rows > 1 or reference is not None:
            return LogitsShape(row.rows, reference, trainer.class_name)
    return None


@dataclass(frozen=True)
class Loss:
    """The training step's loss: its path, the extra logits a TRL trainer builds, the frozen reference copy."""

    path: Decided[str]
    shape: LogitsShape | None  # only on the "full" path
    reference_copy: str | None  # the TRL trainer that keeps a frozen copy of the model
    chunks: int | None = None  # on the "chunked-upcast" path: the chunks the fp32 upcast is split into
    fused_head: bool = False  # on the "chunked" path: TRL >= 1.15's fused LM head (knowledge/trl_trainers.py FUSED_LM_HEAD)


def resolve_loss(ctx: FileContext) -> Loss:
    path = loss_path(ctx)
    upcast = chunked_upcast(ctx) if path.value == "chunked-upcast" else None
    fused = path.value == "chunked" and any(
        t.library == "trl" and trl_trainers.fused_lm_head(t.class_name, ctx.versions.trl) for t in ctx.facts.trainers)
    return Loss(path, logits_shape(ctx) if path.value == "full" else None, reference_copy(ctx),
                upcast[1] if upcast is not None else None, fused)
