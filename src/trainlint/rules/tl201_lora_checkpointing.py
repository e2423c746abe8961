"""TL201 lora-checkpointing-without-input-grads: reentrant checkpointing + LoRA with nothing that makes
the checkpointed blocks' inputs require grad, so the adapters get no gradient.

Docs: rules/TL201.md (its table lists, per library version, every setup that is and is not hooked).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainlint.context import FileContext, is_peft_from_pretrained
from trainlint.edits import insert_line_after, make_fix, non_reentrant_kwargs, set_keyword
from trainlint.diagnostics import Span, Fix
from trainlint.facts import Call, TrainerCall
from trainlint.facts.names import PEFT_WRAP, TORCH_CHECKPOINT
from trainlint.knowledge import libraries, trl_trainers, vision_towers
from trainlint.rules.base import Rule, rule
from trainlint.run import resolve
from trainlint.run.checkpointing import GC_ENABLE, GC_KWARGS, reentrant_in_effect
from trainlint.run.checkpointing import kwargs_of as _kwargs_of

HEAD_TASKS = {"SEQ_CLS", "TOKEN_CLS", "QUESTION_ANS"}
FIX = ('call model.enable_input_require_grads() before training, or pass '
       'gradient_checkpointing_kwargs={"use_reentrant": False}')


@dataclass(frozen=True)
class PeftWrap:
    call: Call
    base_variable: str | None  # the model that was wrapped
    variable: str | None  # the PeftModel's name


def peft_wraps(ctx: FileContext) -> list[PeftWrap]:
    out = []
    old_adapters = not libraries.add_adapter_hooks(ctx.versions.transformers)
    for call in ctx.facts.calls:
        if call.is_api(*PEFT_WRAP) or is_peft_from_pretrained(call):
            out.append(PeftWrap(call, call.arg_name(0, "model"), call.target))
        elif call.short == "add_adapter" and old_adapters and call.receiver:
            # before 4.34 nothing hooks transformers-native adapters: the model is adapted in place
            out.append(PeftWrap(call, call.receiver, call.receiver))
    return out


def _text_model(ctx: FileContext, base_variable: str | None) -> bool | None:
    """Whether the wrapped model's main input is input_ids (the 5.x automatic hook fires only then)."""
    model = ctx.model_for(base_variable)
    if model is None:
        return None
    spec = ctx.spec(model)
    if spec is not None:
        return spec.main_input_name == "input_ids"
    name = model.class_name
    if name.startswith("Auto") and ("CausalLM" in name or "Seq2SeqLM" in name or "MaskedLM" in name):
        return True
    return None


def _quantized(ctx: FileContext, base_variable: str | None) -> bool | None:
    model = ctx.model_for(base_variable)
    if model is None or not model.quantization.known:
        return None
    return model.quantization.value is not None


def _trainable_head(ctx: FileContext) -> bool:
    """A head that trains anyway turns the crash into silent non-training of the adapters."""
    for call in ctx.facts.calls_to("peft.LoraConfig"):
        modules = call.kw("modules_to_save")
        if modules.known and modules.value:
            return True
        task = call.kw("task_type")
        if task.known and isinstance(task.value, str) and task.value in HEAD_TASKS:
            return True
    return False


def _hooked_explicitly(ctx: FileContext) -> bool:
    if any(c.short == "enable_input_require_grads" for c in ctx.facts.calls):
        return True
    if any(c.short == "add_adapter" for c in ctx.facts.calls) and libraries.add_adapter_hooks(ctx.versions.transformers):
        return True  # transformers-native adapters set _hf_peft_config_loaded, which 4.34.0+ hook (libraries.py)
    for call in ctx.facts.calls_to("peft.prepare_model_for_kbit_training"):
        use_gc = call.kw("use_gradient_checkpointing")
        quantized = _quantized(ctx, call.arg_name(0, "model"))
        # peft utils/other.py: the hook is installed only for quantized models, with use_gradient_checkpointing
        if quantized is not False and not use_gc.is_(False):
            return True
    return False


