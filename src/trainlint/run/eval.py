"""The evaluation phase: whether Trainer's evaluation loop runs, with what batch, and what it keeps.

Library facts, read in transformers 5.24.0 / 5.25.0 trainer.py `Trainer.evaluation_loop`: `all_preds.add(logits)`
unless `args.batch_eval_metrics` (a field since 4.41.0: knowledge/arguments.json); `preprocess_logits_for_metrics
(logits, labels)` replaces the logits first; `eval_accumulation_steps` moves them to the CPU every N steps
(`all_preds.to_cpu_and_numpy()`, l.3090); `Trainer.evaluate` passes `prediction_loss_only=True` when
`compute_metrics` is None (l.2920), and `args.prediction_loss_only` drops the logits. Under bf16/fp16 mixed precision
accelerate wraps the forward in `convert_outputs_to_fp32` (accelerate 1.15.0 accelerator.py `prepare_model`), so the
kept logits are fp32. TRL: `SFTTrainer` keeps Trainer's `evaluation_loop` (trl 0.12.0 defines no `prediction_step`;
trl 1.16.0 sft_trainer.py:1679 defines one that still returns `outputs.logits` unless `prediction_loss_only`,
recomputed by a forward without labels, l.1666-1674). GKDTrainer's evaluation step is its own loss under no_grad
(`_distillation_eval` below). GRPO (>= 0.15) and the GRPO-shaped RLOO (>= 0.22) evaluate by generating: each eval batch is a
generation round of per_device_eval_batch_size completions scored under no_grad (knowledge/trl_trainers.py
`evaluates_by_generating`, `_generating_eval` below).

TRL's DPOTrainer overrides `prediction_step` to run its training loss under no_grad on the eval batch: chosen and
rejected concatenated (2 x per_device_eval_batch_size rows), the reference's forward too (trl 0.8.6
dpo_trainer.py:1158-1159, 0.19.1 :1761-1762 and 0.26.2 :1887-1888 `get_batch_loss_metrics(..., train_eval="eval")`,
whose "logits" are scalar metrics; 0.29.1 :1468-1474, 1.13.0 :1805-1814 and 1.16.0 :1712-1720 `compute_loss`, which
returns `outputs.logits`, the vocabulary's, when `prediction_loss_only` is off, i.e. with `compute_metrics`). So its
eval step is the training loss path at the eval batch (KTOTrainer's likewise, one row per example; it returns the
logits from 1.7: knowledge/trl_trainers.py EVAL_RETURNS_LOGITS): full logits where training has them (<= 1.14 without Liger),
the fused LM head from 1.15 (bench/measure_rl.py measures it at full size, TRL 1.16).
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
    preference = next((t for t in ctx.facts.trainers if t.class_name in ("DPOTrainer", "KTOTrainer")
                       and t.library == "trl"), None)
    if preference is not None:
        return _preference_eval(ctx, preference, loss)
    distillation = next((t for t in ctx.facts.trainers if t.library == "trl" and (
        t.class_name == "GKDTrainer" or (t.class_name == "DistillationTrainer" and _distillation_jsd(ctx)))), None)
    if distillation is not None:
        return _distillation_eval(ctx, distillation, loss)
    generating = next((t for t in ctx.facts.trainers if t.class_name in ("GRPOTrainer", "RLOOTrainer")
                       and t.library == "trl"), None)
    if generating is not None:
        return _generating_eval(ctx, generating)
    trainer = next((t for t in ctx.facts.trainers if t.class_name in TRAINERS), None)
    if trainer is None:
        return Decided(None, None, True, "no evaluation loop with an eval_dataset")
    args, skipped = _loop_runs(ctx, trainer)
    if skipped is not None:
        return skipped

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
    batches = _kept_batches(ctx, trainer, args, eval_batch, notes)
    return decided(EvalPhase(eval_batch, kept_bytes=kept, kept_batches=batches), "the evaluation loop keeps the logits")


def _loop_runs(ctx: FileContext, trainer: TrainerCall) -> tuple[ArgsObject | None, Decided | None]:
    """The trainer's arguments, and None when its evaluation loop runs on an eval_dataset; else why it does not."""
    if trainer.call.kw("eval_dataset").unset or trainer.call.kw("eval_dataset").is_(None):
        return None, Decided(None, None, True, "no evaluation loop with an eval_dataset")
    args = ctx.trainer_args(trainer)
    runs = evaluates(ctx, trainer, args)
    if not runs:
        return args, Decided(None, trainer.call.span, runs is False,
                             "the evaluation loop does not run, or not known to")
    return args, None


