"""TL301 unfused-cross-entropy-on-large-vocabulary: the loss materialises batch x seq x vocab logits.

Docs: rules/TL301.md. The loss path is the Run's (trainlint/run/loss.py; library facts:
trainlint/knowledge/libraries.py sft_loss_is_chunked, knowledge/trl_trainers.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace as replace_fields

from trainlint.context import FileContext
from trainlint.edits import make_fix, set_keyword
from trainlint.diagnostics import FUSED_LOSS, Setting, Span
from trainlint.facts import ModelLoad, TrainerCall, Value
from trainlint.facts.names import TORCH_CROSS_ENTROPY, TORCH_LOG_SOFTMAX
from trainlint.facts.values import UNKNOWN, UNSET, library_default
from trainlint.knowledge import libraries, trl_trainers
from trainlint.knowledge.heads import computes_vocab_logits
from trainlint.memory import (chunked_upcast_bytes_per_element, dtype_bytes, fmt_bytes, logits_bytes,
                              loss_peak_bytes)
from trainlint.rules.base import Rule, rule
from trainlint.rules.fit import peak_saving, with_fit_note
from trainlint.run import resolve
from trainlint.run.loss import row_flags, sft_loss

def _liger_fix(ctx: FileContext) -> str:
    """The advice for a transformers Trainer's loss, in the file's spelling (a framework has its own lever)."""
    return ctx.spelling.lever("fused_loss", _python_liger_fix(ctx))


def _python_liger_fix(ctx: FileContext) -> str:
    if ctx.versions.transformers.at_least(*libraries.LIGER_FIELD_SINCE):
        return ctx.spelling.advise("use_liger_kernel", True, "needs the liger-kernel package and a CUDA GPU")
    return (f"use_liger_kernel needs transformers >= 4.45 and this file targets {ctx.versions.transformers.version}: "
            f"upgrade it, or patch the model with liger-kernel's apply_liger_kernel_to_*() (needs a CUDA GPU)")


def _void_liger_fix(why: str) -> str:
    if "patches it" in why:
        return "upgrade liger-kernel (" + why.rsplit("; ", 1)[1] + ")"
    return ("patch the loss yourself: liger-kernel's LigerFusedLinearCrossEntropyLoss (or cut-cross-entropy's "
            "linear_cross_entropy) on the hidden states and the LM head's weight")


def _chunked_cost(ctx: FileContext, model: ModelLoad, vocab: int) -> str:
    """axolotl's chunked upcast (memory.chunked_upcast_bytes_per_element): the 16-bit logits stay, and the loss keeps
    every chunk's fp32 log-softmax for backward."""
    size = 4 if model.dtype.known and dtype_bytes(str(model.dtype.value), 2) == 4 else 2
    label = "fp32" if size == 4 else "bf16"
    per = chunked_upcast_bytes_per_element(size)
    seq, batch = ctx.seq_len, ctx.batch
    if seq.known and batch.known:
        n = logits_bytes(batch.value, seq.value, vocab, 1)
        return (f"the [{batch.value} x {seq.value:,} x {vocab:,}] logits are ~{fmt_bytes(n * size)} in {label} and the "
                f"loss keeps every chunk's fp32 log-softmax (~{fmt_bytes(n * 4)}) for backward, ~{fmt_bytes(n * per)} "
                f"at peak")
    return f"the logits cost ~{fmt_bytes(vocab * per)} per token at peak ({vocab:,} x {per} bytes)"


