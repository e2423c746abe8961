"""What axolotl and LLaMA-Factory do with a config, per release, read from their released wheels
(`pip download --no-deps axolotl==X` / `llamafactory==X`, unzipped and read; nothing imported).

Read: axolotl 0.12.0 (sdist), 0.18.0 and 0.19.0 (wheels); llamafactory 0.9.2 and 0.9.5 (wheels). Each fact names
the file and function it was read in. The accepted keys per release are in framework_keys.json (bench/gen_framework_keys.py).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from trainlint.knowledge.versions import parse_version

AXOLOTL = "axolotl"
LLAMAFACTORY = "llamafactory"

# The newest release of each that was read; a config with no pin and no installed framework targets it.
NEWEST = {AXOLOTL: "0.19.0", LLAMAFACTORY: "0.9.5"}

# The libraries each release requires (its wheel's METADATA Requires-Dist; 0.12.0: the sdist's requirements.txt).
# The transformers a framework config runs on is the framework's pin unless the repository pins it itself.
LIBRARY_PINS = {
    AXOLOTL: {
        "0.19.0": {"transformers": "==5.16.1", "trl": "==1.9.0", "peft": "==0.20.0"},
        "0.18.0": {"transformers": "==5.14.1", "trl": "==1.8.0", "peft": "==0.19.1"},
        "0.12.0": {"transformers": "==4.55.0", "trl": "==0.21.0", "peft": "==0.17.0"},
    },
    LLAMAFACTORY: {
        "0.9.5": {"transformers": ">=4.55.0,<=5.6.0,!=4.52.0,!=4.57.0", "trl": ">=0.18.0,<=0.24.0",
                  "peft": ">=0.18.0,<=0.18.1"},
        "0.9.2": {"transformers": ">=4.41.2,<=4.49.0,!=4.46.*,!=4.47.*,!=4.48.0", "trl": ">=0.8.6,<=0.9.6",
                  "peft": ">=0.11.1,<=0.12.0"},
    },
}


def read_release(framework: str, version: str) -> str:
    """The release read that stands for `version`: the newest one read that is not newer (else the oldest)."""
    releases = sorted(LIBRARY_PINS[framework], key=parse_version)
    older = [r for r in releases if parse_version(r) <= parse_version(version)]
    return older[-1] if older else releases[0]


# --- axolotl: attention ------------------------------------------------------------------------------------------
# axolotl 0.19.0 utils/schemas/enums.py LEGACY_ATTN_FLAG_TO_IMPL, in priority order; utils/schemas/config.py
# `normalize_attn_implementation` (a before-validator, since 0.17.0) maps the first flag set to the canonical name,
# and raises ValueError when `attn_implementation` is set together with any of them.
AXOLOTL_LEGACY_ATTENTION = (("xformers_attention", "xformers"), ("sage_attention", "sage"),
                            ("flex_attention", "flex_attention"), ("flash_attention", "flash_attention_2"),
                            ("sdp_attention", "sdpa"), ("eager_attention", "eager"))
# axolotl 0.12.0 loaders/model.py `_set_attention_config`: attn_implementation, else flex > flash > sdp > eager
# (xformers / sage are monkeypatches there, not an attn_implementation, so their effect is not modelled).
AXOLOTL_LEGACY_ATTENTION_0_12 = (("flex_attention", "flex_attention"), ("flash_attention", "flash_attention_2"),
                                 ("sdp_attention", "sdpa"), ("eager_attention", "eager"))
AXOLOTL_NORMALISED_SINCE = (0, 17, 0)  # the research note's bisection (e4032fc90); 0.12.0 still has the elif chain
AXOLOTL_ATTN_KEY_SINCE = (0, 12, 0)  # `attn_implementation` is a schema field from 0.12.0 (utils/schemas/config.py)
# 0.19.0 loaders/model.py `_set_attention_config`: `{"fp8": "sdpa"}` at load time; with no attention key nothing is
# passed, so the transformers default for the architecture applies.
AXOLOTL_LOAD_TIME = {"fp8": "sdpa"}

# --- axolotl: loss ---------------------------------------------------------------------------------------------------
CCE_PLUGIN = "axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin"
LIGER_PLUGIN = "axolotl.integrations.liger.LigerPlugin"
KERNELS_PLUGIN_PREFIX = "axolotl.integrations.kernels."  # use_dsv4_kernels: DeepSeek-V4's eager kernel replaced
# 0.19.0 integrations/cut_cross_entropy/args.py CutCrossEntropyArgs: `cut_cross_entropy: Optional[bool] = True`,
# so listing the plugin is enough; the plugin's pre_model_load calls `cce_patch(model_type)`.
# 0.19.0 integrations/liger/args.py LigerArgs: `liger_fused_linear_cross_entropy: bool | None = None`: only an
# explicit true makes LigerPlugin.pre_model_load pass fused_linear_cross_entropy=True to apply_liger_kernel_to_*.
# 0.19.0 utils/schemas/config.py `chunked_cross_entropy` (core key since 0.11.0): the loss upcasts one chunk of the
# full 16-bit logits at a time (knowledge/libraries.py CHUNKED_UPCAST_PATCH cites it); the Run's loss path says so.

# --- axolotl: adapters and checkpointing -----------------------------------------------------------------------------
# 0.19.0 (and 0.12.0) loaders/adapter.py `load_adapter`: `if adapter is None: return`, then
# `model.enable_input_require_grads()` for every adapter, before load_lora wraps it: the TL201 trap cannot occur.
AXOLOTL_INPUT_GRADS = "axolotl loaders/adapter.py load_adapter() calls model.enable_input_require_grads()"

# --- axolotl: defaults (0.19.0 utils/schemas/config.py and training.py) -------------------------------------------
AXOLOTL_DEFAULTS = {"sequence_len": 512, "micro_batch_size": 1, "gradient_accumulation_steps": 1,
                    "gradient_checkpointing": False}

# --- LLaMA-Factory -------------------------------------------------------------------------------------------------
# 0.9.5 hparams/model_args.py `flash_attn: AttentionFunction = "auto"`; extras/constants.py AttentionFunction
# auto | disabled | sdpa | fa2 | fa3; model/model_utils/attention.py `configure_attn_implementation`: auto -> nothing
# set (the transformers default), disabled -> "eager", sdpa -> "sdpa", fa2 -> "flash_attention_2" when flash-attn is
# installed (else, with a warning, the default). gemma2 with auto/fa2: fa2 when flash-attn is installed, else eager
# (depends on the machine: not decided here); gpt_oss: always a FlashAttention-3 hub kernel.
LF_ATTENTION = {"auto": None, "disabled": "eager", "sdpa": "sdpa", "fa2": "flash_attention_2",
                "fa3": "flash_attention_3"}
# <= 0.8.x spelled eager `off` (and <= 0.6.x used a bool); 0.9.5 refuses those values (an enum).
LF_OLD_ATTENTION = {"off": "eager", False: "eager", True: "flash_attention_2"}
LF_DEFAULTS = {"cutoff_len": 2048, "stage": "sft", "finetuning_type": "lora", "flash_attn": "auto",
               "disable_gradient_checkpointing": False, "enable_liger_kernel": False, "lora_rank": 8,
               "lora_target": "all", "freeze_vision_tower": True, "image_max_pixels": 768 * 768,
               "image_min_pixels": 32 * 32}
# 0.9.5 hparams/finetuning_args.py l.527 freeze_vision_tower True; hparams/model_args.py l.305-311 image_max_pixels
# 768 * 768, image_min_pixels 32 * 32 (the same at the mirror's ff6d4d12e). With the tower frozen, LoRA's targets
# leave out its modules (model/model_utils/visual.py `patch_target_modules`): as PEFT's exclude_modules, a regex over
# the Qwen-VL towers' module path (`visual.`)
LF_QWEN_VL_TYPES = frozenset({"qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"})
LF_VISION_EXCLUDE = r".*\bvisual\..*"
# axolotl 067b021 utils/freeze.py `_MM_MODULE_PREFIXES` and `freeze_mm_modules` (called from train.py l.118-119 after
# the model and its adapters are built): every parameter with one of these path components is frozen, the adapters
# PEFT put in the tower included; as exclude_modules (PEFT's full-match regex) it leaves the same modules untrained
AXOLOTL_MM_EXCLUDE = (r"(.*\.)?(vision_tower|vision_model|vision_encoder|embed_vision|multi_modal_projector|visual"
                      r"|audio_tower|audio_model|embed_audio)\..*")
LF_MERGER_EXCLUDE = r".*\bvisual\.merger\..*"
# 0.9.5 model/model_utils/liger_kernel.py `apply_liger_kernel`: the model types it patches; any other logs
# "Current model does not support liger kernel." and nothing is applied. require_logits (stage not pt/sft,
# model/loader.py) passes fused_linear_cross_entropy=False: the logits are built in full.
LF_LIGER_TYPES = frozenset({"gemma", "gemma2", "gemma3", "gemma3_text", "glm", "glm4", "glm4v", "granite", "llama",
                            "llava", "mistral", "mixtral", "mllama", "olmo2", "paligemma", "phi3", "qwen2", "qwen2_vl",
                            "qwen2_5_vl", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5", "gpt_oss"})
# 0.9.5 model/model_utils/checkpointing.py: `prepare_model_for_training` swaps in `_gradient_checkpointing_enable`,
# whose custom checkpoint function calls `requires_grad_(True)` on each checkpointed block's hidden states when the
# block has a trainable parameter (since 0.6.3; before it an explicit enable_input_require_grads()).
LF_INPUT_GRADS = "LLaMA-Factory's checkpoint function marks each checkpointed block's input as requiring grad"
# The trainer per stage (0.9.5 train/<stage>/trainer.py): sft CustomSeq2SeqTrainer(Seq2SeqTrainer), pt
# CustomTrainer(Trainer): the model's own loss on full logits; rm PairwiseTrainer (value head, no vocabulary CE);
# dpo / kto build full fp32 logits themselves (not a loss path TL301 models).
LF_TRAINERS = {"sft": ("Seq2SeqTrainer", "transformers"), "pt": ("Trainer", "transformers"),
               "rm": ("PairwiseTrainer", "llamafactory"), "dpo": ("CustomDPOTrainer", "llamafactory"),
               "kto": ("CustomKTOTrainer", "llamafactory"), "ppo": ("CustomPPOTrainer", "llamafactory")}


@lru_cache(maxsize=1)
def _keys() -> dict:
    return json.loads((Path(__file__).with_name("framework_keys.json")).read_text(encoding="utf-8"))


def axolotl_keys(release: str) -> tuple[frozenset[str], frozenset[str], dict[str, frozenset[str]]]:
    """(core keys, deprecated keys, plugin prefix -> its keys) of an axolotl release read."""
    data = _keys()[AXOLOTL][release]
    return (frozenset(data["core"]), frozenset(data["deprecated"]),
            {prefix: frozenset(keys) for prefix, keys in data["plugins"].items()})


def llamafactory_keys(release: str) -> frozenset[str]:
    """LLaMA-Factory's own argument fields (hparams/*.py) of a release read, without the HF TrainingArguments ones."""
    return frozenset(_keys()[LLAMAFACTORY][release]["core"])