def _symptom(ctx: FileContext) -> str:
    if _trainable_head(ctx):
        return ("the trainable head keeps training while the LoRA adapters inside the checkpointed blocks never "
                "receive a gradient (silent: no error, adapters stay at their init)")
    return "the first backward fails with `element 0 of tensors does not require grad and does not have a grad_fn`"


def _gc_defaults(ctx: FileContext) -> tuple[bool, bool] | None:
    """(reentrant by default, input_ids models hooked) for the targeted transformers; None for a build whose
    behaviour is not known (a 5.0.0 dev snapshot): then nothing version-dependent is claimed."""
    tv = ctx.versions.transformers
    reentrant, hooks = libraries.gc_reentrant_default(tv), libraries.hooks_input_ids_models(tv)
    return None if reentrant is None or hooks is None else (reentrant, hooks)


def _manual_gc(ctx: FileContext, wraps: list[PeftWrap]):
    defaults = _gc_defaults(ctx)
    if defaults is None:
        return
    v5, hooks_ids = not defaults[0], defaults[1]
    tv = ctx.versions.transformers.version
    for call in ctx.facts.calls:
        if call.short not in GC_ENABLE:
            continue
        reentrant = reentrant_in_effect(_kwargs_of(call), v5, via_trainer=False)
        if reentrant is not True:
            continue
        # a wrap in a branch that cannot run with this call (`if args.use_lora: get_peft_model(...)` and
        # `if not args.use_lora: model.gradient_checkpointing_enable()`) does not adapt the model it checkpoints
        wraps_here = [w for w in wraps if not w.call.excludes(call)]
        before = [w for w in wraps_here if w.call.index < call.index]
        if not before:
            # Enabled before get_peft_model: PeftModel.__init__ -> _prepare_model_for_gradient_checkpointing
            # hooks it, except for quantized models (peft_model.py l.728).
            wrap_after = [w for w in wraps_here if w.call.index > call.index]
            if wrap_after and _quantized(ctx, wrap_after[0].base_variable) is True:
                yield call.span, ("checkpointing enabled on a quantized model before get_peft_model without "
                                  "prepare_model_for_kbit_training: PEFT does not hook quantized models"), ()
            continue
        text = _text_model(ctx, before[-1].base_variable)
        if hooks_ids and text is not False:
            continue  # 5.x hooks every input_ids model (and an unknown input is not guessed)
        why = (f"transformers {tv} hooks the inputs only for input_ids models, and this model's main input is not "
               f"input_ids" if hooks_ids else
               f"transformers {tv} defaults to reentrant checkpointing and hooks the inputs only for "
               f"transformers-native adapters, not get_peft_model")
        yield call.span, f"{call.short}() after the model became a PeftModel: {why}", ()


def _trainer_is_peft(trainer: TrainerCall, wraps: list[PeftWrap]) -> bool:
    # a wrap bound to the trainer's model name after the trainer was built (a notebook that reloads the trained adapter
    # with AutoPeftModelForCausalLM for inference into `model`) is not the model the trainer got
    if trainer.model_variable and any(w.variable == trainer.model_variable and w.call.index < trainer.call.index
                                      for w in wraps):
        return True
    span = trainer.call.span
    return any(span.line <= w.call.span.line <= span.end_line and w.call.index > trainer.call.index for w in wraps)


def _trl_why(ctx: FileContext, trainer: TrainerCall, wraps: list[PeftWrap]) -> str | None:
    """Why a TRL trainer leaves the inputs unhooked (knowledge/trl_trainers.py, per trainer and version), or None
    when it hooks them itself (or its handling was not read)."""
    name, trl = trainer.class_name, ctx.versions.trl
    hook = trl_trainers.input_hook(name, trl)
    given = trainer.call.has_kw("peft_config") and not trainer.call.kw("peft_config").is_(None)
    if given and trainer.call.kw("peft_config").unknown:
        return None
    wrapped = _trainer_is_peft(trainer, wraps)
    if hook == "peft_config" and wrapped:
        return f"{name} in TRL {trl.version} returns early for a model that is already a PeftModel, so nothing hooks its inputs"
    if hook == "trainer" and (given or wrapped):
        how = "wraps the model with get_peft_model" if given and not wrapped else "takes the PeftModel as it is"
        return (f"{name} in TRL {trl.version} {how} and leaves checkpointing to transformers' Trainer, "
                f"which does not hook the inputs")
    return None


