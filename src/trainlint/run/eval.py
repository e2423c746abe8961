"""The evaluation phase: whether Trainer's evaluation loop runs, with what batch, and what it keeps.

Library facts, read in transformers 5.24.0 / 5.25.0 trainer.py `Trainer.evaluation_loop`: `all_preds.add(logits)`
unless `args.batch_eval_metrics` (a field since 4.41.0: knowledge/arguments.json); `preprocess_logits_for_metrics
(logits, labels)` replaces the logits first; `eval_accumulation_steps` moves them to the CPU every N steps
(`all_preds.to_cpu_and_numpy()`, l.3090); `Trainer.evaluate` passes `prediction_loss_only=True` when
`compute_metrics` is None (l.2920), and `args.prediction_loss_only` drops the logits. Under bf16/fp16 mixed precision
accelerate wraps the forward in `convert_outputs_to_fp32` (accelerate 1.15.0 accelerator.py `prepare_model`), so the
kept logits are fp32. TRL: `SFTTrainer` keeps Trainer's `evaluation_loop` (trl 0.12.0 defines no `prediction_step`;
trl 1.16.0 sft_trainer.py:1679 defines one that still returns `outputs.logits` unless `prediction_loss_only`,
recomputed by a forward without labels, l.1666-1674); DPO, KTO, GRPO and distillation trainers override
`prediction_step` (their eval logits are not the vocabulary's) and are not counted.
"""

from __future__ import annotations

import re

from trainlint.context import FileContext
from trainlint.facts import ArgsObject, TrainerCall
from trainlint.facts.values import UNSET
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (the estimator is imported only when a run is estimated: a one-file check stays light)
    from trainlint.memory.estimate import EvalPhase
from trainlint.run.decided import Decided
from trainlint.run.model import training_model
from trainlint.run.precision import byte_widths

# The trainers that run Trainer's evaluation loop on the vocabulary logits
TRAINERS = {"Trainer", "Seq2SeqTrainer", "SFTTrainer"}


def evaluates(ctx: FileContext, trainer: TrainerCall, args: ArgsObject | None) -> bool | None:
    """The eval loop runs: an eval strategy other than "no", or `trainer.evaluate()` in the script."""
    if trainer.variable and re.search(rf"\b{re.escape(trainer.variable)}\s*\.\s*evaluate\s*\(", ctx.text):
        return True
    if args is None:
        return None
    for key in ("eval_strategy", "evaluation_strategy"):
        value = args.get(key)
        if value.unknown:
            return None
        if value.known:
            text = str(value.value).split(".")[-1].lower()
            return text not in ("no", "none")
    return None if args.call.opaque_kwargs else False


def logits_reduced(ctx: FileContext, trainer: TrainerCall, args: ArgsObject | None) -> bool | None:
    """Something keeps the loop from holding the logits (True), nothing does (False), or it is not known."""
    if trainer.call.has_kw("preprocess_logits_for_metrics") and not trainer.call.kw("preprocess_logits_for_metrics") \
            .is_(None):
        return True
    if args is None:
        return None
    if args.get("prediction_loss_only").is_(True) or args.get("predict_with_generate").is_(True):
        return True
    batch_metrics = args.get("batch_eval_metrics")
    if batch_metrics.is_(True):
        from trainlint.knowledge import arguments as library_args  # (lazy: ~13 ms)

        fields = library_args.library_fields(args.class_name, ctx.versions)
        if fields is None or "batch_eval_metrics" in fields:
            return True  # (before transformers 4.41 the field does not exist: the logits are still kept)
    if any(args.get(k).unknown for k in ("prediction_loss_only", "predict_with_generate", "batch_eval_metrics")):
        return None
    return None if args.call.opaque_kwargs else False


def eval_phase(ctx: FileContext, loss: str) -> Decided[EvalPhase | None]:
    """The evaluation step of the first trainer that runs Trainer's evaluation loop (TRAINERS) with an
    eval_dataset; None when no evaluation runs. Facts: transformers 5.25.0 trainer.py."""
    from trainlint.memory.estimate import EvalPhase

    notes: list[str] = []
    trainer = next((t for t in ctx.facts.trainers if t.class_name in TRAINERS), None)
    if trainer is None or trainer.call.kw("eval_dataset").unset or trainer.call.kw("eval_dataset").is_(None):
        return Decided(None, None, True, "no evaluation loop with an eval_dataset")
    args = ctx.trainer_args(trainer)
    runs = evaluates(ctx, trainer, args)
    if not runs:
        return Decided(None, trainer.call.span, runs is False, "the evaluation loop does not run, or not known to")

    def arg(key):
        return args.get(key) if args is not None else UNSET

    batch = arg("per_device_eval_batch_size")
    eval_batch = batch.value if batch.known and isinstance(batch.value, int) and batch.value > 0 else 8
    if not batch.known:
        notes.append("eval batch 8: TrainingArguments' per_device_eval_batch_size default")
    # l.2920: `evaluate` passes prediction_loss_only=True without compute_metrics; else args.prediction_loss_only
    metrics = trainer.call.kw("compute_metrics")
    loss_only = metrics.unset or metrics.is_(None) or arg("prediction_loss_only").is_(True)

    def decided(phase: EvalPhase, why: str) -> Decided[EvalPhase | None]:
        return Decided(phase, trainer.call.span, not notes, why, tuple(notes))

    if loss_only:
        # l.3317: loss-only eval passes skip_logits=True with use_liger_kernel (not read in releases before 5.25.0);
        # TRL's SFTTrainer keeps its fused LM head (trl 1.16.0 sft_trainer.py `prediction_step`, l.1679)
        fused = (loss == "liger" and ctx.versions.transformers.at_least(5, 25)) or loss == "chunked"
        return decided(EvalPhase(eval_batch, logits=not fused), "loss-only evaluation")
    if logits_reduced(ctx, trainer, args) is not False:
        # (argmax ids, batch metrics or generated ids: nothing logits-sized is kept)
        return decided(EvalPhase(eval_batch), "the logits are reduced before they are kept")
    mixed = arg("bf16").is_(True) or arg("fp16").is_(True)  # accelerate's convert_outputs_to_fp32
    kept = 4 if mixed else byte_widths(ctx, training_model(ctx)).value[0]
    evalset = next((e for e in ctx.facts.eval_sets if e.trainer_index == trainer.call.index), None)
    batches = -(-evalset.size // eval_batch) if evalset is not None and evalset.size else None
    steps = arg("eval_accumulation_steps")  # l.3090: moves all_preds to the CPU every N steps
    if steps.known and isinstance(steps.value, int) and steps.value > 0:
        batches = min(batches, steps.value) if batches else steps.value
    elif batches is None:
        notes.append("eval set size not written: the eval logits kept on the GPU counted for one eval batch")
    return decided(EvalPhase(eval_batch, kept_bytes=kept, kept_batches=batches), "the evaluation loop keeps the logits")
