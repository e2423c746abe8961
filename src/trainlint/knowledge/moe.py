"""Mixture-of-experts geometry read from a config.json (routed experts, top-k, expert width, shared experts, which
layers are sparse, the router) and the parameter count of such a decoder, total and active per token.

Every key is read as transformers 5.25.0 reads it (file:line below); the spellings differ per family:
- number of routed experts: `num_experts` (Qwen2-MoE, Qwen3-MoE, OLMoE), `num_local_experts` (Mixtral, GPT-OSS,
  Llama 4), `n_routed_experts` (DeepSeek-V2/V3);
- experts per token: `num_experts_per_tok` (all in transformers), `experts_per_token` (GPT-OSS's own config.json key);
- expert width: `moe_intermediate_size` (Qwen2/3-MoE, DeepSeek) else `intermediate_size` (Mixtral, OLMoE, GPT-OSS);
- sparse layers: Qwen2/3-MoE's `decoder_sparse_step` / `mlp_only_layers` (qwen2_moe/modeling_qwen2_moe.py:358:
  sparse when `layer_idx not in mlp_only_layers and (layer_idx + 1) % decoder_sparse_step == 0`), DeepSeek's
  `first_k_dense_replace` (deepseek_v2/modeling_deepseek_v2.py:412: sparse when `layer_idx >= first_k_dense_replace`);
  every layer in Mixtral, OLMoE, GPT-OSS;
- shared experts: Qwen2-MoE's `shared_expert_intermediate_size` with a sigmoid `shared_expert_gate` (hidden -> 1,
  modeling_qwen2_moe.py:338), DeepSeek's `n_shared_experts` x `moe_intermediate_size` (modeling_deepseek_v2.py:125),
  Llama 4's one shared expert of `intermediate_size` (llama4/modeling_llama4.py:167 `Llama4TextMLP(config)`, whose
  width defaults to `config.intermediate_size`, l.89-93);
- Llama 4's sparse layers: `moe_layers`, else every `interleave_moe_layer_step`-th layer
  (llama4/configuration_llama4.py:175-184); its dense layers' MLP is `intermediate_size_mlp` wide (modeling_llama4.py:407).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Families whose experts were nn.Linear modules in transformers 4.x and are fused 3D parameters in 5.x, so PEFT
# rewrites 4.x-style targets for them (transformers 5.25.0 conversion_mapping.py:49 _MODEL_TO_CONVERSION_PATTERN,
# the "mixtral" and "qwen2_moe" patterns; peft 0.21.2 utils/transformers_weight_conversion.py:331-351, 402-481):
# target_modules gate_proj + up_proj (Mixtral: w1 + w3) become target_parameters gate_up_proj at twice the rank,
# down_proj (w2) becomes down_proj, the router `gate` becomes gate.weight, and "all-linear" means all of them.
# GPT-OSS was fused from its first release: "all-linear" reaches its attention only.
PEFT_CONVERTS = frozenset({"mixtral", "minimax", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v2", "deepseek_v3",
                           "dots1", "ernie4_5_moe", "glm4_moe", "hunyuan_v1_moe", "flex_olmo", "qwen3_next"})

# Families whose experts were 3D parameters already in transformers 4.x: GPT-OSS (4.55.0
# models/gpt_oss/modeling_gpt_oss.py GptOssExperts gate_up_proj), Llama 4 (Llama4TextExperts)
FUSED_IN_4 = frozenset({"gpt_oss", "llama4", "llama4_text"})

# Families whose transformers implementation runs EVERY routed expert on EVERY token and zeroes the unselected ones by
# their routing score, in training as in evaluation: Llama 4's `Llama4TextMoe.forward` repeats the tokens once per
# expert (`hidden_states.repeat(num_experts, 1)`: transformers 5.25.0 llama4/modeling_llama4.py:172, 4.57.1 l.160,
# 4.53.0 l.152; 4.51.0 l.177-183 gathers every token for every expert, its comment: "we used all experts on all
# tokens"), its router keeps all scores (`full_like(-inf).scatter_` then sigmoid: 5.25.0 l.153-155), and
# `Llama4TextExperts.forward` is a bmm over all experts (l.79-83). The activations are the experts' x tokens', not
# top-k x tokens' (tests/test_moe.py measures it on a model transformers builds).
DENSE_DISPATCH = frozenset({"llama4", "llama4_text"})

# axolotl's `llama4_linearized_experts: true` replaces Llama4TextExperts with one nn.Linear per expert and projection
# (axolotl 0.18.0 monkeypatch/models/llama4/modeling.py:13-50, `patch_llama4_linearized_modeling`, applied by
# loaders/patch_manager.py:434-442): bitsandbytes then quantizes the experts like any Linear. The qualname the axolotl
# front end gives that call (frameworks/axolotl.py), which run/model.py reads.
LLAMA4_LINEARIZED = "axolotl.monkeypatch.models.llama4.modeling.patch_llama4_linearized_modeling"

# model_type -> how its routed layers are counted; families not listed are read from the keys alone
_ALL_SPARSE = frozenset({"mixtral", "olmoe", "gpt_oss", "phimoe", "granitemoe", "jetmoe"})


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _first(d: dict, *keys: str) -> Any:
    for key in keys:
        if d.get(key) is not None:
            return d[key]
    return None


@dataclass(frozen=True)
class Moe:
    """The routed feed-forward of a mixture-of-experts decoder."""

    experts: int  # routed experts per sparse layer (all resident: weights, gradients and optimizer state)
    top_k: int  # experts each token is sent to
    expert_intermediate: int  # one expert's MLP width
    sparse_layers: int  # layers whose MLP is routed; the others are dense MLPs of `dense_intermediate`
    dense_intermediate: int | None = None  # the dense layers' MLP width (intermediate_size), when some are dense
    shared_intermediate: int = 0  # the shared expert(s)' total width in each sparse layer (0: none)
    shared_gate: bool = False  # Qwen2-MoE: a sigmoid gate (hidden -> 1) on the shared expert
    router_bias: bool = False  # GPT-OSS's router has a bias (gpt_oss/modeling_gpt_oss.py:123)
    expert_bias: bool = False  # GPT-OSS's experts have biases (gate_up 2I, down H; modeling_gpt_oss.py:75,77)
    aux_loss_coef: float | None = None  # router_aux_loss_coef (aux_loss_alpha for DeepSeek)
    output_router_logits: bool = False  # the config's default; the forward then returns every layer's router logits
    dense_dispatch: bool = False  # every expert runs on every token (DENSE_DISPATCH)

    @property
    def experts_run(self) -> int:
        """Experts each token goes through in transformers' forward: all of them under dense dispatch, else top-k."""
        return self.experts if self.dense_dispatch else self.top_k

    def expert_params(self, hidden: int) -> int:
        """One routed expert: gate, up and down projections (+ GPT-OSS's biases)."""
        return 3 * hidden * self.expert_intermediate + ((2 * self.expert_intermediate + hidden) if self.expert_bias
                                                         else 0)

    def sparse_mlp_params(self, hidden: int, active_only: bool = False) -> int:
        """One sparse layer's MLP: the routed experts (all, or the top-k a token uses), the router, the shared
        expert(s) and their gate."""
        n = self.top_k if active_only else self.experts
        router = hidden * self.experts + (self.experts if self.router_bias else 0)
        shared = 3 * hidden * self.shared_intermediate + (hidden if self.shared_gate else 0)
        return n * self.expert_params(hidden) + router + shared