def _trainers(ctx: FileContext, wraps: list[PeftWrap]):
    defaults = _gc_defaults(ctx)
    if defaults is None:
        return
    v5, hooks_ids = not defaults[0], defaults[1]
    tv = ctx.versions.transformers.version
    for trainer in ctx.facts.trainers:
        args = ctx.trainer_args(trainer)
        if args is None:
            continue
        enabled, kwargs = ctx.checkpointing(args)
        if enabled is not True:
            continue
        flag = next((args.get(n) for n in ("gradient_checkpointing", "activation_checkpointing")
                     if args.get(n).known), None)
        decided = (flag, kwargs)  # a launch's `--gradient_checkpointing True` is where the trap is set
        if trainer.library == "trl":
            why = _trl_why(ctx, trainer, wraps)
            if why is None:
                continue  # the trainer hooks the inputs itself (or its handling is not known)
            if reentrant_in_effect(kwargs, v5, via_trainer=True) is not True:
                continue
            text = _text_model(ctx, next((w.base_variable for w in wraps), trainer.model_variable))
            if hooks_ids and text is not False:
                continue
            yield trainer.call.span, why, decided
            continue
        if not _trainer_is_peft(trainer, wraps):
            continue
        if reentrant_in_effect(kwargs, v5, via_trainer=True) is not True:
            continue
        text = _text_model(ctx, next((w.base_variable for w in wraps), None))
        if hooks_ids and text is not False:
            continue
        why = (f"the Trainer enables reentrant checkpointing and transformers {tv} hooks the inputs only for "
               f"input_ids models" if hooks_ids else
               f"the Trainer enables checkpointing with transformers {tv}'s reentrant default and nothing hooks "
               f"the inputs of a get_peft_model model")
        yield trainer.call.span, why, decided


def _hand_rolled(ctx: FileContext):
    for call in ctx.facts.calls:
        if call.library != "torch" or not call.is_api(*TORCH_CHECKPOINT):
            continue  # only torch's own checkpoint functions, matched through imports
        flag = call.kw("use_reentrant")
        if flag.is_(False) or flag.unknown:
            continue
        how = "use_reentrant=True" if flag.is_(True) else "use_reentrant omitted (torch's default is reentrant)"
        yield call.span, f"hand-rolled torch.utils.checkpoint with {how} around frozen, adapted blocks", ()
        return


@rule("TL201", "lora-checkpointing-without-input-grads", consumer="activations, adapters' gradient flow",
      summary="LoRA with reentrant gradient checkpointing and nothing making the inputs require grad: the adapters "
              "inside the checkpointed blocks never receive a gradient.",
      fix_hint='`model.enable_input_require_grads()`, or `gradient_checkpointing_kwargs={"use_reentrant": False}`',
      fix="safe", verifies="adapter-grads")
def check(self: Rule, ctx: FileContext):
    wraps = peft_wraps(ctx)
    if not ctx.uses_peft:
        return
    findings: list[tuple[Span, str, tuple]] = []
    if not _hooked_explicitly(ctx):
        findings.extend(_hand_rolled(ctx) if wraps else [])
        findings.extend(_manual_gc(ctx, wraps))
        findings.extend(_trainers(ctx, wraps))
    symptom = _symptom(ctx)
    for span, why, decided in findings[:1]:
        diag = self.diagnostic(ctx, span, f"LoRA with reentrant checkpointing and nothing enabling input grads "
                                          f"({why}): {symptom}; {_advice(ctx)}", *decided)
        yield diag.with_fix(_fix(ctx, wraps, span))
    if findings:
        return
    vision = _vision_tower(ctx, wraps)
    if vision is not None:
        span, message, decided = vision
        yield self.diagnostic(ctx, span, message, *decided).with_fix(_non_reentrant_fix(ctx, span))


