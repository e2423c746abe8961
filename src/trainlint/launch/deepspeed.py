"""What a DeepSpeed config says about memory (ZeRO stage, offload, batch, precision), each value with its span.

Key names, aliases and defaults are DeepSpeed 0.19.8's (read from the sdist, not run):
- `deepspeed/runtime/zero/config.py` `DeepSpeedZeroConfig`: `zero_optimization.stage` (default 0), `offload_optimizer`
  and `offload_param` sections (default None: no offload), the `stage3_*` aliases, the deprecated `cpu_offload` /
  `cpu_offload_param` booleans (True means a `cpu` offload section), and `get_zero_config`: a boolean
  `"zero_optimization": true` is the deprecated format and means stage 1 (`read_zero_config_deprecated`).
- `deepspeed/runtime/zero/offload_config.py`: an offload section's `device` is "none" | "cpu" | "nvme", default "none".
- `deepspeed/runtime/precision_config.py`: `bf16.enabled`, and `bfloat16` as the legacy name of the section, read only
  when there is no `bf16` section (`get_bfloat16_config`); `fp16.enabled`. Both default to False.
- `deepspeed/runtime/constants.py`: `train_micro_batch_size_per_gpu`, `gradient_accumulation_steps`,
  `train_batch_size` (all default None; DeepSpeed derives the missing ones from the others and the world size).
- `deepspeed/runtime/activation_checkpointing/config.py`: the `activation_checkpointing` section configures
  `deepspeed.checkpointing` (the Megatron-style API a model must call itself). A Hugging Face model checkpoints
  through `gradient_checkpointing=True` and is not affected by this section at all.

"auto" is not DeepSpeed's: transformers replaces it from TrainingArguments (and the model's hidden size) before
DeepSpeed sees the config; see AUTO_FROM_TRAINING_ARGS. Values here are kept as written, "auto" as the string "auto".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainlint.diagnostics import Span
from trainlint.launch.model import ConfigReading, Entry

Setting = tuple[Any, Span]  # (the value as the loader built it, where it is written)

# What transformers' Trainer writes over an "auto" value, from TrainingArguments. transformers 5.24.0,
# integrations/deepspeed.py, HfTrainerDeepSpeedConfig.trainer_config_process (run when TrainingArguments is built).
# Only these keys: any other "auto" stays "auto" and DeepSpeed rejects it.
AUTO_FROM_TRAINING_ARGS: dict[str, str] = {
    "train_micro_batch_size_per_gpu": "per_device_train_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
    "train_batch_size": "world_size * per_device_train_batch_size * gradient_accumulation_steps",
    "gradient_clipping": "max_grad_norm",
    "optimizer.params.lr": "learning_rate",
    "optimizer.params.betas": "[adam_beta1, adam_beta2]",
    "optimizer.params.eps": "adam_epsilon",
    "optimizer.params.weight_decay": "weight_decay",
    "scheduler.params.warmup_min_lr": "0",  # a constant, not an argument
    "scheduler.params.warmup_max_lr": "learning_rate",
    "fp16.enabled": "fp16 or fp16_full_eval",
    "bf16.enabled": "bf16 or bf16_full_eval",
    # trainer_config_finalize, once the number of training steps is known:
    "scheduler.params.total_num_steps": "num_training_steps (computed by the Trainer)",
    "scheduler.params.warmup_num_steps": "max(1, get_warmup_steps(num_training_steps))",
}

# The "auto" values trainer_config_finalize fills from the model's config.hidden_size (same file). The last two
# only under ZeRO-3 (`if self.is_zero3()`); under ZeRO-1/2 they stay "auto".
AUTO_FROM_MODEL: dict[str, str] = {
    "zero_optimization.reduce_bucket_size": "hidden_size * hidden_size",
    "zero_optimization.stage3_prefetch_bucket_size": "int(0.9 * hidden_size * hidden_size)",
    "zero_optimization.stage3_param_persistence_threshold": "10 * hidden_size",
}


@dataclass(frozen=True)
class DeepSpeedSettings:
    """Each field: (value as written, span) or None when the file does not set it (DeepSpeed's default applies)."""

    stage: Setting | None = None  # zero_optimization.stage: 0 | 1 | 2 | 3 (default 0)
    offload_optimizer: Setting | None = None  # zero_optimization.offload_optimizer.device: "none" | "cpu" | "nvme"
    offload_param: Setting | None = None  # zero_optimization.offload_param.device (ZeRO-3 only)
    micro_batch: Setting | None = None  # train_micro_batch_size_per_gpu
    grad_accum: Setting | None = None  # gradient_accumulation_steps
    train_batch: Setting | None = None  # train_batch_size (= micro_batch * grad_accum * data-parallel size)
    bf16: Setting | None = None  # bf16.enabled (or the legacy bfloat16.enabled)
    fp16: Setting | None = None  # fp16.enabled
    # The whole `activation_checkpointing` section (a dict): deepspeed.checkpointing's settings, not HF checkpointing.
    activation_checkpointing: Setting | None = None
    partition_activations: Setting | None = None  # activation_checkpointing.partition_activations
    cpu_checkpointing: Setting | None = None  # activation_checkpointing.cpu_checkpointing
    gradient_clipping: Setting | None = None
    optimizer: Setting | None = None  # optimizer.type: DeepSpeed builds this optimizer (its states are ZeRO-sharded)
    reduce_bucket_size: Setting | None = None  # zero_optimization.reduce_bucket_size (elements, default 5e8)
    prefetch_bucket_size: Setting | None = None  # zero_optimization.stage3_prefetch_bucket_size (default 5e7)
    param_persistence_threshold: Setting | None = None  # zero_optimization.stage3_param_persistence_threshold
    max_live_parameters: Setting | None = None  # zero_optimization.stage3_max_live_parameters (default 1e9)


def _get(reading: ConfigReading, key: str) -> Setting | None:
    entry = reading.get(key)
    return (entry.value, entry.span) if entry is not None else None


def deepspeed_settings(reading: ConfigReading, prefix: str = "") -> DeepSpeedSettings:
    """The memory-relevant settings of a DeepSpeed config.

    `prefix` reads a DeepSpeed config written inline in another file: an args YAML / TRL recipe's
    `deepspeed: {zero_optimization: ...}` (TrainingArguments.deepspeed accepts a dict as well as a path,
    transformers 5.24.0 training_args.py) is `deepspeed_settings(reading, prefix="deepspeed")`, spans in that file.
    """
    base = f"{prefix}." if prefix else ""

    def get(key: str) -> Setting | None:
        return _get(reading, base + key)

    zero = get("zero_optimization")
    stage = get("zero_optimization.stage")
    if zero is not None and isinstance(zero[0], bool):
        stage = (1 if zero[0] else 0, zero[1])  # the deprecated boolean format: true is stage 1
    offload_optimizer = get("zero_optimization.offload_optimizer.device")
    if offload_optimizer is None:
        offload_optimizer = _legacy_cpu(get("zero_optimization.cpu_offload"))
    offload_param = get("zero_optimization.offload_param.device")
    if offload_param is None:
        offload_param = _legacy_cpu(get("zero_optimization.cpu_offload_param"))
    bf16 = get("bf16.enabled") if get("bf16") is not None else get("bfloat16.enabled")
    section = get("activation_checkpointing")
    return DeepSpeedSettings(
        stage=stage,
        offload_optimizer=offload_optimizer,
        offload_param=offload_param,
        micro_batch=get("train_micro_batch_size_per_gpu"),
        grad_accum=get("gradient_accumulation_steps"),
        train_batch=get("train_batch_size"),
        bf16=bf16,
        fp16=get("fp16.enabled"),
        activation_checkpointing=section if section is not None and isinstance(section[0], dict) else None,
        partition_activations=get("activation_checkpointing.partition_activations"),
        cpu_checkpointing=get("activation_checkpointing.cpu_checkpointing"),
        gradient_clipping=get("gradient_clipping"),
        optimizer=get("optimizer.type"),
        reduce_bucket_size=get("zero_optimization.reduce_bucket_size"),
        prefetch_bucket_size=get("zero_optimization.stage3_prefetch_bucket_size"),
        param_persistence_threshold=get("zero_optimization.stage3_param_persistence_threshold"),
        max_live_parameters=get("zero_optimization.stage3_max_live_parameters"),
    )


def _legacy_cpu(flag: Setting | None) -> Setting | None:
    # DeepSpeedZeroConfig's deprecated `cpu_offload` / `cpu_offload_param`: True becomes a device "cpu" section,
    # False no section. The span is the boolean's.
    if flag is None or flag[0] is not True:
        return None
    return ("cpu", flag[1])


def auto_values(reading: ConfigReading, prefix: str = "") -> tuple[tuple[Entry, str | None], ...]:
    """Every "auto" value in a DeepSpeed config, with what the Trainer fills it from (None: nothing fills it)."""
    base = f"{prefix}." if prefix else ""
    found = []
    for entry in reading.entries:
        if entry.value == "auto" and entry.key.startswith(base):
            key = entry.key[len(base):]
            found.append((entry, AUTO_FROM_TRAINING_ARGS.get(key) or AUTO_FROM_MODEL.get(key)))
    return tuple(found)