def moe_from_config(config: dict, layers: int | None) -> Moe | None:
    """The MoE geometry of a config.json-shaped dict (its text_config for a multimodal one); None for a dense model
    or when the expert count, top-k or width is not stated."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    model_type = text.get("model_type") or config.get("model_type")
    experts = _int(_first(text, "num_experts", "num_local_experts", "n_routed_experts"))
    top_k = _int(_first(text, "num_experts_per_tok", "experts_per_token", "num_experts_per_token"))
    width = _int(_first(text, "moe_intermediate_size")) or _int(text.get("intermediate_size"))
    if not experts or not top_k or not width or not layers:
        return None
    dense_width = _int(text.get("intermediate_size")) if text.get("moe_intermediate_size") is not None else None
    if model_type in _ALL_SPARSE:
        sparse = layers
    elif model_type in DENSE_DISPATCH:  # Llama 4: moe_layers, else every interleave_moe_layer_step-th layer
        listed = text.get("moe_layers")
        step = _int(text.get("interleave_moe_layer_step")) or 1
        sparse = len(listed) if isinstance(listed, list) else len(range(step - 1, layers, step))
        dense_width = _int(text.get("intermediate_size_mlp")) or 16384  # Llama4TextConfig's default (l.132)
    elif "first_k_dense_replace" in text or "n_routed_experts" in text:
        k = _int(text.get("first_k_dense_replace")) or 0
        sparse = max(layers - k, 0)
    else:
        step = _int(text.get("decoder_sparse_step")) or 1
        only = set(text.get("mlp_only_layers") or [])
        sparse = sum(1 for i in range(layers) if i not in only and (i + 1) % step == 0)
    shared, gate = 0, False
    if _int(text.get("shared_expert_intermediate_size")):
        shared, gate = text["shared_expert_intermediate_size"], model_type in ("qwen2_moe", None)
    elif _int(text.get("n_shared_experts")):
        shared = text["n_shared_experts"] * width
    elif model_type in DENSE_DISPATCH:
        shared = width
    coef = _first(text, "router_aux_loss_coef", "aux_loss_alpha")
    return Moe(experts=experts, top_k=top_k, expert_intermediate=width, sparse_layers=sparse,
               dense_intermediate=dense_width if sparse < layers else None, shared_intermediate=shared,
               shared_gate=gate, router_bias=model_type == "gpt_oss", expert_bias=model_type == "gpt_oss",
               aux_loss_coef=float(coef) if isinstance(coef, (int, float)) and not isinstance(coef, bool) else None,
               output_router_logits=text.get("output_router_logits") is True,
               dense_dispatch=model_type in DENSE_DISPATCH)


def attention_params(text: dict, hidden: int, heads: int, kv_heads: int, head_dim: int) -> int:
    """One attention block's parameters, as transformers builds it for these families: grouped-query projections
    (+ q/k/v biases for Qwen2-MoE's `qkv_bias`, all four for `attention_bias`, GPT-OSS's per-head sinks), Qwen3-MoE's
    per-head q/k norms, OLMoE's full-width q/k norms; DeepSeek's multi-head latent attention (`kv_lora_rank`)."""
    model_type = text.get("model_type")
    if _int(text.get("kv_lora_rank")):  # deepseek_v2/modeling_deepseek_v2.py:295-330
        nope, rope, v = text["qk_nope_head_dim"], text["qk_rope_head_dim"], text["v_head_dim"]
        rank, q_rank = text["kv_lora_rank"], _int(text.get("q_lora_rank"))
        q = hidden * heads * (nope + rope) if not q_rank else hidden * q_rank + q_rank + q_rank * heads * (nope + rope)
        return q + hidden * (rank + rope) + rank + rank * heads * (nope + v) + heads * v * hidden
    q, kv = heads * head_dim, kv_heads * head_dim
    total = 2 * hidden * q + 2 * hidden * kv
    if model_type == "qwen2_moe" and text.get("qkv_bias", True):
        total += q + 2 * kv
    elif text.get("attention_bias"):
        total += q + 2 * kv + hidden
    if model_type == "qwen3_moe":
        total += 2 * head_dim
    elif model_type == "olmoe":
        total += q + kv
    if model_type == "gpt_oss":
        total += heads
    return total


def moe_params(config: dict, tied: bool, active_only: bool = False) -> int | None:
    """All parameters of a mixture-of-experts decoder from its config (every expert resident), or those a token uses
    (`active_only`: the top-k routed experts, the router, the shared experts, attention, norms and embeddings).
    Checked against the checkpoints' published totals and against the models transformers builds
    (tests/test_moe.py)."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    vocab, hidden, layers = (_int(text.get(k)) for k in ("vocab_size", "hidden_size", "num_hidden_layers"))
    heads = _int(text.get("num_attention_heads"))
    moe = moe_from_config(config, layers)
    if not (vocab and hidden and layers and heads) or moe is None:
        return None
    kv_heads = _int(text.get("num_key_value_heads")) or heads
    head_dim = _int(text.get("head_dim")) or hidden // heads
    attn = attention_params(text, hidden, heads, kv_heads, head_dim)
    dense_layers = layers - moe.sparse_layers
    mlp = moe.sparse_layers * moe.sparse_mlp_params(hidden, active_only)
    mlp += dense_layers * 3 * hidden * (moe.dense_intermediate or 0)
    return vocab * hidden * (1 if tied else 2) + layers * (attn + 2 * hidden) + mlp + hidden