# axolotl 0.19.0 utils/schemas/deprecated.py DeprecatedParameters: validators that raise when set.
AXOLOTL_REMOVED = {"s2_attention": "`s2_attention` (shifted-sparse attention) is no longer supported",
                   "max_packed_sequence_len": "`max_packed_sequence_len` is no longer supported",
                   "rope_scaling": "`rope_scaling` is no longer supported; it is a key under `model_config` now"}


# --- RL / preference stages: the TRL trainer each stage is, and the models the framework makes beside the policy ----
# LLaMA-Factory (read at v0.9.2 and v0.9.5, src/llamafactory/train/<stage>/): CustomDPOTrainer(DPOTrainer),
# CustomKTOTrainer(KTOTrainer), CustomPPOTrainer(PPOTrainer, Trainer) subclass TRL's trainers but call
# `Trainer.__init__` themselves (dpo/trainer.py 0.9.5:87 `Trainer.__init__(self, model=model, **kwargs)`), so the
# reference model is LLaMA-Factory's decision, not TRL's:
# - dpo/workflow.py 0.9.5:57-63: `if finetuning_args.use_ref_model: ... create_ref_model(...)` else None;
#   `use_ref_model = stage == "dpo" and pref_loss not in ["orpo", "simpo"]` (hparams/finetuning_args.py 0.9.2:462,
#   0.9.5:574): ORPO and SimPO have no reference at all.
# - kto/workflow.py 0.9.5:57-60: `create_ref_model(model_args, finetuning_args)` always (no use_ref_model gate).
# - ppo/workflow.py 0.9.5:52-53: `create_ref_model(..., add_valuehead=True)`, `create_reward_model(...)`.
# - trainer_utils.py create_ref_model (0.9.5:116-148): `ref_model:` set -> that model loaded (quantised by
#   `ref_model_quantization_bit`); else `finetuning_type == "lora"` -> None (dpo/trainer.py 0.9.5
#   compute_reference_log_probs :255-269 runs the policy under `disable_adapter()`); else the policy's model loaded
#   again (`ModelArguments.copyfrom(model_args)`: the same dtype), frozen (is_trainable=False), for the whole run.
#   0.9.5's `oft` is not "lora" there, so an OFT run gets a full copy too.
# - create_reward_model (0.9.5:151-): `reward_model_type` "api" -> a URL (no model), "lora" (the default) -> an
#   adapter loaded on the policy itself, "full" -> another model loaded.
# - the logits: dpo/trainer.py 0.9.5:230 `model(**batch).logits.to(torch.float32)` on chosen + rejected
#   concatenated; kto/trainer.py 0.9.5:179 the same per example (knowledge/trl_trainers.py FRAMEWORK_FULL_LOGITS).
# - pref_beta 0.1, pref_ftx 0.0, pref_loss "sigmoid", reward_model_type "lora" (finetuning_args.py 0.9.5 defaults).
#   Neither pref_beta nor pref_ftx changes what is resident: pref_ftx adds `ftx_gamma * sft_loss` where
#   `sft_loss = -policy_chosen_logps_avg` comes from the same forward (dpo/trainer.py 0.9.5:300-302), and pref_beta
#   only scales the loss (unlike GRPO's beta, nothing is dropped at 0).
LF_TRL_BASE = {"dpo": "DPOTrainer", "kto": "KTOTrainer", "ppo": "PPOTrainer"}
# - PPO's rollout (ppo/trainer.py, read at v0.9.2 and v0.9.5, where `CustomPPOTrainer.__init__` requires
#   trl>=0.8.6,<=0.9.6, :86-95 in 0.9.5, and subclasses that old PPOTrainer): `ppo_train` (:245-269) takes a batch of
#   `per_device_train_batch_size x gradient_accumulation_steps x ppo_buffer_size` prompts and generates it
#   `mini_batch_size = per_device_train_batch_size` rows at a time (`get_inputs` :351-387: HF `generate` with the
#   KV cache, `GenerationConfig(**generating_args)`, max_new_tokens 1024 by default: hparams/generating_args.py
#   0.9.2:53-55, 0.9.5 the same; the responses go to the CPU, nothing of the round stays on the GPU), scores each
#   mini-batch with the reward model (`get_rewards`, use_cache=False), then TRL's `PPOTrainer.step` (trl 0.9.6
#   ppo_trainer.py:739-755) runs the policy and the reference over the whole batch under no_grad through LF's
#   `batched_forward_pass` (:422-490) in `mini_batch_size` chunks: the value head's forward upcasts the logits of
#   query + response to fp32 (trl 0.9.6 models/modeling_value_head.py:189-190) and `logprobs_from_logits` takes a
#   full fp32 log_softmax (trl 0.9.6 core.py:131-140) before the gather. Then `ppo_epochs` (default 4) passes of
#   mini-batches of per_device_train_batch_size rows with `return_logits=True` (ppo_trainer.py:795-833).
LF_PPO_DEFAULTS = {"max_new_tokens": 1024, "ppo_buffer_size": 1, "ppo_epochs": 4}
LF_PPO_SOURCE = ("LLaMA-Factory train/ppo/trainer.py (0.9.2, 0.9.5) ppo_train / get_inputs / batched_forward_pass, "
                 "on trl<=0.9.6's PPOTrainer.step")
