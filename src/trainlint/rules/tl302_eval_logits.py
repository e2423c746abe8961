"""TL302 eval-logits-accumulated: Trainer's evaluation loop keeps every eval batch's [batch x seq x vocab]
logits until `compute_metrics` runs, when nothing reduces them first.

Docs: rules/TL302.md. Whether the loop runs and what reduces the logits is the Run's (trainlint/run/eval.py).
Library facts, read in transformers 5.24.0 trainer.py `Trainer.evaluation_loop`:
`all_preds.add(logits)` unless `args.batch_eval_metrics` (a field since 4.41.0: knowledge/arguments.json);
`preprocess_logits_for_metrics(logits, labels)` replaces the logits first; `eval_accumulation_steps` moves
them to the CPU every N steps (`all_preds.to_cpu_and_numpy()`); `Trainer.evaluate` passes
`prediction_loss_only=True` when `compute_metrics` is None, and `args.prediction_loss_only` drops the logits.
Under bf16/fp16 mixed precision accelerate wraps the forward in `convert_outputs_to_fp32` (accelerate 1.15.0
accelerator.py `prepare_model`), so the kept logits are fp32. TRL: `SFTTrainer` keeps Trainer's
`evaluation_loop` (trl 0.12.0 defines no `prediction_step`; trl 1.16.0 sft_trainer.py:1679 defines one that still
returns `outputs.logits` unless `prediction_loss_only`, recomputed by a forward without labels, l.1666-1674); DPO, KTO and GRPO
override `prediction_step` (their eval logits are not the vocabulary's) and are not checked. TRL's GKDTrainer
defines none: Trainer's (<= 1.0) / SFTTrainer's (1.16.0 sft_trainer.py:1679-1688) prediction_step returns the
student's outputs from its `compute_loss(..., return_outputs=True)` (0.13.0 gkd_trainer.py:252, 1.16.0
experimental/gkd/gkd_trainer.py:361), so the loop keeps the student's vocabulary logits as it does a Trainer's
(run/eval.py `_distillation_eval`).
"""

from __future__ import annotations

from trainlint.context import FileContext
from trainlint.diagnostics import Fix
from trainlint.edits import make_fix, set_keyword
from trainlint.facts import ArgsObject, TrainerCall
from trainlint.knowledge.heads import head_for
from trainlint.memory import fmt_bytes
from trainlint.rules.base import Rule, rule
from trainlint.run import resolve
from trainlint.run.eval import TRAINERS, evaluates, logits_reduced


def vocab_logits_head(model) -> bool | None:
    """Whether the loaded model's head produces vocabulary logits (knowledge/heads.py, from the loading class);
    None when the class does not say (AutoModel's subclasses of the repository, a custom class)."""
    head = head_for(model.class_name, model.kind)
    return None if head is None else head.kind == "vocab"


def _logit_bytes(ctx: FileContext, args: ArgsObject | None, model) -> int:
    if args is not None and (args.get("bf16").is_(True) or args.get("fp16").is_(True)):
        return 4  # accelerate's convert_outputs_to_fp32
    return resolve(ctx).model(model).precision.value[0]


@rule("TL302", "eval-logits-accumulated", consumer="logits and loss",
      summary="A Trainer evaluates with compute_metrics on a vocabulary head and nothing reduces the logits first: "
              "every eval batch's full logits are kept.",
      fix_hint="`preprocess_logits_for_metrics` (argmax), or `batch_eval_metrics=True` (transformers ≥ 4.41)",
      fix="unsafe", verifies="memory")
def check(self: Rule, ctx: FileContext):
    for trainer in ctx.facts.trainers:
        if trainer.class_name not in TRAINERS and not (trainer.class_name == "GKDTrainer" and trainer.library == "trl"):
            continue
        call = trainer.call
        if not call.has_kw("compute_metrics") or call.kw("compute_metrics").is_(None) or \
                not call.has_kw("eval_dataset") or call.kw("eval_dataset").is_(None):
            continue
        args = ctx.trainer_args(trainer)
        if not evaluates(ctx, trainer, args):
            continue
        model = ctx.model_for(trainer.model_variable)
        if model is None or vocab_logits_head(model) is not True:
            continue
        spec = ctx.spec(model)
        if spec is None or not spec.vocab_size:
            continue
        accumulated = logits_reduced(ctx, trainer, args) is False
        unfused = _unfused_eval(ctx, args, spec.vocab_size)
        if accumulated:
            message = _message(ctx, trainer, args, model, spec.vocab_size)
            message += f"; also, {unfused}" if unfused else ""
            yield self.diagnostic(ctx, call.span, message, call.kw("compute_metrics")).with_fix(_fix(ctx, trainer))
        elif unfused:
            yield self.diagnostic(ctx, call.span, f"{unfused}; evaluate with a smaller per_device_eval_batch_size, or "
                                  f"without compute_metrics (a loss-only eval passes skip_logits=True on transformers "
                                  f">= 5.25)", call.kw("compute_metrics"))