def _vision_tower(ctx: FileContext, wraps: list[PeftWrap]) -> tuple[Span, str, tuple] | None:
    """The vision-language case (issue 28): the text embeddings are hooked (by the script, PEFT, TRL or the
    Trainer, all through `enable_input_require_grads`), but LoRA also adapts the vision tower's blocks, which run
    under reentrant checkpointing on the patch embedding of `pixel_values`. Decided per adapted module group:
    only the vision adapters are judged here (knowledge/vision_towers.py has the per-version facts)."""
    if ctx.framework_config and any(c.qualname.startswith("llamafactory.") for c in ctx.facts.calls):
        # LLaMA-Factory's own checkpoint function marks every checkpointed block's inputs (rules/TL201.md,
        # Framework configs); an axolotl config is judged like a script (its targets, freeze_mm_modules as
        # exclude_modules, its reentrant default: frameworks/axolotl.py)
        return None
    model = ctx.model_for(wraps[0].base_variable if wraps else None)
    if model is None:
        return None
    spec = ctx.spec(model)
    model_id = model.model_id.value if model.model_id.known else None
    fam = vision_towers.family_of(model.class_name, model_id, spec.model_type if spec is not None else None)
    if fam is None:
        return None
    adapted: list[str] = []
    target_value = None
    for cfg in ctx.facts.calls_to("peft.LoraConfig"):
        targets, exclude = cfg.kw("target_modules"), cfg.kw("exclude_modules")
        if not targets.known or (not exclude.unset and not exclude.known):
            continue  # not readable (or PEFT's default, which has no entry for these model types): not guessed
        hit = vision_towers.adapted_blocks(fam, targets.value, exclude.value if exclude.known else None)
        if hit:
            adapted, target_value = hit, targets
            break
    if not adapted:
        return None
    ck = resolve(ctx).checkpointing
    if ck.on.value is not True or ck.reentrant.value is not True:
        return None
    tv = ctx.versions.transformers
    if vision_towers.vision_input_hooked(fam, tv) is not False or not vision_towers.tower_checkpointed(fam, tv):
        return None
    if _tower_hooked_by_script(ctx):
        return None
    span = ck.on.span or ck.reentrant.span or (ctx.facts.trainers[0].call.span if ctx.facts.trainers else None) \
        or model.anchor
    how = (f"transformers {tv.version}'s enable_input_require_grads() hooks only get_input_embeddings(), the text "
           f"embeddings" if not tv.at_least(*vision_towers.HOOKS_EVERY_SUBMODEL_SINCE) else
           f"transformers {tv.version}'s enable_input_require_grads() hooks each sub-model's get_input_embeddings(), "
           f"but {fam.name}'s vision model exposes none")
    names = ", ".join(f"{fam.shown}.*.{leaf}" for leaf in adapted)
    if ctx.framework_config:  # axolotl: no script to hook the tower in; its own key freezes the tower instead
        advice = (f"{ctx.spelling.advise('gradient_checkpointing_kwargs', {'use_reentrant': False})}, or, if the "
                  f"tower is not meant to train, {ctx.spelling.advise('freeze_mm_modules', True)}")
    else:
        advice = (f"pass gradient_checkpointing_kwargs={{\"use_reentrant\": False}}, or hook the vision input: "
                  f"model.{fam.patch_embed}.register_forward_hook(lambda m, i, o: o.requires_grad_(True))")
    message = (f"LoRA adapters inside the {fam.name} vision tower ({names}) get no gradient: the vision blocks run "
               f"under reentrant checkpointing ({ck.reentrant.why}) on the patch embedding of pixel_values, which "
               f"does not require grad, and {how}; the text adapters train while the vision adapters stay at their "
               f"init (silent); {advice}")
    return span, message, (target_value,)


def _tower_hooked_by_script(ctx: FileContext) -> bool:
    """A forward hook the script registers on a vision module (`model.visual.patch_embed.register_forward_hook`),
    the workaround the vision fine-tuning repositories use."""
    lines = ctx.text.splitlines()
    for call in ctx.facts.calls:
        if call.short != "register_forward_hook" or call.span.file:
            continue
        text = "\n".join(lines[call.span.line - 1:call.span.end_line])
        head = text.split("register_forward_hook")[0]
        if any(word in head for word in vision_towers.TOWER_WORDS):
            return True
    return False