def _cost(ctx: FileContext, model: ModelLoad, vocab: int, shape: TrainerShape | None = None) -> str:
    if shape is None and resolve(ctx).loss.path.value == "chunked-upcast":
        return _chunked_cost(ctx, model, vocab)
    size = 4 if model.dtype.known and dtype_bytes(str(model.dtype.value), 2) == 4 else 2
    label = "fp32" if size == 4 else "bf16"
    seq, batch = (shape.seq, shape.batch) if shape is not None else (ctx.seq_len, ctx.batch)
    rows, second = (shape.rows, shape.reference) if shape is not None else (1, None)
    spec = ctx.spec(model)
    # a LoRA script freezes the LM head, which changes what the loss keeps at peak (memory.loss_bytes_per_element)
    head = dict(trainable_head=not ctx.uses_peft, softcap=spec is not None and spec.model_type in libraries.SOFTCAPPED)
    extra = ""
    if seq.known and batch.known:
        n = batch.value * rows
        shape_text = f"[{n} x {seq.value:,} x {vocab:,}]" + (f" ({rows} rows per example)" if rows > 1 else "")
        first = fmt_bytes(logits_bytes(n, seq.value, vocab, size))
        peak_bytes = loss_peak_bytes(n, seq.value, vocab, size, **head)
        if second is not None:
            # the reference / teacher forward runs under no_grad while the policy's graph is alive: its logits
            # are at least one more [rows x seq x vocab] tensor in the model dtype (knowledge/trl_trainers.py)
            peak_bytes += logits_bytes(n, seq.value, vocab, size)
            extra = f" (with ~{first} more for the {second} model's logits)"
        peak = fmt_bytes(peak_bytes)
        if size == 2:
            fp32 = fmt_bytes(logits_bytes(n, seq.value, vocab, 4))
            return (f"the {shape_text} logits are ~{first} in {label} plus ~{fp32} for the fp32 copy the loss makes, "
                    f"~{peak} at peak{extra}")
        return f"the {shape_text} logits are ~{first} in {label}, ~{peak} at peak with the loss{extra}"
    if rows == 1 and second is None:
        per_token = fmt_bytes(loss_peak_bytes(1, 1, vocab, size, **head))
        return (f"the logits cost ~{per_token} per token at peak ({vocab:,} x {loss_peak_bytes(1, 1, 1, size, **head)} "
                f"bytes)")
    per_example = loss_peak_bytes(rows, 1, vocab, size, **head) + (logits_bytes(rows, 1, vocab, size) if second else 0)
    also = f", the {second} model's logits included" if second else ""
    return f"the logits cost ~{fmt_bytes(per_example)} per token of each example at peak ({rows} x {vocab:,}-wide rows{also})"


def _diagnose(self: Rule, ctx: FileContext, model: ModelLoad | None, span: Span, what: str, fix: str,
              shape: TrainerShape | None = None):
    if model is not None and not computes_vocab_logits(model.class_name, model.kind):
        return None  # a classification / QA head (or none): its logits are num_labels wide, not the vocabulary
    spec = ctx.spec(model) if model is not None else None
    vocab = spec.vocab_size if spec is not None else None
    if vocab is None or vocab < ctx.settings.large_vocab:
        return None
    assumed = f" ({spec.assumed_from})" if spec.assumed_from else ""  # a finding states the geometry it assumed
    saving = peak_saving(ctx, model, "TL301", "a fused loss") if model is not None else ""
    return self.diagnostic(ctx, span, f"{what} on a {vocab:,}-token vocabulary{assumed}: "
                                      f"{_cost(ctx, model, vocab, shape)}{saving}; {fix}",
                           model.model_id if model is not None else None)


@dataclass(frozen=True)
class TrainerShape:
    """The logits a TRL trainer builds per step: rows per example, the length that is projected, a second model."""

    batch: Value
    seq: Value
    rows: int = 1
    reference: str | None = None  # "reference" | "teacher"


def _completion_length(ctx: FileContext, trainer: TrainerCall, args) -> Value:
    """GRPO / RLOO / PPO project only the completion tokens (`logits_to_keep`): max_completion_length, written or
    the library default for the targeted version (knowledge/arguments.json); unknown otherwise."""
    if args is not None:
        value = args.get("max_completion_length")
        if value.known and isinstance(value.value, int) and not isinstance(value.value, bool):
            return value
        if not value.unset:
            return UNKNOWN
        from trainlint.knowledge.arguments import library_fields  # (lazy: ~10 ms to import)

        fields = library_fields(args.class_name, ctx.versions)
        info = fields.get("max_completion_length") if fields else None
        if info is not None and isinstance(info.default, int) and not isinstance(info.default, bool):
            return library_default(info.default)
    return UNKNOWN