def _unfused_eval(ctx: FileContext, args: ArgsObject | None, vocab: int) -> str | None:
    """`use_liger_kernel=True` trains without logits, but an eval step that returns them builds them: Liger's
    `lce_forward` sets `skip_logits = self.training and (labels is not None or shift_labels is not None)` unless told
    (liger-kernel 0.8.2 src/liger_kernel/transformers/model/llama.py:115; in eval mode l.129-131 run the LM head and
    `self.loss_function` on the full logits), and transformers 5.25.0 trainer.py:3317 passes `skip_logits=True` only
    when `prediction_loss_only`. The eval step's logits and loss (memory.estimate.eval_logits_bytes, nothing kept)
    against the training step's fused loss, when the first is larger; None otherwise or when not known."""
    if args is None or not args.get("use_liger_kernel").is_(True) or not ctx.seq_len.known:
        return None
    loss_only = args.get("prediction_loss_only")
    if not (loss_only.unset or loss_only.is_(False)):
        return None
    from dataclasses import replace

    from trainlint.memory.estimate import logits_bytes
    from trainlint.memory.phases import eval_logits_bytes
    from trainlint.planning import Overrides, PlanError, plan_for

    try:
        plan = plan_for(ctx, Overrides())[0]
    except PlanError:
        return None
    e = plan.evaluation
    if e is None or not e.logits or plan.loss != "liger":
        return None
    step, train = eval_logits_bytes(replace(plan, evaluation=replace(e, kept_bytes=0))), logits_bytes(plan)
    if step <= train:
        return None
    return (f"use_liger_kernel=True fuses the loss only in training: each eval step builds the [{e.batch} x "
            f"{plan.seq:,} x {vocab:,}] logits and their loss, ~{fmt_bytes(step)}, where the training step's fused "
            f"loss holds ~{fmt_bytes(train)}")


ARGMAX = "lambda logits, labels: (logits[0] if isinstance(logits, tuple) else logits).argmax(-1)"


def _fix(ctx: FileContext, trainer: TrainerCall) -> Fix | None:
    """Unsafe: compute_metrics then receives token ids instead of logits (a metric that needs probabilities,
    such as perplexity from the logits, must be rewritten)."""
    if trainer.call.opaque_kwargs:
        return None
    edits = set_keyword(trainer.call, "preprocess_logits_for_metrics", ARGMAX, ctx.text)
    return make_fix("unsafe", "Pass preprocess_logits_for_metrics that keeps the argmax", *edits) if edits else None


def _message(ctx: FileContext, trainer: TrainerCall, args: ArgsObject | None, model, vocab: int) -> str:
    size = _logit_bytes(ctx, args, model)
    seq = ctx.seq_len
    accumulate = args.get("eval_accumulation_steps") if args is not None else None
    where = ("in host RAM (eval_accumulation_steps moves them off the GPU every "
             f"{accumulate.value} steps)" if accumulate is not None and accumulate.known and accumulate.value
             else "on the GPU")
    dtype = {2: "16-bit", 4: "fp32"}.get(size, f"{size}-byte")
    if seq.known:
        per = seq.value * vocab * size
        cost = f"~{fmt_bytes(per)} per eval example ({seq.value:,} tokens x {vocab:,} vocabulary, {dtype})"
        evalset = next((e for e in ctx.facts.eval_sets if e.trainer_index == trainer.call.index), None)
        if evalset is not None and evalset.size:
            cost += f", ~{fmt_bytes(per * evalset.size)} for the {evalset.size:,} examples of {evalset.how}"
    else:
        cost = f"seq x {vocab:,} {dtype} logits per eval example"
    batched = (", or batch_eval_metrics=True" if ctx.versions.transformers.at_least(4, 41) else
               f" (batch_eval_metrics needs transformers >= 4.41; this file targets {ctx.versions.transformers.version})")
    return (f"compute_metrics on a {vocab:,}-token vocabulary without preprocess_logits_for_metrics: the evaluation "
            f"loop keeps every eval batch's logits {where} until the metrics run, {cost}; pass "
            f"preprocess_logits_for_metrics=lambda logits, labels: logits.argmax(-1){batched}")