LF_REFERENCE_FREE = frozenset({"orpo", "simpo"})
LF_PREF_DEFAULTS = {"pref_beta": 0.1, "pref_ftx": 0.0, "pref_loss": "sigmoid", "reward_model_type": "lora"}
LF_REF_SOURCE = ("LLaMA-Factory train/trainer_utils.py create_ref_model (0.9.2, 0.9.5): ")

# axolotl (read at v0.12.0, v0.18.0 and 067b021 (0.19.0-dev), src/axolotl/train.py setup_reference_model and
# core/builders/rl.py):
# - `rl:` other than orpo with an `adapter:` -> model_ref None: the trainer gets `peft_config` (dpo / ipo / kto,
#   builders/rl.py `build`) or a PeftModel (grpo / simpo / orpo) and TRL runs the policy with its adapters disabled.
#   `rl_adapter_ref_model` is read there (train.py 0.18.0:139) but is not a schema key of any release read (keys.json),
#   so pydantic drops it and it never keeps a reference (TL007 says so).
# - no adapter -> `ModelLoader(cfg, tokenizer, reference_model=True).load()`: the policy's model loaded again with
#   the same config (dtype, quantisation, device_map). builders/rl.py `_get_trainer_cls` passes it only to dpo / ipo
#   (`trainer_cls_args.append(self.model_ref)`), where it is TRL's `ref_model`: resident, whatever
#   `precompute_ref_log_probs` says (trl 1.9.0 dpo_trainer.py:893-910 only drops a reference it would build itself).
#   kto / simpo / grpo never receive it: it is freed when setup_model_and_trainer returns (train.py 0.18.0:548-600,
#   not returned), after a load-time peak of two copies of the weights; KTO / GRPO then build their own as TRL does.
# - beta: `trl.beta`, else `rl_beta`, else `orpo_alpha` (builders/rl.py `_build_training_arguments`).
# - GRPO: `trl.num_generations`, `trl.generation_batch_size`, `trl.use_vllm`, `trl.vllm_mode`, `trl.sync_ref_model`
#   and `trl.max_completion_length` are GRPOConfig's (core/trainers/grpo/__init__.py set_training_args_kwargs);
#   `vllm_gpu_memory_utilization` is passed only with `trl.vllm_mode: colocate`, from `vllm.gpu_memory_utilization`
#   whose default is 0.9 (utils/schemas/vllm.py, 0.12.0 and 0.18.0), not TRL's 0.3; with `vllm_mode` unset TRL's
#   default mode and share apply.
AXOLOTL_REF_PASSED = frozenset({"dpo", "ipo"})
AXOLOTL_NO_REF_LOAD = frozenset({"orpo"})
AXOLOTL_VLLM_SHARE_DEFAULT = 0.9
AXOLOTL_REF_SOURCE = "axolotl train.py setup_reference_model (0.12.0, 0.18.0), core/builders/rl.py"