def _trl_trainer_diagnostic(self: Rule, ctx: FileContext, trainer: TrainerCall, args):
    """DPO / KTO / ORPO / CPO / GRPO / RLOO / PPO / GKD / Distillation: knowledge/trl_trainers.py per version."""
    name, trl = trainer.class_name, ctx.versions.trl
    if name in trl_trainers.NO_VOCAB_LOGITS:
        return None  # a reward model's head scores sequences; no vocabulary logits
    row = trl_trainers.loss_row(name, trl)
    if row is None or not row.full_logits:
        return None
    for flag in row.flags:
        value = args.get(flag) if args is not None else UNSET
        if value.is_(True) or value.unknown:
            return None
    reference = None
    if row.reference == "teacher":
        reference = "teacher"
    elif row.reference == "ref":
        pre = args.get("precompute_ref_log_probs") if args is not None else UNSET
        if pre.unknown:
            return None
        reference = None if pre.is_(True) else "reference"
    if name == "GKDTrainer" or (name == "DistillationTrainer" and trl_trainers.distillation_jsd(trl)):
        model = ctx.model_for(trainer.model_variable)
        spec = ctx.spec(model) if model is not None else None
        if spec is None or not spec.vocab_size or not computes_vocab_logits(model.class_name, model.kind) or \
                spec.vocab_size < ctx.settings.large_vocab:
            return None
        assumed = f" ({spec.assumed_from})" if spec.assumed_from else ""
        saving = peak_saving(ctx, model, "TL301", "a fused JSD")
        length = "max_new_tokens" if name == "GKDTrainer" else "max_completion_length"
        return self.diagnostic(ctx, trainer.call.span,
                               f"{name} in TRL {trl.version} computes its generalized JSD on the full logits of a "
                               f"{spec.vocab_size:,}-token vocabulary{assumed}: {_gkd_cost(ctx, spec.vocab_size, length)}"
                               f"{saving}; {_gkd_fix(ctx, name)}", model.model_id)
    seq = _completion_length(ctx, trainer, args) if name in ("GRPOTrainer", "RLOOTrainer", "PPOTrainer") \
        else ctx.seq_len
    shape = TrainerShape(ctx.batch, seq, row.rows, reference)
    fixes = [ctx.spelling.advise(row.flags[0], True, "needs the liger-kernel package and a CUDA GPU")] \
        if row.flags and ctx.spelling.can_set(row.flags[0]) else []
    if any(not r.full_logits for r in trl_trainers.LOSS[name]):
        fixes.append("upgrade TRL to >= 1.15 (fused LM head)")
    if not fixes:
        fixes.append("compute the loss with a fused linear cross-entropy (no fused path in this trainer)")
    what = f"{name} in TRL {trl.version} computes the full logits"
    return _diagnose(self, ctx, ctx.model_for(trainer.model_variable), trainer.call.span, what, " or ".join(fixes),
                     shape)


def _gkd_cost(ctx: FileContext, vocab: int, length: str = "max_new_tokens") -> str:
    """GKDTrainer's loss (memory.estimate jsd_loss_bytes): the student's and the teacher's logits and the generalized
    JSD's vocabulary-sized tensors over the positions it reads, from the run's plan; per token when it is not known."""
    from trainlint.memory.estimate import JSD_KL_TENSORS, JSD_TENSORS, jsd_loss_bytes
    from trainlint.rules.fit import known_plan

    plan = known_plan(ctx)
    if plan is None or plan.jsd_positions is None:
        size = 2
        return (f"the student's and the teacher's logits and the generalized JSD's {JSD_TENSORS} vocabulary-sized "
                f"tensors cost ~{fmt_bytes((2 + JSD_TENSORS) * vocab * size)} per token at peak in 16-bit "
                f"({2 + JSD_TENSORS} x {vocab:,} x {size} bytes)")
    b, s, n, size = plan.batch, plan.seq, plan.jsd_positions, plan.jsd_bytes or plan.act_bytes
    label = {2: "bf16", 4: "fp32"}.get(size, f"{size}-byte")
    if plan.jsd_bytes == 4 and plan.act_bytes == 2:  # run/components.py distillation_logits_bytes
        label = "fp32 (under mixed precision accelerate hands TRL fp32 copies of both models' logits)"
    tensors = JSD_KL_TENSORS if plan.jsd_single_kl else JSD_TENSORS
    each = fmt_bytes(logits_bytes(b, s, vocab, size))
    jsd = fmt_bytes(b * n * vocab * size * tensors)
    over = "every position" if n == s else f"the completion's {n:,} positions ({length})"
    kl = " (beta 0 or 1: one kl_div)" if plan.jsd_single_kl else ""
    if plan.jsd_mask_copy:
        kl = f" (beta 1: one kl_div, and the labels' mask copies {plan.jsd_mask_copy:,} positions beside it)"
        jsd = fmt_bytes(b * vocab * size * (n * tensors + plan.jsd_mask_copy))
    return (f"the student's and the teacher's [{b} x {s:,} x {vocab:,}] logits are ~{each} each in {label}, and the "
            f"generalized JSD builds {tensors} more vocabulary-sized tensors over {over}{kl}, ~{jsd}: "
            f"~{fmt_bytes(jsd_loss_bytes(plan))} at peak")