def _kept_batches(ctx: FileContext, trainer: TrainerCall, args: ArgsObject | None, eval_batch: int,
                  notes: list[str]) -> int | None:
    """The eval batches whose logits the loop holds on the GPU at once: the whole eval set, or
    `eval_accumulation_steps` (l.3090: moves all_preds to the CPU every N steps); None when neither is written."""
    evalset = next((e for e in ctx.facts.eval_sets if e.trainer_index == trainer.call.index), None)
    batches = -(-evalset.size // eval_batch) if evalset is not None and evalset.size else None
    steps = args.get("eval_accumulation_steps") if args is not None else UNSET
    if steps.known and isinstance(steps.value, int) and steps.value > 0:
        batches = min(batches, steps.value) if batches else steps.value
    elif batches is None:
        notes.append("eval set size not written: the eval logits kept on the GPU counted for one eval batch")
    return batches


def _eval_batch(args: ArgsObject | None, notes: list[str]) -> int:
    batch = args.get("per_device_eval_batch_size") if args is not None else UNSET
    if batch.known and isinstance(batch.value, int) and batch.value > 0:
        return batch.value
    notes.append("eval batch 8: TrainingArguments' per_device_eval_batch_size default")
    return 8


def _preference_eval(ctx: FileContext, trainer: TrainerCall, loss: str) -> Decided[EvalPhase | None]:
    """TRL DPOTrainer's / KTOTrainer's evaluation step (module docstring): the training loss under no_grad at the
    eval batch (DPO: chosen + rejected, 2 x the eval batch; KTO: one completion per example, its KL batch a
    separate no-grad forward of the same size)."""
    from trainlint.knowledge import trl_trainers as T
    from trainlint.memory.estimate import EvalPhase

    args, skipped = _loop_runs(ctx, trainer)
    if skipped is not None:
        return skipped
    notes: list[str] = []
    trl = ctx.versions.trl
    name = trainer.class_name
    row = T.loss_row(name, trl)
    pairs = _eval_batch(args, notes)
    rows = pairs * (row.rows if row is not None else 2)
    full = loss == "full"
    precompute = args.get("precompute_ref_log_probs").is_(True) if args is not None else False
    metrics = trainer.call.kw("compute_metrics")
    kept, batches = 0, None
    if full and not (metrics.unset or metrics.is_(None)) and T.eval_returns_logits(name, trl):
        # DPO 0.29-1.14, KTO 1.7-1.14 return the vocabulary logits to the loop, which keeps them (fp32 under mixed
        # precision)
        mixed = args is not None and (args.get("bf16").is_(True) or args.get("fp16").is_(True))
        kept = 4 if mixed else byte_widths(ctx, training_model(ctx)).value[0]
        batches = _kept_batches(ctx, trainer, args, pairs, notes)
        kept_what = "chosen + rejected logits" if name == "DPOTrainer" else "logits"
        notes.append(f"compute_metrics with {name}: the eval loop keeps the {kept_what} of each eval batch")
    if name == "DPOTrainer":
        notes.append(f"DPOTrainer evaluates chosen and rejected together: {rows} rows per eval step "
                     f"({pairs} pairs)")
    phase = EvalPhase(rows, per_example=rows // pairs, logits=full, kept_bytes=kept, kept_batches=batches,
                      reference_logits=full and not precompute and row is not None and row.reference == "ref",
                      fused_head=row is not None and not row.full_logits)
    return Decided(phase, trainer.call.span, not any(n.startswith("eval batch 8") for n in notes),
                   f"{name}'s loss under no_grad at the eval batch", tuple(notes))


def _generating_eval(ctx: FileContext, trainer: TrainerCall) -> Decided[EvalPhase | None]:
    """GRPO's (TRL >= 0.15) / RLOO's (>= 0.22) evaluation step (knowledge/trl_trainers.py
    `evaluates_by_generating`): each eval batch of per_device_eval_batch_size completions is generated (HF
    `generate` or vLLM, as in training) and scored under no_grad, so the step is the training's generation round at
    the eval batch: rows = logps rows = per_device_eval_batch_size."""
    from trainlint.knowledge import trl_trainers as T
    from trainlint.memory.estimate import EvalPhase
    from trainlint.run.components import generation_phase

    args, skipped = _loop_runs(ctx, trainer)
    if skipped is not None:
        return skipped
    trl = ctx.versions.trl
    if not T.evaluates_by_generating(trainer.class_name, trl):
        return Decided(None, trainer.call.span, False,
                       f"{trainer.class_name} in TRL {trl.version}: its evaluation step is not modelled")
    generation = generation_phase(ctx).value
    if generation is None:
        return Decided(None, trainer.call.span, False, "no generation round to evaluate with")
    notes: list[str] = []
    rows = _eval_batch(args, notes)
    phase = EvalPhase(rows, logits=False, generation=generation.phase(rows))
    return Decided(phase, trainer.call.span, not any(n.startswith("eval batch 8") for n in notes),
                   f"{trainer.class_name}'s generation round at the eval batch", tuple(notes))


def _distillation_jsd(ctx: FileContext) -> bool:
    from trainlint.knowledge import trl_trainers as T

    return T.distillation_jsd(ctx.versions.trl)


def _distillation_eval(ctx: FileContext, trainer: TrainerCall, loss: str) -> Decided[EvalPhase | None]:
    """TRL GKDTrainer's evaluation step. It defines no `prediction_step`: trl 0.13.0-0.22.2 and 1.0.0 run Trainer's
    (transformers 4.57.6 trainer.py:4824, 5.25.0 :3237 `prediction_step`: with labels, which DataCollatorForChatML
    always sets, `compute_loss(model, inputs, return_outputs=True)` under no_grad whatever prediction_loss_only, 5.25.0
    l.3312-3321; 1.0.0's SFTTrainer
    only marks `_prediction_loss_only` and calls it, sft_trainer.py:1371-1374), trl 1.16.0 SFTTrainer's
    (sft_trainer.py:1679-1688: `compute_loss` under no_grad, `return_outputs` only when the logits are wanted). Either
    way the step is GKDTrainer.compute_loss at per_device_eval_batch_size: the student's forward, the teacher's, and
    generalized_jsd_loss under no_grad (memory.estimate JSD_NOGRAD_TENSORS); no on-policy generation (that is in
    `training_step` only: 0.13.0 gkd_trainer.py:277, 1.16.0 experimental/gkd/gkd_trainer.py:405). With
    compute_metrics (prediction_loss_only off) the returned student outputs' logits are the loop's predictions, kept
    as Trainer's loop keeps logits (fp32 under mixed precision). `use_liger_kernel` (0.22+) runs the fused JSD in eval
    too: the training loss path at the eval batch. DistillationTrainer 1.3-1.9 likewise: no `prediction_step` of its
    own (`_BaseTrainer`, 1.3.0 experimental/distillation/distillation_trainer.py:356), its collator sets labels, and
    compute_loss returns the student's outputs (1.9.0 l.1068)."""
    from trainlint.memory.estimate import EvalPhase

    args, skipped = _loop_runs(ctx, trainer)
    if skipped is not None:
        return skipped
    notes: list[str] = []
    rows = _eval_batch(args, notes)
    metrics = trainer.call.kw("compute_metrics")
    loss_only = metrics.unset or metrics.is_(None) or (args is not None and args.get("prediction_loss_only").is_(True))
    kept, batches = 0, None
    if not loss_only and logits_reduced(ctx, trainer, args) is False:
        mixed = args is not None and (args.get("bf16").is_(True) or args.get("fp16").is_(True))
        kept = 4 if mixed else byte_widths(ctx, training_model(ctx)).value[0]
        batches = _kept_batches(ctx, trainer, args, rows, notes)
        notes.append(f"compute_metrics with {trainer.class_name}: the eval loop keeps the student's logits of each "
                     f"eval batch")
    full = loss == "full"
    phase = EvalPhase(rows, logits=False, jsd=full, kept_bytes=kept, kept_batches=batches)
    name = trainer.class_name
    why = (f"{name}'s loss under no_grad at the eval batch: the student's and the teacher's logits and the "
           f"generalized JSD" if full else f"{name}'s fused JSD loss under no_grad at the eval batch")
    return Decided(phase, trainer.call.span, not any(n.startswith("eval batch 8") for n in notes), why, tuple(notes))