def _non_reentrant_fix(ctx: FileContext, span: Span) -> dict | None:
    """Safe: non-reentrant checkpointing gives every checkpointed block's adapters their gradient whatever
    requires grad at its input (torch's recommended mode)."""
    if not ctx.versions.transformers.at_least(*libraries.GC_KWARGS_SINCE):
        return None
    kwargs = non_reentrant_kwargs(ctx.text)
    for call in ctx.facts.calls:
        if call.span == span and call.short in GC_ENABLE:
            kw = next((k for k in GC_KWARGS if call.has_kw(k)), GC_KWARGS[0])
            edits = set_keyword(call, kw, kwargs, ctx.text)
            return make_fix("safe", f"Pass {kw}={kwargs}", *edits) if edits else None
    args = ctx.main_args
    if args is None or args.call.span.file:
        return None
    kw = "activation_checkpointing_kwargs" if args.call.has_kw("activation_checkpointing") else \
        "gradient_checkpointing_kwargs"
    edits = set_keyword(args.call, kw, kwargs, ctx.text)
    return make_fix("safe", f"Pass {kw}={kwargs}", *edits) if edits else None


def _advice(ctx: FileContext) -> str:
    """FIX, less what the targeted transformers does not have (issue 19)."""
    tv = ctx.versions.transformers
    if not tv.at_least(*libraries.INPUT_REQUIRE_GRADS_SINCE):
        return (f"enable_input_require_grads needs transformers >= 4.27 and gradient_checkpointing_kwargs >= 4.35; "
                f"this file targets {tv.version}: upgrade it, or register a forward hook on the input embeddings "
                f"that calls output.requires_grad_(True); no fix offered")
    if not tv.at_least(*libraries.GC_KWARGS_SINCE):
        return (f"call model.enable_input_require_grads() before training (gradient_checkpointing_kwargs needs "
                f"transformers >= 4.35; this file targets {tv.version})")
    return FIX


def _fix(ctx: FileContext, wraps: list[PeftWrap], span: Span) -> Fix | None:
    """Safe: `enable_input_require_grads()` only registers a forward hook that marks the embeddings'
    output as requiring grad; `use_reentrant=False` is torch's recommended checkpoint mode."""
    for call in ctx.facts.calls:
        if call.span == span and call.short in ("checkpoint", "checkpoint_sequential"):
            edits = set_keyword(call, "use_reentrant", "False", ctx.text)
            return make_fix("safe", "Pass use_reentrant=False", *edits) if edits else None
    named = [w for w in wraps if w.variable]
    if named and ctx.versions.transformers.at_least(*libraries.INPUT_REQUIRE_GRADS_SINCE):  # the method from 4.27
        wrap = named[-1]
        return make_fix("safe", f"Call {wrap.variable}.enable_input_require_grads() after get_peft_model",
                        insert_line_after(wrap.call.span.end_line, f"{wrap.variable}.enable_input_require_grads()",
                                          ctx.text))
    if not ctx.versions.transformers.at_least(*libraries.GC_KWARGS_SINCE):
        return None  # gradient_checkpointing_kwargs does not exist in the targeted transformers
    for call in ctx.facts.calls:
        if call.span == span and call.short in GC_ENABLE:
            kw = next((k for k in GC_KWARGS if call.has_kw(k)), GC_KWARGS[0])
            edits = set_keyword(call, kw, non_reentrant_kwargs(ctx.text), ctx.text)
            return make_fix("safe", f"Pass {kw}={non_reentrant_kwargs(ctx.text)}", *edits) if edits else None
    for trainer in ctx.facts.trainers:
        if trainer.call.span == span:
            args = ctx.trainer_args(trainer)
            if args is None:
                return None
            kw = "activation_checkpointing_kwargs" if args.call.has_kw("activation_checkpointing") else \
                "gradient_checkpointing_kwargs"
            edits = set_keyword(args.call, kw, non_reentrant_kwargs(ctx.text), ctx.text)
            return make_fix("safe", f"Pass {kw}={non_reentrant_kwargs(ctx.text)}", *edits) if edits else None
    return None