def _gkd_fix(ctx: FileContext, name: str = "GKDTrainer") -> str:
    """GKD's levers per TRL version (knowledge/trl_trainers.py `gkd_fused_jsd`, DISTILLATION_CHUNKED_SINCE);
    DistillationTrainer 1.3-1.9: liger-kernel's fused JSD, or TRL >= 1.10's chunked divergence loss."""
    trl = ctx.versions.trl
    if name == "DistillationTrainer":
        since = ".".join(map(str, trl_trainers.DISTILLATION_CHUNKED_SINCE))
        return (ctx.spelling.advise("use_liger_kernel", True, "Liger's LigerFusedLinearJSDLoss: needs the liger-kernel "
                                                             "package")
                + f", or upgrade TRL to >= {since} (its chunked divergence loss never builds the full logits)")
    fused = trl_trainers.gkd_fused_jsd(trl)
    distill = (f"DistillationTrainer (TRL >= {'.'.join(map(str, trl_trainers.DISTILLATION_CHUNKED_SINCE))}: its "
               f"chunked divergence loss projects the completion's positions on tiles, never the full logits)")
    say = ctx.spelling
    if fused == "liger":
        return say.advise("use_liger_kernel", True, "Liger's LigerFusedLinearJSDLoss: needs the liger-kernel package")
    if fused == "trl":
        return say.advise("use_liger_kernel", True, "TRL 1.13's own FusedLinearJSDLoss: no extra package")
    if trl.at_least(1, 14):
        return (f"GKDTrainer has no fused JSD from TRL 1.14 (1.13 has use_liger_kernel=True): use {distill}, or a "
                f"smaller {say.name('per_device_train_batch_size')} / {say.name('max_length')}")
    return (f"upgrade TRL: 0.22-1.13 fuse the JSD with use_liger_kernel=True (1.13 without the liger-kernel "
            f"package), or use {distill}")


def _override_diagnostic(self: Rule, ctx: FileContext, trainer: TrainerCall):
    """The repository's own trainer overrides the loss: it decides, whatever the base class would do."""
    kind, method, span = trainer.loss_override
    if kind != "full":
        return None  # fused (Liger / cut-cross-entropy), or an override that is not read: say nothing
    framework = trl_trainers.FRAMEWORK_FULL_LOGITS.get((trainer.library, trainer.class_name))
    if framework is not None:
        _, rows, (reference, setting, without), _ = framework
        args = ctx.trainer_args(trainer)
        chosen = args.get(setting) if args is not None and setting else UNSET
        if chosen.unknown:
            return None
        if chosen.known and chosen.value in without:
            reference = None
        return _diagnose(self, ctx, ctx.model_for(trainer.model_variable), span,
                         f"{trainer.subclass}.{method} computes its loss from the model's full logits (in fp32)",
                         "this trainer has no fused loss (a fused linear cross-entropy applies to pt / sft only)",
                         TrainerShape(ctx.batch, ctx.seq_len, rows, reference))
    return _diagnose(self, ctx, ctx.model_for(trainer.model_variable), span,
                     f"{trainer.subclass}.{method} computes a cross-entropy over the model's full logits",
                     "compute the loss with a fused linear cross-entropy (Liger's LigerFusedLinearCrossEntropyLoss or "
                     "cut-cross-entropy's linear_cross_entropy) on the hidden states, or in chunks")


