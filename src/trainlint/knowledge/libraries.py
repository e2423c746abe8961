"""What transformers / trl / peft do, by version. Each fact names the source it was read from.

Read from the installed sources (transformers 5.24.0, trl 1.16.0, peft 0.21.2) and older wheels; see
../shared/research/library-facts.md for the experiments behind them.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache

from trainlint.knowledge.versions import LibraryVersion

# transformers 5.24.0 modeling_utils.py:get_correct_attn_implementation (l.1855):
#   applicable_attention = "sdpa" if requested_attention is None else requested_attention
# and it silently falls back to "eager" when the class has `_supports_sdpa = False`.
# Verified with from_config (no attn_implementation) in 5.24.0: these get eager.
#   models/gemma2/modeling_gemma2.py: `_supports_sdpa = False  # sdpa does not support softcapping`
#   models/gpt_oss/modeling_gpt_oss.py: `_supports_sdpa = False`
#   models/bloom, models/mpt: no `_supports_sdpa` at all.
EAGER_BY_DEFAULT_5X = frozenset({"gemma2", "gpt_oss", "bloom", "mpt"})
# ... but not in every 5.x: gemma2 has `_supports_sdpa = True` in 5.16.1 (l.360) and 5.20.0 (l.352), and
# `_supports_sdpa = False  # sdpa does not support softcapping` from 5.21.0 (l.352); read in the wheels.
EAGER_BY_DEFAULT_SINCE = {"gemma2": (5, 21)}
# Architectures whose attention has a logit softcap, which SDPA cannot express (gemma2 source comment).
# t5gemma and vaultgemma: `attn_logit_softcapping` defaults to 50.0 in their configs, as gemma2's (5.24.0
# models/t5gemma/configuration_t5gemma.py, models/vaultgemma/configuration_vaultgemma.py); gemma3's defaults to None.
SOFTCAPPED = frozenset({"gemma2", "t5gemma", "vaultgemma"})
# Eager attention that runs its softmax in the model dtype, not upcast to fp32 (transformers 5.25.0
# models/gpt2/modeling_gpt2.py:64 `softmax(attn_weights, dim=-1)`; models/llama/modeling_llama.py:197 and the
# architectures copied from it upcast: `softmax(..., dtype=torch.float32)`), with attention dropout in training
# by default (GPT2Config.attn_pdrop = 0.1, models/gpt2/configuration_gpt2.py:86; modeling_gpt2.py:68).
EAGER_SOFTMAX_MODEL_DTYPE = frozenset({"gpt2"})
ATTENTION_DROPOUT_BY_DEFAULT = frozenset({"gpt2"})
# Blocks with four RMSNorms computing in fp32 (models/gemma2/modeling_gemma2.py:291-295, 56-63; Gemma 3 the same:
# 5.25.0 models/gemma3/modeling_gemma3.py Gemma3DecoderLayer l.367-370 and forward l.384-400, Gemma3RMSNorm l.119-133):
# memory.estimate.sandwich_norm_bytes_per_token.
SANDWICH_NORMS = frozenset({"gemma2", "gemma3", "gemma3_text"})
# Attention that normalises q and k per head with an RMSNorm computing in fp32, by model type: the bytes per element a
# trained norm weight's gradient keeps of the normalised output (memory.estimate.qk_norm_bytes_per_token). Gemma 3:
# 5.25.0 models/gemma3/modeling_gemma3.py Gemma3Attention q_norm / k_norm l.310-311, applied l.329-330, Gemma3RMSNorm's
# fp32 `output * (1.0 + weight)` (4); Qwen3-VL / Qwen3-VL-MoE text: qwen3_vl/modeling_qwen3_vl.py l.495-513,
# Qwen3VLTextRMSNorm l.422-436 `weight * hidden_states.to(input_dtype)` (2), qwen3_vl_moe/modeling_qwen3_vl_moe.py
# l.283-302. Qwen3 / Qwen3-MoE: qwen3/modeling_qwen3.py Qwen3Attention q_norm / k_norm over head_dim l.229-230, applied
# l.245-246, Qwen3RMSNorm l.50-64 `self.weight * hidden_states.to(input_dtype)` (2); qwen3_moe/modeling_qwen3_moe.py
# l.147-148, l.163-164, Qwen3MoeRMSNorm l.286 the same. OLMo2: olmo2/modeling_olmo2.py Olmo2Attention l.209-210,
# applied l.224-225 to the whole q_proj / k_proj output (not per head), Olmo2RMSNorm l.49-63 `(self.weight *
# hidden_states).to(input_dtype)`, an fp32 product (4). OLMoE: olmoe/modeling_olmoe.py l.222-225, l.239-240, whole
# projections too, OlmoeRMSNorm l.44-58 Llama-style (2). Not modelled: Llama 4's weightless L2 qk_norm on its RoPE
# layers (llama4/modeling_llama4.py l.334-360) and StableLM's optional per-head LayerNorm (qk_layernorm).
QK_NORMS_FP32 = {"gemma3": 4, "gemma3_text": 4, "qwen3_vl": 2, "qwen3_vl_moe": 2, "qwen3": 2, "qwen3_moe": 2,
                 "olmo2": 4, "olmoe": 2}
# ...of those, the ones normalising each whole projection (one row per token) rather than each head.
QK_NORMS_WHOLE_PROJECTION = frozenset({"olmo2", "olmoe"})

# SDPA became the default attention in transformers 4.36 (`_autoset_attn_implementation`); before it,
# eager was used unless the script chose flash-attention (`use_flash_attention_2=True`).
SDPA_DEFAULT_SINCE = (4, 36)
# `from_pretrained(attn_implementation=...)`: transformers 4.36.0 modeling_utils.py l.1235 pops it (4.35.2 has no
# such keyword: an unknown keyword reaches the model's __init__ and the load fails), accepting "eager", "sdpa"
# and "flash_attention_2" (l.1284); "flex_attention" is accepted from 4.47.0 (modeling_utils.py l.1548; not in
# 4.46.0).
# `gradient_checkpointing_kwargs`: a TrainingArguments field and a `gradient_checkpointing_enable()` parameter
# from transformers 4.35.0 (training_args.py l.1137, modeling_utils.py l.1850); 4.34.1 has neither.
GC_KWARGS_SINCE = (4, 35)
# `attn_implementation="flash_attention_2"` (or `use_flash_attention_2=True`) without the flash-attn package:
# 4.36-4.55 raise ImportError at load, "FlashAttention2 has been toggled on, but it cannot be used due to the following
# error: the package flash_attn seems to be not installed" (4.36.2 modeling_utils.py `_check_and_enable_flash_attn_2`
# l.1368/1392; 4.46.3 l.1722/1747; 4.53.3 `_flash_attn_2_can_dispatch` l.2457; 4.55.4 l.2494). From 4.56 the load first
# tries the Hub kernel "kernels-community/flash-attn" when the `kernels` package is installed (4.56.2
# `_check_and_adjust_attn_implementation` l.2778-2795; 4.57.6 l.2653-2664; 5.25.0 l.1777-1802, "kernels-community/
# flash-attn2", modeling_flash_attention_utils.py FLASH_ATTN_KERNEL_FALLBACK l.65), and raises the same ImportError
# without it (4.57.6 l.2422; 5.25.0 `_flash_attn_import_error` l.1559 "doesn't seem to be installed"). `kernels` is an
# extra up to 5.24 (METADATA of 4.57.6, 5.20.0, 5.24.0) and a core requirement of 5.25.0, so from 5.25 the request
# always has a kernel to load (on CUDA, from the Hub).
FLASH_ATTN_KERNELS_FALLBACK_SINCE = (4, 56)
KERNELS_REQUIRED_SINCE = (5, 25)
# `use_liger_kernel`: a TrainingArguments field from transformers 4.45.0 (training_args.py l.1507; knowledge/arguments.json).
LIGER_FIELD_SINCE = (4, 45)
# "flash_attention_3": accepted from 4.53.0 (4.53.3 modeling_utils.py l.2306; no "flash_attention_3" in 4.52.4's).
ATTN_IMPLEMENTATION_SINCE = {"eager": (4, 36), "sdpa": (4, 36), "flash_attention_2": (4, 36),
                             "flex_attention": (4, 47), "flash_attention_3": (4, 53)}
# `from_pretrained(dtype=...)`: 4.56.0 modeling_utils.py from_pretrained l.4751 `dtype = kwargs.pop("dtype", None)`
# (`torch_dtype` still popped, with a deprecation warning, in 4.56-5.x); 4.55.4 pops only `torch_dtype` (l.4622),
# so `dtype=` there is an unknown keyword that reaches the model's __init__.
DTYPE_KEYWORD_SINCE = (4, 56)
# `PreTrainedModel.enable_input_require_grads`: 4.27.0 modeling_utils.py l.1150; not in 4.26.1.
INPUT_REQUIRE_GRADS_SINCE = (4, 27)
# The flash-attention flag was `_supports_flash_attn_2` up to 4.53 (4.53.3 models/llama/modeling_llama.py l.324) and
# `_supports_flash_attn` from 4.54 (4.54.1 l.316); attention_defaults.json read the old name only, so its
# flash_attention_2 states count up to 4.53.
_FA2_FLAG_READ_UNTIL = (4, 53)

# Values `attn_implementation` accepts in 5.24.0 that never materialise the S x S scores
# (AttentionInterface._global_mapping, modeling_utils.py l.5243), plus hub kernels ("org/repo").
NON_EAGER = frozenset({"sdpa", "flash_attention_2", "flash_attention_3", "flash_attention_4", "flex_attention",
                       "paged|sdpa", "paged|flash_attention_2", "paged|flash_attention_3", "paged|flex_attention"})
EAGER = frozenset({"eager", "paged|eager"})

# TrainingArguments defaults, identical in 4.57.6 and 5.24.0 (dataclasses.fields, training_args.py).
TRAINING_ARGS_DEFAULTS = {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1,
                          "auto_find_batch_size": False, "use_liger_kernel": False, "label_smoothing_factor": 0.0}

# `SFTConfig(loss_type="chunked_nll")`: TRL 1.4.0 sft_config.py l.264-268 lists it; 1.3.0's loss_type (l.256) has
# only "nll" / "dft" (an unknown value is rejected when the trainer builds its loss).
CHUNKED_NLL_SINCE = (1, 4)

# axolotl's `chunked_cross_entropy: true` (a core config key since axolotl 0.11.0; absent from 0.10.0's
# utils/schemas/config.py; the same in 0.12.0, 0.18.0, 0.19.0): loaders/patch_manager.py
# `_apply_chunked_cross_entropy_patch` (0.19.0 l.408-415) calls monkeypatch/loss/chunked.py `patch_chunked_ce_loss_fn`
# (0.19.0 l.127-134, num_output_chunks `chunked_cross_entropy_num_chunks` or 8), which replaces transformers'
# `LOSS_MAPPING["ForCausalLM"]` (read at call time: transformers 5.25.0 modeling_utils.py `loss_function`, l.4817-4829).
# The model still builds its full logits in the compute dtype (modeling_llama.py l.471 `self.lm_head(hidden_states)`);
# the loss splits them along the sequence (`source.chunk(n, dim=1)`, chunked.py l.93-95) and upcasts one chunk at a
# time (`F.cross_entropy(logits.float(), ...)` per chunk, l.33-35, l.66-67): only one chunk's fp32 copy exists.
# The patch replaces the causal-LM loss a model computes from `labels`: transformers' Trainer; a TRL trainer's own loss
# (DPO, KTO, GRPO ...) does not go through it.
CHUNKED_UPCAST_PATCH = "axolotl.monkeypatch.loss.chunked.patch_chunked_ce_loss_fn"
CHUNKED_UPCAST_CHUNKS = 8  # chunked.py l.127 `num_output_chunks: int = 8`

# TRL SFTConfig.max_length default (trl/trainer/sft_config.py); `max_seq_length` before 0.20.
SFT_MAX_LENGTH_DEFAULT = 1024


def default_attention(model_type: str | None, transformers: LibraryVersion) -> str | None:
    """The attention a model gets when the script does not choose one; None when not known."""
    if not transformers.at_least(*SDPA_DEFAULT_SINCE):
        return "eager"
    if model_type is None:
        return None
    if transformers.at_least(5) and model_type in EAGER_BY_DEFAULT_5X and \
            transformers.at_least(*EAGER_BY_DEFAULT_SINCE.get(model_type, (5,))):
        return "eager"
    if transformers.at_least(5):
        return "sdpa"
    # 4.36-4.57: sdpa when the class declares `_supports_sdpa`, else eager (4.40.2 modeling_utils.py
    # `_check_and_enable_sdpa` l.1629: `if not is_torch_sdpa_available() or not cls._supports_sdpa: return config`);
    # the flag per architecture and release line is read from the wheels (attention_defaults.json). Assumes the
    # torch the script runs on has SDPA (torch >= 2.1.1, `is_torch_sdpa_available`).
    supported = sdpa_supported(model_type, transformers)
    if supported is None:
        return None
    return "sdpa" if supported else "eager"


# model_type -> folder under transformers/models where they differ (configuration_auto.py
# SPECIAL_MODEL_TYPE_TO_MODULE_NAME and the text configs of multimodal checkpoints)
_MODULE_OF = {"gemma3_text": "gemma3", "llama4_text": "llama4", "qwen3_vl_text": "qwen3_vl", "qwen2_5_vl_text": "qwen2_5_vl",
              "xlm-roberta": "xlm_roberta", "openai-gpt": "openai", "gpt-sw3": "gpt_sw3"}


@lru_cache(maxsize=1)
def _attention_data() -> dict:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attention_defaults.json")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def sdpa_supported(model_type: str, transformers: LibraryVersion) -> bool | None:
    """Whether an architecture declares `_supports_sdpa = True` in a transformers 4.36-4.57 release line (read
    from that line's last patch release, scripts/gen_attention_defaults.py); None when not read or not literal."""
    return _flag(model_type, transformers, "sdpa")


def _flag(model_type: str, transformers: LibraryVersion, key: str) -> bool | None:
    line = ".".join(str(p) for p in transformers.tuple[:2])
    data = _attention_data()
    if line not in data["release_lines"]:
        return None
    folder = _MODULE_OF.get(model_type, model_type.replace("-", "_"))
    states = data["folders"].get(folder, {}).get(key, {})
    if line in states.get("true", ()):
        return True
    if line in states.get("false", ()):
        return False
    return None


def attention_supported(model_type: str | None, impl: str, transformers: LibraryVersion) -> bool | None:
    """Whether `attn_implementation=impl` loads for this architecture in this transformers release: False when the
    keyword or value does not exist yet, or the class declares no support (from_pretrained raises on an explicit
    request); None when not read (model unknown, a per-architecture flag not in attention_defaults.json)."""
    since = ATTN_IMPLEMENTATION_SINCE.get(impl)
    if since is None:
        return None  # a hub kernel ("org/repo"), "paged|...": not read
    if not transformers.at_least(*since):
        return False
    if model_type is None:
        return None
    if impl == "eager":
        return True
    if impl == "sdpa":
        if transformers.at_least(5):
            # default_attention's reading of 5.x: every architecture but the eager-by-default ones has SDPA
            return not (model_type in EAGER_BY_DEFAULT_5X and
                        transformers.at_least(*EAGER_BY_DEFAULT_SINCE.get(model_type, (5,))))
        return sdpa_supported(model_type, transformers)
    if impl == "flash_attention_2" and not transformers.at_least(_FA2_FLAG_READ_UNTIL[0], _FA2_FLAG_READ_UNTIL[1] + 1):
        return _flag(model_type, transformers, "flash_attention_2")
    return None  # flex_attention, flash_attention_3, 5.x flash-attention: per-architecture flags not read


def sft_loss_is_chunked(trl: LibraryVersion, loss_type: object, use_liger: bool) -> bool | None:
    """Whether TRL's SFTTrainer computes the loss without materialising [B, S, V] logits.

    Read from the TRL wheels:
    - <= 1.3: `nll`/`dft` only (full logits).
    - 1.4.0-1.6.x: `loss_type="chunked_nll"` opt-in.
    - 1.7.0-1.14.x: `loss_type` default None -> "chunked_nll" unless `use_liger_kernel=True`.
    - >= 1.15.0: `add_fused_lm_head` in SFTTrainer.__init__ always (sft_trainer.py ~l.1142;
      trl/kernels/chunked_logprob.py tiles of 4096 tokens x 32768 vocab).
    Returns None when the script's loss_type cannot be read.
    """
    if trl.at_least(1, 15):
        return True
    if trl.at_least(1, 7):
        if loss_type is None:
            return not use_liger
        if isinstance(loss_type, str):
            return loss_type == "chunked_nll"
        return None
    if trl.at_least(1, 4):
        if isinstance(loss_type, str):
            return loss_type == "chunked_nll"
        return False if loss_type is None else None
    return False


# Reentrant checkpointing by default and the automatic input hook, across transformers 5.0's development (read from
# the wheels' modeling_utils.py `gradient_checkpointing_enable` / `_activation_checkpointing_enable`):
#   4.34.0-4.57.6, 5.0.0rc0, 5.0.0rc1: kwargs None -> {"use_reentrant": True}; inputs hooked only for transformers-native
#     adapters (`_hf_peft_config_loaded`, 4.34.0 modeling_utils.py l.1830; absent from 4.33.3's gradient_checkpointing_enable)
#   5.0.0rc2, 5.0.0rc3: still {"use_reentrant": True} (rc2 l.3083), but `needs_embedding_grads = self.main_input_name ==
#     "input_ids"` hooks every input_ids model (rc2 l.3100-3102)
#   5.0.0 and later: {"use_reentrant": False} (5.0.0 l.3099) and the input_ids hook (l.3116-3118)
# A ".dev" build of 5.0.0 is any commit in between (huggingface/transformers#42489 reports 5.0.0.dev0 failing): unknown.
ADAPTER_HOOK_SINCE = (4, 34)


def gc_reentrant_default(transformers: LibraryVersion) -> bool | None:
    """Whether `gradient_checkpointing_enable()` without kwargs checkpoints reentrantly; None when not known."""
    if not transformers.at_least(5):
        return True
    pre = transformers.pre
    if transformers.tuple[:3] in ((5,), (5, 0), (5, 0, 0)) and pre is not None:
        return None if pre[0] != "rc" else True
    return False


def hooks_input_ids_models(transformers: LibraryVersion) -> bool | None:
    """Whether `gradient_checkpointing_enable()` itself hooks the inputs of every input_ids model."""
    if not transformers.at_least(5):
        return False
    pre = transformers.pre
    if transformers.tuple[:3] in ((5,), (5, 0), (5, 0, 0)) and pre is not None:
        if pre[0] != "rc":
            return None
        return pre[1] >= 2
    return True


def add_adapter_hooks(transformers: LibraryVersion) -> bool:
    """transformers-native adapters (`model.add_adapter`) get their inputs hooked by gradient_checkpointing_enable."""
    return transformers.at_least(*ADAPTER_HOOK_SINCE)
