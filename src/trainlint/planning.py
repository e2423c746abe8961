"""What a script trains, as a memory Plan: read from its facts (model, dtype, quantization, LoRA,
checkpointing, attention, loss path, batch, sequence length, optimizer, sharding). Every value the
script does not fix is listed as an assumption; nothing is silently invented."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from trainlint.context import FileContext
from trainlint.facts import ModelLoad, Value, known
from trainlint.facts.values import UNSET
from trainlint.knowledge.heads import DEFAULT_NUM_LABELS, head_for
from trainlint.knowledge.libraries import SOFTCAPPED
from trainlint.knowledge.models import tied_default
from trainlint.memory import dtype_bytes
from trainlint.memory.estimate import EvalPhase, Geometry, Plan
from trainlint.rules.tl101_eager_attention import attention_in_effect
from trainlint.rules.tl102_sdpa_math_fallback import math_fallback
from trainlint.rules.tl301_unfused_cross_entropy import loss_path, trl_logits_shape, trl_reference_copy
from trainlint.rules.tl302_eval_logits import TRAINERS as EVAL_LOOP_TRAINERS
from trainlint.rules.tl302_eval_logits import evaluates, logits_reduced

# peft/utils/constants.py TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING (0.21.2): the default targets
DEFAULT_LORA_TARGETS = {"llama": ("q_proj", "v_proj"), "mistral": ("q_proj", "v_proj"), "qwen2": ("q_proj", "v_proj"),
                        "qwen3": ("q_proj", "v_proj"), "gemma": ("q_proj", "v_proj"), "gemma2": ("q_proj", "v_proj"),
                        "mixtral": ("q_proj", "v_proj"), "phi3": ("qkv_proj",)}
LORA_R_DEFAULT = 8
# Decoders whose blocks use LayerNorm without an fp32 round trip (memory.estimate.Geometry.rms_norm)
LAYERNORM_TYPES = frozenset({"gpt2", "gpt_neox", "gptj", "opt", "bloom", "falcon", "phi", "gpt_bigcode"})  # peft LoraConfig.r default

_OPTIM_CLASSES = {"AdamW": "adamw", "Adam": "adam", "AdamW8bit": "adamw_8bit", "Adam8bit": "adamw_8bit",
                  "PagedAdamW8bit": "paged_adamw_8bit", "PagedAdamW32bit": "paged_adamw_32bit",
                  "PagedAdamW": "paged_adamw_32bit", "Adafactor": "adafactor"}


class PlanError(Exception):
    """The script does not say enough to estimate anything; the message says what is missing."""


@dataclass(frozen=True)
class Overrides:
    batch: int | None = None
    seq: int | None = None
    world_size: int | None = None


def training_model(ctx: FileContext) -> ModelLoad | None:
    for trainer in ctx.facts.trainers:
        for model in ctx.facts.models:
            if trainer.model_variable and model.variable == trainer.model_variable:
                return model
    with_spec = [m for m in ctx.facts.models if ctx.spec(m) is not None and ctx.spec(m).num_parameters]
    return with_spec[0] if with_spec else (ctx.facts.models[0] if ctx.facts.models else None)


def llama_like_params(g: dict, tied: bool) -> int:
    """V*H*(1 if tied else 2) + L*(H*q + 2*H*kv + q*H + 3*H*F + 2*H) + H (the formula in models.json)."""
    h, q, kv = g["hidden"], g["heads"] * g["head_dim"], g["kv_heads"] * g["head_dim"]
    per_layer = h * q + 2 * h * kv + q * h + 3 * h * g["intermediate"] + 2 * h
    return g["vocab"] * h * (1 if tied else 2) + g["layers"] * per_layer + h


def geometry(ctx: FileContext, model: ModelLoad, assumptions: list[str] | None = None) -> Geometry:
    assumptions = assumptions if assumptions is not None else []
    spec = ctx.spec(model)
    ident = model.model_id.value if model.model_id.known else model.class_name
    if spec is None:
        raise PlanError(f"model {ident!r} is unknown (not in the catalog, no local config.json); pass a local model "
                        f"directory, or add it to the Hugging Face cache")
    needed = dict(vocab=spec.vocab_size, hidden=spec.hidden_size, layers=spec.num_layers, heads=spec.num_heads,
                  kv_heads=spec.num_kv_heads, head_dim=spec.head_dim, intermediate=spec.intermediate_size,
                  params=spec.num_parameters)
    tied = spec.tie_word_embeddings
    if tied is None and (default := tied_default(spec.model_type)) is not None:
        tied = default
        assumptions.append(f"embedding {'tied to' if tied else 'separate from'} the LM head: the config does not set "
                           f"tie_word_embeddings, and {spec.model_type}'s config class defaults it to {tied} "
                           f"(knowledge/tied_defaults.json)")
    if needed["params"] is None and all(v is not None for k, v in needed.items() if k != "params"):
        needed["params"] = llama_like_params(needed, bool(tied))
        assumptions.append(f"parameter count computed from the geometry as a Llama-style decoder "
                           f"({needed['params']:,}); the config does not state it")
    missing = [k for k, v in needed.items() if v is None]
    if missing:
        raise PlanError(f"model {spec.id}: its {', '.join(missing)} are not known ({spec.source})")
    width, per_token = head_logits(model, spec, assumptions)
    return Geometry(**needed, tied=bool(tied), softcap=spec.model_type in SOFTCAPPED,
                    head_width=width, head_per_token=per_token, rms_norm=spec.model_type not in LAYERNORM_TYPES)


def head_logits(model: ModelLoad, spec, assumptions: list[str]) -> tuple[int | None, bool]:
    """(logits per row, a row per token?) for a non-LM head; (None, True) for the vocabulary."""
    head = head_for(model.class_name, model.kind)
    if head is None or head.kind == "vocab":
        return None, True
    if head.kind == "none":
        return 0, False
    labels = model.call.kw("num_labels")
    if labels.known and isinstance(labels.value, int) and not isinstance(labels.value, bool) and labels.value > 0:
        return labels.value, head.per_token
    if spec.num_labels:
        return spec.num_labels, head.per_token
    assumptions.append(f"{model.class_name}: num_labels {DEFAULT_NUM_LABELS} (transformers' PretrainedConfig default; "
                       f"neither the call nor the config sets it)")
    return DEFAULT_NUM_LABELS, head.per_token


def _dtype(ctx: FileContext, model: ModelLoad, notes: list[str]) -> tuple[int, int]:
    """(weight bytes, activation bytes)."""
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
    return w, act


def _lora(ctx: FileContext, model_type: str | None, notes: list[str]) -> tuple[int | None, tuple[str, ...]]:
    if not ctx.uses_peft:
        return None, ()
    configs = list(ctx.facts.calls_named("LoraConfig"))
    given = [t.call.kw("peft_config") for t in ctx.facts.trainers if t.call.kw("peft_config").known]
    given = [v.value for v in given if isinstance(v.value, dict) and v.value.get("__class__") == "LoraConfig"]
    if not configs and not given:
        notes.append(f"LoRA config not found: assumed r={LORA_R_DEFAULT} on the default target modules")
        return LORA_R_DEFAULT, DEFAULT_LORA_TARGETS.get(model_type or "", ("q_proj", "v_proj"))
    if configs:
        cfg = configs[0]
        r, targets = cfg.kw("r"), cfg.kw("target_modules")
    else:  # `peft_config=get_peft_config(model_args)`: the LoRA settings the launch gave TRL's ModelConfig
        def value(key):
            item = given[0].get(key, UNSET)
            return item if isinstance(item, Value) else known(item)
        r, targets = value("r"), value("target_modules")
    rank = r.value if r.known and isinstance(r.value, int) else LORA_R_DEFAULT
    if not r.known:
        notes.append(f"LoRA rank {'not set' if r.unset else 'not readable'}: assumed r={LORA_R_DEFAULT}")
    if targets.known and targets.value == "all-linear":
        return rank, ("all-linear",)
    if targets.known and isinstance(targets.value, list) and all(isinstance(t, str) for t in targets.value):
        return rank, tuple(targets.value)
    default = DEFAULT_LORA_TARGETS.get(model_type or "", ("q_proj", "v_proj"))
    notes.append(f"LoRA target_modules {'not set' if targets.unset else 'not readable'}: assumed PEFT's default "
                 f"{list(default)}")
    return rank, default


def _optimizer(ctx: FileContext, notes: list[str]) -> str:
    for call in ctx.facts.calls:
        if call.short in _OPTIM_CLASSES and (call.qualname.startswith(("torch.", "bitsandbytes", "bnb", "transformers"))):
            return _OPTIM_CLASSES[call.short]
        if call.short == "SGD" and call.qualname.startswith("torch."):
            momentum = call.kw("momentum")
            return "sgd_momentum" if momentum.known and momentum.value else "sgd"
    args = ctx.main_args
    if args is not None:
        optim = args.get("optim")
        if optim.known and isinstance(optim.value, str):
            return optim.value
        if not optim.unset:
            notes.append("optimizer not readable: assumed AdamW")
            return "adamw"
        if ctx.versions.transformers.at_least(4, 54):
            # training_args.py (4.54.0 l.1292; 5.25.0 l.806-813): "adamw_torch_fused" when torch >= 2.8 is installed
            notes.append(f"optim not set: transformers {ctx.versions.transformers.version}'s default adamw_torch_fused "
                         f"(assuming torch >= 2.8 where it runs; older torch gets adamw_torch)")
            return "adamw_torch_fused"
        return "adamw_torch"
    notes.append("no optimizer found: assumed AdamW")
    return "adamw"


def _sharding(ctx: FileContext, notes: list[str]) -> str | None:
    found = _args_sharding(ctx, notes)
    launched = ctx.launch.sharding
    if found is None and launched is not None and launched.known:
        where = f" ({launched.origin.file}:{launched.origin.line})" if launched.origin and launched.origin.file else ""
        notes.append(f"{launched.value} from the launch's {launched.via} config{where}")
        return launched.value
    return found


def _args_sharding(ctx: FileContext, notes: list[str]) -> str | None:
    args = ctx.main_args
    if args is None:
        return None
    fsdp = args.get("fsdp")
    if fsdp.known and isinstance(fsdp.value, str) and fsdp.value:
        if "full_shard" in fsdp.value:
            return "zero3"
        if "shard_grad_op" in fsdp.value:
            return "zero2"
    ds = args.get("deepspeed")
    config = None
    if ds.known and isinstance(ds.value, dict):
        config = ds.value
    elif ds.known and isinstance(ds.value, str):
        path = Path(ds.value)
        path = path if path.is_absolute() else ctx.path.parent / path
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            notes.append(f"DeepSpeed config {ds.value} not readable: sharding not counted")
    if isinstance(config, dict):
        stage = (config.get("zero_optimization") or {}).get("stage")
        if stage in (1, 2, 3):
            return f"zero{stage}"
    return None


def plan_for(ctx: FileContext, overrides: Overrides) -> tuple[Plan, ModelLoad, list[str], list[str]]:
    """(plan, model, assumptions, unknowns). unknowns name the consumers that rest on values not known."""
    model = training_model(ctx)
    if model is None:
        raise PlanError("no model load found (from_pretrained, from_config, a model class, or a TRL trainer's model=)")
    notes: list[str] = []
    geo = geometry(ctx, model, notes)
    spec = ctx.spec(model)
    unknown: list[str] = []
    w, act = _dtype(ctx, model, notes)
    rank, targets = _lora(ctx, spec.model_type, notes)
    impl, why = attention_in_effect(ctx, model, spec)
    if impl is None:
        notes.append(f"attention: {why}; assumed SDPA")
    attention = "eager" if impl in ("eager", "paged|eager") else "sdpa"
    if attention == "sdpa" and (fallback := math_fallback(ctx, model, spec)) is not None:
        attention = "sdpa-math"
        notes.append(f"SDPA on CUDA runs the math kernel ({'; '.join(fallback.refusals)}): fp32 scores per layer, "
                     f"assuming batches without padding (TL102)")
    gc = ctx.gradient_checkpointing
    if gc is None:
        notes.append("gradient checkpointing not readable: assumed off")
    batch = overrides.batch or (ctx.batch.value if ctx.batch.known else None)
    seq = overrides.seq or (ctx.seq_len.value if ctx.seq_len.known else None)
    if batch is None:
        unknown.append("batch")
    elif not overrides.batch and ctx.batch.via == "library default":
        notes.append(f"batch {batch}: the library default (per_device_train_batch_size)")
    if seq is None:
        unknown.append("sequence length")
    elif not overrides.seq and ctx.seq_len.via == "SFTConfig.max_length default":
        notes.append(f"sequence length {seq}: SFTConfig's default max_length")
    loss = loss_path(ctx)
    trl_shape = trl_logits_shape(ctx) if loss == "full" else None
    if trl_shape is not None and batch is not None:
        rows, reference, trainer = trl_shape
        if rows > 1:
            batch *= rows
            notes.append(f"{trainer} runs chosen and rejected together: {rows} x the batch per forward")
        if reference is not None:
            notes.append(f"{trainer} builds the {reference} model's logits in the same step")
    reference_copy = trl_reference_copy(ctx)
    if reference_copy is not None:
        notes.append(f"{reference_copy} keeps a frozen copy of the model as its reference (no PEFT, no ref_model, "
                     f"no precompute_ref_log_probs)")
    sharding = _sharding(ctx, notes)
    world = overrides.world_size or 1
    if sharding and not overrides.world_size:
        notes.append(f"{sharding} sharding found: assumed 1 GPU; pass --world-size")
    plan = Plan(
        geometry=geo,
        batch=batch or 1,
        seq=seq or 1,
        dtype_bytes=w,
        act_bytes=act,
        quantization=model.quantization.value if model.quantization.known else None,
        lora_r=rank,
        lora_targets=targets or ("q_proj", "v_proj"),
        checkpointing=bool(gc),
        attention=attention,
        loss=loss,
        reference_logits=trl_shape is not None and trl_shape[1] is not None,
        reference_weights=reference_copy is not None,
        optimizer=_optimizer(ctx, notes),
        world_size=world,
        sharding=sharding,
        evaluation=eval_phase(ctx, loss, notes),
        assumptions=tuple(notes),
    )
    return plan, model, notes, unknown


def eval_phase(ctx: FileContext, loss: str, notes: list[str]) -> EvalPhase | None:
    """The evaluation step of the first trainer that runs Trainer's evaluation loop (tl302_eval_logits.TRAINERS)
    with an eval_dataset; None when no evaluation runs. Facts: transformers 5.25.0 trainer.py."""
    trainer = next((t for t in ctx.facts.trainers if t.class_name in EVAL_LOOP_TRAINERS), None)
    if trainer is None or trainer.call.kw("eval_dataset").unset or trainer.call.kw("eval_dataset").is_(None):
        return None
    args = ctx.trainer_args(trainer)
    if not evaluates(ctx, trainer, args):
        return None

    def arg(key):
        return args.get(key) if args is not None else UNSET

    batch = arg("per_device_eval_batch_size")
    eval_batch = batch.value if batch.known and isinstance(batch.value, int) and batch.value > 0 else 8
    if not batch.known:
        notes.append("eval batch 8: TrainingArguments' per_device_eval_batch_size default")
    # l.2920: `evaluate` passes prediction_loss_only=True without compute_metrics; else args.prediction_loss_only
    metrics = trainer.call.kw("compute_metrics")
    loss_only = metrics.unset or metrics.is_(None) or arg("prediction_loss_only").is_(True)
    if loss_only:
        # l.3317: loss-only eval passes skip_logits=True with use_liger_kernel (not read in releases before 5.25.0);
        # TRL's SFTTrainer keeps its fused LM head (trl 1.16.0 sft_trainer.py `prediction_step`, l.1679)
        fused = (loss == "liger" and ctx.versions.transformers.at_least(5, 25)) or loss == "chunked"
        return EvalPhase(eval_batch, logits=not fused)
    if logits_reduced(ctx, trainer, args) is not False:
        return EvalPhase(eval_batch)  # (argmax ids, batch metrics or generated ids: nothing logits-sized is kept)
    mixed = arg("bf16").is_(True) or arg("fp16").is_(True)  # accelerate's convert_outputs_to_fp32
    kept = 4 if mixed else _dtype(ctx, training_model(ctx), [])[0]
    evalset = next((e for e in ctx.facts.eval_sets if e.trainer_index == trainer.call.index), None)
    batches = -(-evalset.size // eval_batch) if evalset is not None and evalset.size else None
    steps = arg("eval_accumulation_steps")  # l.3090: moves all_preds to the CPU every N steps
    if steps.known and isinstance(steps.value, int) and steps.value > 0:
        batches = min(batches, steps.value) if batches else steps.value
    elif batches is None:
        notes.append("eval set size not written: the eval logits kept on the GPU counted for one eval batch")
    return EvalPhase(eval_batch, kept_bytes=kept, kept_batches=batches)