def _trainer_diagnostic(self: Rule, ctx: FileContext, trainer: TrainerCall):
    if trainer.loss_override is not None and trainer.loss_override[0] == "model":
        # the override returns the model's own loss: for transformers' Trainer that is what compute_loss does, so
        # the base's decision (use_liger_kernel patches the model) stands; a TRL trainer's own loss path is replaced
        # by it, and what that does is not guessed at
        if trainer.class_name not in ("Trainer", "Seq2SeqTrainer"):
            return None
    elif trainer.loss_override is not None:
        return _override_diagnostic(self, ctx, trainer)
    args = ctx.trainer_args(trainer)
    if args is None and ctx.trainer_args_opaque(trainer):
        return None  # arguments come from the command line or elsewhere: use_liger_kernel may be set there
    if args is not None:
        liger = args.get("use_liger_kernel")
        if args.call.opaque_kwargs:
            return None
        # use_liger_kernel makes transformers' Trainer patch the model's forward with Liger's lce_forward, which
        # skips the logits only when it is given labels (liger-kernel 0.8.5 transformers/model/qwen2.py:100, llama.py:115
        # `skip_logits = self.training and (labels is not None or shift_labels is not None)`): Trainer's and SFTTrainer's loss. A TRL preference /
        # RL trainer calls the model without labels and reads `.logits`; its own fused path is the row's flag
        # (knowledge/trl_trainers.py), decided below.
        if (liger.is_(True) or liger.unknown) and (trainer.library != "trl" or trainer.class_name == "SFTTrainer"
                                                    or "use_liger_kernel" in row_flags(ctx, trainer)):
            path = resolve(ctx).loss.path
            if liger.is_(True) and path.value == "full" and path.why.startswith("use_liger_kernel=True does nothing"):
                # a lever that does nothing: the saving the user believes they have is not there
                return _diagnose(self, ctx, ctx.model_for(trainer.model_variable), trainer.call.span,
                                 f"{trainer.class_name} computes an unfused cross-entropy ({path.why})",
                                 _void_liger_fix(path.why))
            return None
    model = ctx.model_for(trainer.model_variable)
    if trainer.class_name in ("Trainer", "Seq2SeqTrainer"):
        loss = resolve(ctx).loss.path
        what = f"{ctx.spelling.trainer(trainer.class_name)} computes an unfused cross-entropy"
        if loss.value == "chunked-upcast":
            # the fp32 copy is one chunk, but the full 16-bit logits and every chunk's fp32 log-softmax stay
            what = f"{ctx.spelling.trainer(trainer.class_name)} computes its loss on the full logits with {loss.why}"
        diag = _diagnose(self, ctx, model, trainer.call.span, what, _liger_fix(ctx))
        if diag is None or args is None:
            return diag
        # Unsafe: Liger needs the liger-kernel package and a CUDA GPU, and its kernels are not bit-identical.
        if not ctx.versions.transformers.at_least(*libraries.LIGER_FIELD_SINCE):
            return diag  # no use_liger_kernel field before transformers 4.45: no fix
        edits = set_keyword(args.call, "use_liger_kernel", "True", ctx.text)
        return diag.with_fix(make_fix("unsafe", "Set use_liger_kernel=True (needs liger-kernel and a CUDA GPU)",
                                      *edits) if edits else None)
    if trainer.class_name != "SFTTrainer":
        return _trl_trainer_diagnostic(self, ctx, trainer, args) if trainer.library == "trl" else None
    trl = ctx.versions.trl
    chunked, forced_by = sft_loss(ctx, trainer, args)
    if chunked is None:
        return None
    if chunked:
        if forced_by is None:
            return None
        return _diagnose(self, ctx, model, trainer.call.span,
                         f"SFTTrainer builds the full logits because of {forced_by}", "drop it to keep TRL's chunked loss")
    fix = ('set loss_type="chunked_nll"' if trl.at_least(*libraries.CHUNKED_NLL_SINCE) else "upgrade TRL to >= 1.15 (chunked loss by default)"
           ) + " or " + _liger_fix(ctx)
    return _diagnose(self, ctx, model, trainer.call.span,
                     f"SFTTrainer in TRL {trl.version} computes an unfused cross-entropy", fix)


_OWN_LOSS = "the loss is computed on the model's full logits"
_LABELS_LOSS = "the model computes its loss from full logits (labels=)"
_LOGPROBS_LOSS = ("the loss gathers per-token log-probabilities from a log-softmax over the model's full logits "
                  "(`{call}`)")
