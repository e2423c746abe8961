"""TL501 frozen-weights-in-fp32: weights that do not train (LoRA's base model, a DPO/KTO reference model, a
distillation teacher) are loaded in fp32 while the run computes in 16 bit: twice the bytes for nothing.

Docs: rules/TL501.md. The precision decisions are the Run's (trainlint/run/precision.py). Library facts (the
default load dtype):
- transformers 4.x (read in 4.57.6 modeling_utils.py `_get_dtype`): no `dtype`/`torch_dtype` -> "set fp32 as the
  default dtype for BC" (torch.get_default_dtype()).
- transformers 5.x (read in 5.0.0 and 5.24.0 modeling_utils.py `PreTrainedModel.from_pretrained`: `dtype =
  kwargs.pop("dtype", None)` ... `if dtype is None: dtype = "auto"`): the checkpoint's config.json dtype.
- TRL configs: `bf16 = not fp16` when bf16 is None (trl 1.16.0 trainer/base_config.py `__post_init__`; per
  version from knowledge/arguments.json, effective_values).
Full fine-tuning in fp32 under mixed precision is not this: those fp32 weights are the master weights.
"""

from __future__ import annotations

from trainlint.context import FileContext
from trainlint.diagnostics import Fix
from trainlint.edits import make_fix, replace, set_keyword
from trainlint.facts import ModelLoad
from trainlint.knowledge import libraries
from trainlint.memory import fmt_bytes
from trainlint.rules.base import Rule, rule
from trainlint.run import resolve
from trainlint.run.precision import cast_later, computes_in_16_bit, loaded_in_fp32

# Reference and teacher models, by the trainer keyword they are passed as.
FROZEN_KEYWORDS = {"ref_model": "the reference model", "teacher_model": "the teacher model"}
# ... which these trainers also take as their second positional argument: `DPOTrainer(model, model_ref, ...)`
# (trl 0.8.6 and 1.x dpo_trainer.py / kto_trainer.py `__init__(self, model, ref_model, ...)`; gkd_trainer.py
# `__init__(self, model, teacher_model, ...)`). Not PPOTrainer, whose old signature starts with its config.
SECOND_POSITIONAL = {"DPOTrainer": "ref_model", "KTOTrainer": "ref_model", "GKDTrainer": "teacher_model"}


def _frozen_role(ctx: FileContext, model: ModelLoad) -> str | None:
    for trainer in ctx.facts.trainers:
        for keyword, role in FROZEN_KEYWORDS.items():
            passed = trainer.call.arg_name(1, keyword) if SECOND_POSITIONAL.get(trainer.class_name) == keyword \
                else trainer.call.kw_name(keyword)
            if model.variable is not None and passed == model.variable:
                return role
    if ctx.uses_peft and not (model.quantization.known and model.quantization.value):
        trained = resolve(ctx).trained
        if trained is not None and trained.load is model and not model.quantization.unknown:
            return "LoRA's frozen base model"
    return None


@rule("TL501", "frozen-weights-in-fp32", consumer="weights and precision",
      summary="Weights that do not train (LoRA base, reference model, teacher) are loaded in fp32 while the run "
              "computes in 16 bit.",
      fix_hint="load frozen weights (LoRA base, reference model, teacher) with `dtype=torch.bfloat16`",
      fix="unsafe", verifies="memory")
def check(self: Rule, ctx: FileContext):
    args = ctx.main_args
    precision = computes_in_16_bit(ctx, args)
    if precision is None:
        return
    for model in ctx.facts.models:
        # a model the trainer loads from its name (`SFTTrainer(model="org/id")`) with model_init_kwargs' dtype
        if model.kind not in ("from_pretrained", "trainer_string"):
            continue
        role = _frozen_role(ctx, model)
        why = loaded_in_fp32(ctx, model) if role else None
        if why is None or cast_later(ctx, model) or _undecided_alternative(ctx, model):
            continue
        spec = ctx.spec(model)
        target = "float16" if precision == "fp16" else "bfloat16"
        if spec is not None and spec.num_parameters:
            n = spec.num_parameters
            cost = (f"its {n / 1e9:.2f} B parameters take ~{fmt_bytes(4 * n)} in fp32 where {target} takes "
                    f"~{fmt_bytes(2 * n)}: ~{fmt_bytes(2 * n)} saved")
        else:
            cost = "half of its weight memory would be saved"
        # `dtype=` is a from_pretrained keyword from 4.56.0 (libraries.DTYPE_KEYWORD_SINCE); before, `torch_dtype=`
        keyword = "dtype" if ctx.versions.transformers.at_least(*libraries.DTYPE_KEYWORD_SINCE) else "torch_dtype"
        load = f"load it with {keyword}=torch.{target}" if model.kind == "from_pretrained" else \
            f"have the trainer load it with dtype \"{target}\" (model_init_kwargs)"
        message = (f"{role} is loaded in fp32 ({why}) while the run computes in {precision}; it does not train, so "
                   f"{cost}; {load}")
        yield self.diagnostic(ctx, model.anchor, message, model.dtype).with_fix(_fix(ctx, model, keyword, target))


def _undecided_alternative(ctx: FileContext, model: ModelLoad) -> bool:
    """The load sits in a branch that nothing decides (`if 'mpt' in model_args.model_name_or_path:` with the model
    unknown), and the variable it binds has another load that is not in fp32: which one runs is not known, so a
    finding on this one would be a guess."""
    if all(condition.known for condition, _ in model.call.guards):
        return False
    others = [m for m in ctx.facts.models if m is not model and m.variable == model.variable
              and m.kind == "from_pretrained"]
    return any(loaded_in_fp32(ctx, other) is None for other in others)


def _fix(ctx: FileContext, model: ModelLoad, keyword: str, target: str) -> Fix | None:
    """Unsafe: bf16 needs a GPU with bf16 support (Ampere or newer; not T4/V100), and 16-bit frozen weights
    change the numerics slightly (the forward runs in 16 bit instead of autocasting fp32 weights)."""
    torch_alias = next((alias for alias, qual in ctx.facts.imports if qual == "torch"), None)
    if torch_alias is None or model.call.opaque_kwargs:
        return None
    value = f"{torch_alias}.{target}"
    message = f"Load with {keyword}={value}"
    dtype = model.dtype
    if dtype.known:
        name = "dtype" if model.call.has_kw("dtype") else "torch_dtype"
        span = model.call.kw_span(name)
        if dtype.via != "literal" or span is None:
            return None
        # the keyword the script wrote (torch_dtype= loads in every release), unless it is a `dtype=` the targeted
        # release does not take (before 4.56)
        written = name if name == "torch_dtype" else keyword
        return make_fix("unsafe", f"Load with {written}={value}", replace(span, f"{written}={value}"))
    edits = set_keyword(model.call, keyword, value, ctx.text)
    return make_fix("unsafe", message, *edits) if edits else None
