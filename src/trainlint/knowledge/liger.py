"""liger-kernel: which model types `_apply_liger_kernel_to_instance` patches, per release.

transformers' Trainer with `use_liger_kernel=True` calls `transformers.integrations.liger.apply_liger_kernel`
(5.25.0 trainer.py:1509-1510, integrations/liger.py:45-51), which calls liger's `_apply_liger_kernel_to_instance`;
for a `config.model_type` that is not a key of `MODEL_TYPE_TO_APPLY_LIGER_FN` it logs "There are currently no Liger
kernels supported for model type" and returns (liger-kernel 0.8.5 transformers/monkey_patch.py:4010-4012): nothing
is patched and the loss stays the model's own, over the full logits (linkedin/Liger-Kernel#1308).

MODEL_TYPE_SINCE: each key of `MODEL_TYPE_TO_APPLY_LIGER_FN` and the first release whose monkey_patch.py has it, read
from the wheels of every release 0.3.0-0.8.5 (29 releases, with `ast`; no key was ever removed; the dict is at
monkey_patch.py:627 in 0.3.0 and :3904 in 0.8.5).
"""

from __future__ import annotations

from pathlib import Path

NEWEST = "0.8.5"
RELEASES = ("0.3.0", "0.3.1", "0.4.0", "0.4.1", "0.4.2", "0.5.0", "0.5.1", "0.5.2", "0.5.3", "0.5.4", "0.5.5",
            "0.5.6", "0.5.7", "0.5.8", "0.5.9", "0.5.10", "0.6.0", "0.6.1", "0.6.2", "0.6.3", "0.6.4", "0.6.5",
            "0.7.0", "0.8.0", "0.8.1", "0.8.2", "0.8.3", "0.8.4", "0.8.5")

MODEL_TYPE_SINCE = {
    "gemma": "0.3.0",
    "gemma2": "0.3.0",
    "llama": "0.3.0",
    "mistral": "0.3.0",
    "mixtral": "0.3.0",
    "qwen2": "0.3.0",
    "qwen2_vl": "0.3.0",
    "phi3": "0.3.0",
    "mllama": "0.4.0",
    "mllama_text_model": "0.4.0",
    "granite": "0.5.4",
    "olmo2": "0.5.4",
    "qwen2_5_vl": "0.5.5",
    "llava": "0.5.6",
    "paligemma": "0.5.6",
    "gemma3_text": "0.5.7",
    "gemma3": "0.5.7",
    "glm4": "0.5.9",
    "qwen3": "0.5.9",
    "qwen3_moe": "0.5.10",
    "llama4_text": "0.6.0",
    "llama4": "0.6.0",
    "qwen2_vl_text": "0.6.0",
    "qwen2_5_vl_text": "0.6.0",
    "smollm3": "0.6.1",
    "glm4v": "0.6.2",
    "glm4v_moe": "0.6.3",
    "internvl": "0.6.3",
    "qwen3_next": "0.6.3",
    "falcon_h1": "0.6.3",
    "smolvlm": "0.6.3",
    "olmo3": "0.6.4",
    "qwen3_vl": "0.6.4",
    "qwen3_vl_text": "0.6.4",
    "qwen3_vl_moe": "0.6.4",
    "qwen3_vl_moe_text": "0.6.4",
    "hunyuan_v1_dense": "0.6.4",
    "hunyuan_v1_moe": "0.6.4",
    "gpt_oss": "0.6.5",
    "exaone4": "0.6.5",
    "pixtral": "0.7.0",
    "gemma4_text": "0.8.0",
    "ministral": "0.8.0",
    "nemotron": "0.8.0",
    "qwen3_5": "0.8.0",
    "qwen3_5_text": "0.8.0",
    "qwen3_5_moe": "0.8.0",
    "qwen3_5_moe_text": "0.8.0",
    "deepseek_v4": "0.8.1",
    "gemma4": "0.8.1",
    "muse_glimmer": "0.8.3",
    "deepseek_v3": "0.8.4",
    "deepseek_v2": "0.8.5",
}


def _v(text: str) -> tuple[int, ...]:
    from trainlint.knowledge.versions import parse_version

    return parse_version(text)


def release(directory: Path) -> tuple[str, str]:
    """(liger-kernel release, why): the project's pin (a range: its newest release read), else the newest read."""
    from trainlint.knowledge.versions import pinned_release

    return pinned_release(directory, "liger-kernel", RELEASES, NEWEST, "not pinned: the newest release read")


def patches(model_type: str | None, version: str) -> bool | None:
    """Whether liger-kernel `version` patches `model_type` (None: the model type is not known)."""
    if not model_type:
        return None
    since = MODEL_TYPE_SINCE.get(model_type)
    return since is not None and _v(version) >= _v(since)


def first_release(model_type: str) -> str | None:
    return MODEL_TYPE_SINCE.get(model_type)