# transformers 5.25.0 models/llama/modeling_llama.py LlamaForCausalLM.forward l.471-475: with labels,
# `logits = self.lm_head(hidden_states)` over every position (logits_to_keep=0), then loss/loss_utils.py
# ForCausalLMLoss l.62 `logits = logits.float()`: the full logits and an fp32 copy, the same in every causal LM.
_OUTPUT_LOSS = ("the model computes its loss from full logits (`{callee}(...)` returns `.loss`, so the batch "
                "carries labels)")


def _manual_losses(ctx: FileContext) -> list[tuple[Span, str | None, str]]:
    """Losses a hand-written loop computes: (where, the model variable or None, what is said), in file order."""
    model_vars = {m.variable for m in ctx.facts.models if m.variable}
    model_vars |= {c.target for c in ctx.facts.calls if c.is_api("peft.get_peft_model") and c.target}
    out = []
    for call in ctx.facts.calls:
        if call.is_api(*TORCH_CROSS_ENTROPY) and ctx.facts.logits_accessed:
            out.append((call.span, None, _OWN_LOSS))
        elif ctx.facts.logits_accessed and (call.is_api(*TORCH_LOG_SOFTMAX) or (
                call.short == "log_softmax" and call.receiver is not None and "logit" in call.receiver.lower())):
            # `logits.log_softmax(-1)` then `torch.gather(...)`: the [batch x seq x vocab] log-probabilities
            out.append((call.span, None, _LOGPROBS_LOSS.format(call=f"{call.receiver or call.short}.log_softmax"
                                                               if call.receiver else call.short)))
        elif call.has_kw("labels") and call.receiver is None and call.qualname in model_vars:
            out.append((call.span, call.qualname, _LABELS_LOSS))
    for callee, span in ctx.facts.forward_losses:
        if callee in model_vars and not any(where == span for where, _, _ in out):
            out.append((span, callee, _OUTPUT_LOSS.format(callee=callee)))
    return sorted(out, key=lambda found: (found[0].line, found[0].col))


def _one_vocabulary(ctx: FileContext) -> ModelLoad | None:
    """Several loads (a student and its teacher, a policy and its reference) whose vocabularies are all known and
    equal: a loss over "the model's logits" has that vocabulary whichever it is; the trained load speaks for it."""
    specs = [ctx.spec(m) for m in ctx.facts.models]
    if len(specs) < 2 or any(s is None or not s.vocab_size for s in specs) or len({s.vocab_size for s in specs}) > 1:
        return None
    trained = resolve(ctx).trained
    return trained.load if trained is not None else None


@rule("TL301", "unfused-cross-entropy-on-large-vocabulary", consumer="logits and loss",
      summary="A training loss materialises the full [batch x seq x vocab] logits (and their fp32 copy) on a "
              "large vocabulary.",
      fix_hint="`use_liger_kernel=True`, TRL's chunked SFT loss (TRL ≥ 1.15), or cut-cross-entropy",
      fix="unsafe", fix_runs_on="CUDA", verifies="memory")  # Liger's and cut-cross-entropy's kernels are Triton: a CUDA GPU only
def check(self: Rule, ctx: FileContext):
    if resolve(ctx).fused_loss_applied:
        return
    for trainer in ctx.facts.trainers:
        diag = _trainer_diagnostic(self, ctx, trainer)
        if diag is not None:
            # what a trainer's finding asks for is a fused loss: a framework config sets it its own way
            # (frameworks/fixes.py: axolotl's CutCrossEntropyPlugin, LLaMA-Factory's enable_liger_kernel)
            diag = replace_fields(diag, setting=Setting("use_liger_kernel", True, target=FUSED_LOSS))
            yield with_fit_note(ctx, diag, loss="liger")
    if ctx.facts.trainers:
        return
    for span, model_variable, what in _manual_losses(ctx)[:1]:
        diag = _diagnose(self, ctx, ctx.model_for(model_variable) or _one_vocabulary(ctx), span, what,
                         "use a fused linear cross-entropy (Liger's LigerFusedLinearCrossEntropyLoss or "
                         "cut-cross-entropy's linear_cross_entropy) or compute the loss in chunks")
        if diag is not None:
            yield diag
