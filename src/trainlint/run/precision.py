"""Precision: the dtype the weights are loaded in, the dtype activations are computed in, and whether the run
autocasts to 16 bit.

Library facts (the default load dtype):
- transformers 4.x (read in 4.57.6 modeling_utils.py `_get_dtype`): no `dtype`/`torch_dtype` -> "set fp32 as the
  default dtype for BC" (torch.get_default_dtype()).
- transformers 5.x (read in 5.0.0 and 5.24.0 modeling_utils.py `PreTrainedModel.from_pretrained`: `dtype =
  kwargs.pop("dtype", None)` ... `if dtype is None: dtype = "auto"`): the checkpoint's config.json dtype
  (modeling_utils._get_dtype: "auto" -> config.dtype).
- TRL: a model given by name is loaded in fp32 unless model_init_kwargs sets dtype (trl/trainer/utils.py
  create_model_from_path: dtype defaults to "float32"); TRL configs: `bf16 = not fp16` when bf16 is None
  (trl 1.16.0 trainer/base_config.py `__post_init__`; per version from knowledge/arguments.json, effective_values).
"""

from __future__ import annotations

import re

from trainlint.context import FileContext
from trainlint.facts import ArgsObject, ModelLoad
from trainlint.memory import dtype_bytes
from trainlint.run.decided import Decided

FP32 = {"float32", "torch.float32", "float", "torch.float", "fp32"}


def computes_in_16_bit(ctx: FileContext, args: ArgsObject | None) -> str | None:
    """"bf16" / "fp16" when the trainer's arguments make it compute in 16 bit; None when not, or not known."""
    if args is None:
        return None
    for flag in ("bf16", "fp16"):
        if args.get(flag).is_(True):
            return flag
    if args.call.opaque_kwargs or any(args.get(f).unknown for f in ("bf16", "fp16")):
        return None
    if args.library == "trl" and args.get("bf16").unset and args.get("fp16").unset:
        from trainlint.knowledge.post_init import effective_values  # (lazy: ~13 ms)

        effective = effective_values(args.class_name, ctx.versions, {})
        if effective is not None and effective.get("bf16") is True:
            return "bf16"
    return None


def loaded_in_fp32(ctx: FileContext, model: ModelLoad) -> str | None:
    """Why the weights are fp32 (for the message), or None when they are not, or it is not known."""
    dtype = model.dtype
    # `torch_dtype=None` / `dtype=None` is the same as none given (transformers 4.40.2 modeling_utils.py:2970
    # `torch_dtype = kwargs.pop("torch_dtype", None)`, :3490 `if torch_dtype is not None:`; 5.0.0 :3901-3935
    # `if dtype is None: dtype = "auto"`): e.g. trl 0.8.6 examples/scripts/dpo.py passes
    # `torch_dtype=model_config.torch_dtype`, whose ModelConfig default is None (model_config.py:21)
    none = dtype.known and dtype.value is None
    given = "" if not none else f"dtype None: the {dtype.via}" if (
        dtype.via.endswith(" default") or " default (" in dtype.via) else "dtype=None"
    if dtype.known and isinstance(dtype.value, str):
        if dtype.value in FP32:
            if dtype.via.endswith(" default") or " default (" in dtype.via:  # `dtype=model_args.dtype`, unset
                return f"dtype {dtype.value}: the {dtype.via}"
            return f"dtype={dtype.value} is explicit"
        if dtype.value != "auto":
            return None
    elif not (dtype.unset or none):
        return None
    if model.kind == "trainer_string":
        return None  # the trainer loads it: only a dtype its model_init_kwargs give is read here
    tv = ctx.versions.transformers
    if (dtype.unset or none) and not tv.at_least(5):
        if none:
            return f"{given}, and transformers {tv.version} loads in fp32 when it is None"
        return f"no dtype given, and transformers {tv.version} loads in fp32 by default"
    spec = ctx.spec(model)
    if spec is not None and spec.dtype in FP32:
        how = (f"{given}: transformers {tv.version} loads \"auto\"" if none else 'dtype="auto"' if dtype.known
               else f"no dtype given: transformers {tv.version} loads \"auto\"")
        return f"{how} and the checkpoint's config.json says float32"
    return None


def cast_later(ctx: FileContext, model: ModelLoad) -> bool:
    """`model.to(torch.bfloat16)`, `model.half()`, `model.bfloat16()` after loading: the weights do not stay fp32."""
    if model.variable is None:
        return model.kind != "trainer_string"  # (the trainer loads that one and holds it)
    v = re.escape(model.variable)
    return re.search(rf"\b{v}\s*\.\s*(?:half|bfloat16|float16)\s*\(|\b{v}\s*\.\s*to\s*\([^)]*(?:float16|half|dtype)",
                     ctx.text) is not None


def byte_widths(ctx: FileContext, model: ModelLoad) -> Decided[tuple[int, int]]:
    """(weight bytes, activation bytes) per element for a model load; `notes` say what was assumed."""
    notes: list[str] = []
    value = model.dtype
    args = ctx.main_args
    autocast = args is not None and (args.get("bf16").is_(True) or args.get("fp16").is_(True) or (
        args.library == "trl" and args.get("bf16").unset and args.get("fp16").unset))
    if value.known and isinstance(value.value, str) and value.value != "auto":
        w = dtype_bytes(value.value, 2)
    elif model.kind == "trainer_string":
        w = 4  # trl/trainer/utils.py create_model_from_path: dtype defaults to "float32"
        notes.append("TRL loads a model given by name in fp32 unless model_init_kwargs sets dtype")
    elif ctx.versions.transformers.at_least(5) or (value.known and value.value == "auto"):
        stated = ctx.spec(model).dtype if ctx.spec(model) is not None else None
        if stated:
            w = dtype_bytes(stated, 2)  # modeling_utils._get_dtype: "auto" -> config.dtype
        else:
            w = 2
            notes.append("dtype 'auto': assumed the checkpoint is bf16, as published LLM checkpoints are")
    else:
        w = 4  # transformers <= 4.x: torch's default dtype unless dtype/torch_dtype is given
        notes.append(f"transformers {ctx.versions.transformers.version} loads in fp32 unless dtype is given")
    if model.quantization.known and model.quantization.value:
        w = 2
    act = 2 if (w == 2 or autocast) else 4
    sure = value.known and isinstance(value.value, str) and value.value != "auto" and not value.assumed
    return Decided((w, act), value.origin if value.known else None, sure,
                   f"dtype={value.value}" if value.known else "dtype not given", tuple(notes))
