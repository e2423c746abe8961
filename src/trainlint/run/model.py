"""The model(s) a run builds: which load trains, its geometry (from knowledge), its precision, its attention,
its adapters (LoRA) and quantization."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from trainlint.context import FileContext
from trainlint.facts import ModelLoad, Value, known
from trainlint.facts.values import UNSET
from trainlint.knowledge.heads import DEFAULT_NUM_LABELS, head_for
from trainlint.knowledge.libraries import (ATTENTION_DROPOUT_BY_DEFAULT, EAGER_SOFTMAX_MODEL_DTYPE, SANDWICH_NORMS,
                                          QK_NORMS_FP32, QK_NORMS_WHOLE_PROJECTION, SOFTCAPPED)
from trainlint.knowledge.models import ModelSpec, tied_default
from trainlint.knowledge.moe import FUSED_IN_4, LLAMA4_LINEARIZED, PEFT_CONVERTS
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (the estimator is imported only when a run is estimated: a one-file check stays light)
    from trainlint.memory.estimate import Geometry
from trainlint.run.attention import Fallback, kernel, math_fallback, requested
from trainlint.run.decided import Decided, from_value
from trainlint.run.precision import byte_widths

# peft/utils/constants.py TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING (0.21.2): the default targets
DEFAULT_LORA_TARGETS = {"llama": ("q_proj", "v_proj"), "mistral": ("q_proj", "v_proj"), "qwen2": ("q_proj", "v_proj"),
                        "qwen3": ("q_proj", "v_proj"), "gemma": ("q_proj", "v_proj"), "gemma2": ("q_proj", "v_proj"),
                        "mixtral": ("q_proj", "v_proj"), "phi3": ("qkv_proj",)}
LORA_R_DEFAULT = 8  # peft LoraConfig.r default
# Decoders whose blocks use LayerNorm without an fp32 round trip (memory.estimate.Geometry.rms_norm)
LAYERNORM_TYPES = frozenset({"gpt2", "gpt_neox", "gptj", "opt", "bloom", "falcon", "phi", "gpt_bigcode"})


class PlanError(Exception):
    """The script does not say enough to estimate anything; the message says what is missing."""


def training_model(ctx: FileContext) -> ModelLoad | None:
    """The load the trainer trains; else the first load with a known size; else the first load."""
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


def geometry(ctx: FileContext, model: ModelLoad) -> Decided[Geometry]:
    """The estimator's geometry of a load, from its spec (knowledge/models); raises PlanError when the model or a
    needed dimension is not known. `notes`: what was assumed (tied embedding default, a computed parameter count,
    the default num_labels)."""
    from trainlint.memory.estimate import Geometry

    assumptions: list[str] = []
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
    moe = spec.moe
    if moe is not None:  # the dense layers' MLP width (intermediate_size is the experts' own in Mixtral / OLMoE)
        needed["intermediate"] = moe.dense_intermediate or moe.expert_intermediate
    if needed["params"] is None and moe is not None and spec.moe_parameters is not None:
        needed["params"] = spec.moe_parameters[0]
        assumptions.append(f"parameter count computed from the mixture-of-experts geometry "
                           f"({needed['params']:,}, every expert resident; {spec.moe_parameters[1]:,} per token)")
    if needed["params"] is None and all(v is not None for k, v in needed.items() if k != "params"):
        needed["params"] = llama_like_params(needed, bool(tied))
        assumptions.append(f"parameter count computed from the geometry as a Llama-style decoder "
                           f"({needed['params']:,}); the config does not state it")
    missing = [k for k, v in needed.items() if v is None]
    if missing:
        raise PlanError(f"model {spec.id}: its {', '.join(missing)} are not known ({spec.source})")
    width, per_token = head_logits(model, spec, assumptions)
    geo = Geometry(**needed, tied=bool(tied), softcap=spec.model_type in SOFTCAPPED,
                   head_width=width, head_per_token=per_token, rms_norm=spec.model_type not in LAYERNORM_TYPES,
                   softmax_fp32=spec.model_type not in EAGER_SOFTMAX_MODEL_DTYPE,
                   attention_dropout=spec.model_type in ATTENTION_DROPOUT_BY_DEFAULT,
                   sandwich_norms=spec.model_type in SANDWICH_NORMS,
                   qk_norms=QK_NORMS_FP32.get(spec.model_type or "", 0),
                   qk_norm_per_head=spec.model_type not in QK_NORMS_WHOLE_PROJECTION,
                   **_moe_fields(ctx, model, spec, assumptions))
    return Decided(geo, model.model_id.origin if model.model_id.known else None, not assumptions,
                   spec.source or "", tuple(assumptions))


def _moe_fields(ctx: FileContext, model: ModelLoad, spec: ModelSpec, assumptions: list[str]) -> dict:
    """The mixture-of-experts part of the estimator's Geometry: experts, top-k, widths, routed layers (knowledge/moe.py);
    whether transformers fuses the experts (5.x, from the run's transformers version); whether the load asks for
    the router logits (`output_router_logits=True` in the call; else the config's own value)."""
    moe = spec.moe
    if moe is None:
        return {}
    fused = ctx.versions.transformers.at_least(5) or spec.model_type in FUSED_IN_4
    # axolotl's `llama4_linearized_experts` swaps Llama4TextExperts for per-expert nn.Linear modules (axolotl 0.18.0
    # monkeypatch/models/llama4/modeling.py:13-50, applied by loaders/patch_manager.py:434-442)
    linearized = spec.model_type in ("llama4", "llama4_text") and any(
        c.qualname == LLAMA4_LINEARIZED for c in ctx.facts.calls)
    if linearized:
        fused = False
        assumptions.append("llama4_linearized_experts: every expert is an nn.Linear (quantized with the base)")
    asked = model.call.kw("output_router_logits")
    router = asked.value is True if asked.known else moe.output_router_logits
    if asked.known and asked.value is True:
        assumptions.append(f"output_router_logits=True: every routed layer's router logits are kept for the aux loss "
                           f"(router_aux_loss_coef {moe.aux_loss_coef})")
    return dict(moe_experts=moe.experts, moe_top_k=moe.top_k, moe_intermediate=moe.expert_intermediate,
                moe_layers=moe.sparse_layers, moe_shared=moe.shared_intermediate, fused_experts=fused,
                experts_linearized=linearized,
                router_logits=router, peft_converts=spec.model_type in PEFT_CONVERTS and not linearized,
                moe_dense_eval=spec.model_type == "gpt_oss" and not ctx.versions.transformers.at_least(5),
                moe_dense_train=moe.dense_dispatch)


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


@dataclass(frozen=True)
class Lora:
    rank: int
    targets: tuple[str, ...]
    parameters: tuple[str, ...] = ()  # LoraConfig(target_parameters=...): PEFT on parameters (fused MoE experts)
    exclude: str | tuple[str, ...] | None = None  # LoraConfig(exclude_modules=...) when readable (run/vision.py)


def lora(ctx: FileContext, model_type: str | None) -> Decided[Lora | None]:
    """The LoRA adapters (rank, target modules) when PEFT is used; PEFT's defaults where the config does not say
    (peft LoraConfig.r 8, the per-architecture default targets), said in `notes`."""
    notes: list[str] = []
    if not ctx.uses_peft:
        return Decided(None, None, True, "no PEFT adapters")
    configs = list(ctx.facts.calls_to("peft.LoraConfig"))
    given = [t.call.kw("peft_config") for t in ctx.facts.trainers if t.call.kw("peft_config").known]
    given = [v.value for v in given if isinstance(v.value, dict) and v.value.get("__class__") == "LoraConfig"]
    default = DEFAULT_LORA_TARGETS.get(model_type or "", ("q_proj", "v_proj"))
    if not configs and not given:
        notes.append(f"LoRA config not found: assumed r={LORA_R_DEFAULT} on the default target modules")
        return Decided(Lora(LORA_R_DEFAULT, default), None, False, "LoRA config not found", tuple(notes))
    if configs:
        cfg = configs[0]
        r, targets, span = cfg.kw("r"), cfg.kw("target_modules"), cfg.span
        params = cfg.kw("target_parameters")
    else:  # `peft_config=get_peft_config(model_args)`: the LoRA settings the launch gave TRL's ModelConfig
        def value(key):
            item = given[0].get(key, UNSET)
            return item if isinstance(item, Value) else known(item)
        r, targets, span = value("r"), value("target_modules"), None
        params = value("target_parameters")
    rank = r.value if r.known and isinstance(r.value, int) else LORA_R_DEFAULT
    listed = [params.value] if params.known and isinstance(params.value, str) else params.value
    parameters = tuple(listed) if params.known and isinstance(listed, list) and all(
        isinstance(t, str) for t in listed) else ()
    if not params.known and not params.unset:
        notes.append("LoRA target_parameters not readable: adapters on parameters (fused experts) not counted")
    if not r.known:
        notes.append(f"LoRA rank {'not set' if r.unset else 'not readable'}: assumed r={LORA_R_DEFAULT}")
    excl = cfg.kw("exclude_modules") if configs else UNSET
    exclude = excl.value if excl.known and isinstance(excl.value, str) else tuple(excl.value) if excl.known and \
        isinstance(excl.value, list) and all(isinstance(t, str) for t in excl.value) else None
    if targets.known and targets.value == "all-linear":
        return Decided(Lora(rank, ("all-linear",), parameters, exclude), span, not notes, "LoraConfig", tuple(notes))
    if targets.known and isinstance(targets.value, list) and all(isinstance(t, str) for t in targets.value):
        return Decided(Lora(rank, tuple(targets.value), parameters, exclude), span, not notes, "LoraConfig",
                       tuple(notes))
    notes.append(f"LoRA target_modules {'not set' if targets.unset else 'not readable'}: assumed PEFT's default "
                 f"{list(default)}")
    return Decided(Lora(rank, default, parameters), span, False, "LoraConfig", tuple(notes))


@dataclass(frozen=True)
class ModelRun:
    """One model load as it will run. Each decision is resolved on first use, then fixed."""

    load: ModelLoad
    spec: ModelSpec | None
    ctx: FileContext = field(repr=False, compare=False)

    @cached_property
    def id(self) -> Decided[str | None]:
        return from_value(self.load.model_id)

    @cached_property
    def quantization(self) -> Decided[str | None]:
        """"4bit" | "8bit" | None (16/32-bit weights)."""
        return from_value(self.load.quantization)

    @cached_property
    def precision(self) -> Decided[tuple[int, int]]:
        """(weight bytes, activation bytes) per element: run/precision.py byte_widths."""
        return byte_widths(self.ctx, self.load)

    @cached_property
    def attention(self) -> Decided[str | None]:
        """The attention implementation in effect (requested, or the library default): run/attention.py."""
        return requested(self.ctx, self.load, self.spec)

    @cached_property
    def math_fallback(self) -> Fallback | None:
        """SDPA's math-kernel fallback on CUDA (TL102), or None."""
        return math_fallback(self.ctx, self.load, self.spec, self.attention.value)

    @cached_property
    def kernel(self) -> Decided[str]:
        """"eager" | "sdpa" | "sdpa-math": what the estimator counts for the attention scores."""
        impl = self.attention
        fallback = self.math_fallback if impl.value not in ("eager", "paged|eager") else None
        return kernel(impl, fallback)

    @property
    def geometry(self) -> Decided[Geometry]:
        """Raises PlanError when the model or its dimensions are not known (not cached: it may raise)."""
        return geometry(self.ctx, self.load)
