"""What an accelerate config (`accelerate launch --config_file acc.yaml`) says: processes, precision, DeepSpeed, FSDP.

Everything here is from accelerate 1.15.0's source (read, not run):
- commands/config/config_args.py: `load_config_from_file` reads a `.json` config with json.load and anything else
  with yaml.safe_load; `ClusterConfig` holds the top-level keys, `deepspeed_config` and `fsdp_config` are plain dicts.
  `process_config` requires `distributed_type`; when `num_processes` is absent it is 1 if `distributed_type` is
  "NO", else the dataclass default -1.
- commands/launch.py `_validate_launch_command`: values given on the command line win over the file; every key of
  `deepspeed_config` becomes the launch argument of the same name, every key of `fsdp_config` too, with `fsdp_`
  put in front when it is missing (`version: 2` is read as `fsdp_version`). A num_processes still -1 stops the
  launch: "You need to manually pass in `--num_processes` using this config yaml." (With no config file at all,
  num_processes is torch.cuda.device_count().) A missing mixed_precision is "no" (the legacy top-level `fp16: true`
  means "fp16").
- utils/launch.py `prepare_deepspeed_cmd_env` / `prepare_multi_gpu_env` pass those arguments to the script as
  ACCELERATE_DEEPSPEED_* / FSDP_* environment variables, which utils/dataclasses.py `DeepSpeedPlugin` and
  `FullyShardedDataParallelPlugin` read. See ACCELERATE_DEFAULTS for what applies when a key is absent.

DeepSpeed inside an accelerate config: `deepspeed_config` holds the *plugin's* settings (zero_stage,
offload_optimizer_device, ...), not a DeepSpeed config. A real DeepSpeed config comes in as a path,
`deepspeed_config.deepspeed_config_file`, returned here as written (the caller resolves it against the launch's
working directory). DeepSpeed-config keys written inline under `deepspeed_config` (`zero_optimization: {...}`) are
set as launch arguments nobody reads: accelerate ignores them, and they are listed in AccelerateDeepSpeed.ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainlint.diagnostics import Span
from trainlint.launch.model import ConfigReading

Setting = tuple[Any, Span]  # (the value as the loader built it, where it is written)

# What applies when a key is absent (accelerate 1.15.0): launch.py argument defaults, and the plugins' fallbacks
# when the launcher sets no environment variable (utils/dataclasses.py).
ACCELERATE_DEFAULTS: dict[str, Any] = {
    "num_processes": -1,  # ClusterConfig default: the launch refuses to start unless --num_processes is given
    "num_machines": 1,
    "mixed_precision": "no",
    "zero_stage": 2,  # DeepSpeedPlugin: ACCELERATE_DEEPSPEED_ZERO_STAGE, default 2
    "offload_optimizer_device": "none",
    "offload_param_device": "none",
    "gradient_accumulation_steps": "auto",  # DeepSpeedPlugin: then the Accelerator's own value
    "fsdp_version": 1,  # launch.py --fsdp_version default "1"
    "fsdp_sharding_strategy": "FULL_SHARD",  # launch.py default; the launcher always exports it
    "fsdp_reshard_after_forward": True,  # launch.py default "true" (what FSDP2 reads)
    "fsdp_offload_params": False,
    "fsdp_activation_checkpointing": False,
    "fsdp_activation_checkpointing_offload": False,
}

# The launch arguments a `deepspeed_config` key can set (launch.py, "DeepSpeed Arguments").
_DEEPSPEED_ARGS = frozenset({
    "deepspeed_config_file", "zero_stage", "offload_optimizer_device", "offload_param_device",
    "offload_optimizer_nvme_path", "offload_param_nvme_path", "gradient_accumulation_steps", "gradient_clipping",
    "zero3_init_flag", "zero3_save_16bit_model", "deepspeed_hostfile", "deepspeed_exclusion_filter",
    "deepspeed_inclusion_filter", "deepspeed_multinode_launcher", "deepspeed_moe_layer_cls_names",
})

# Accelerate-config settings DeepSpeedPlugin._deepspeed_config_checks refuses (ValueError at start-up) when a
# deepspeed_config_file is used: they must be set in the DeepSpeed file instead. mixed_precision counts only when it
# comes from the config file (launch.py `mp_from_config_flag`), which is the case for the one read here.
_REFUSED_WITH_CONFIG_FILE = ("gradient_accumulation_steps", "gradient_clipping", "zero_stage",
                             "offload_optimizer_device", "offload_param_device", "offload_param_nvme_path",
                             "offload_optimizer_nvme_path", "zero3_save_16bit_model")


@dataclass(frozen=True)
class AccelerateDeepSpeed:
    """The `deepspeed_config` section: DeepSpeedPlugin's settings. Each (value as written, span) or None if absent."""

    zero_stage: Setting | None = None  # absent: 2 (or the DeepSpeed file's zero_optimization.stage)
    offload_optimizer_device: Setting | None = None  # "none" | "cpu" | "nvme"
    offload_param_device: Setting | None = None  # "none" | "cpu" | "nvme" (ZeRO-3)
    offload_optimizer_nvme_path: Setting | None = None
    offload_param_nvme_path: Setting | None = None
    # A path to a DeepSpeed JSON config, as written; when set, that file's values rule (the plugin fills its "auto"
    # values from the settings above and then takes zero stage, offload, accumulation from the file).
    deepspeed_config_file: Setting | None = None
    gradient_accumulation_steps: Setting | None = None
    gradient_clipping: Setting | None = None
    zero3_init_flag: Setting | None = None  # deepspeed.zero.Init at model construction (ZeRO-3)
    zero3_save_16bit_model: Setting | None = None
    deepspeed_multinode_launcher: Setting | None = None
    ignored: tuple[tuple[str, Span], ...] = ()  # keys accelerate launch does not read (inline DeepSpeed keys, typos)


@dataclass(frozen=True)
class AccelerateFsdp:
    """The `fsdp_config` section, each key found as `fsdp_<name>` or `<name>` (the last written wins, as in launch.py).

    FSDP1 (version 1, the default): the sharding is `sharding_strategy` (FULL_SHARD | SHARD_GRAD_OP | NO_SHARD |
    HYBRID_SHARD | HYBRID_SHARD_ZERO2, default FULL_SHARD). The launcher always exports FSDP_SHARDING_STRATEGY and the
    plugin prefers it (`sharding_strategy or reshard_after_forward`, accelerator.py), so under `accelerate launch` a v1
    `fsdp_reshard_after_forward` (which `accelerate config` writes for v1) does not change the sharding.
    FSDP2 (version 2): `reshard_after_forward` is a bool (default true: parameters are freed after forward, the
    FULL_SHARD behaviour; false keeps them, like SHARD_GRAD_OP); sharding_strategy is deprecated.
    """

    version: Setting | None = None  # 1 | 2 (absent: 1)
    sharding_strategy: Setting | None = None
    reshard_after_forward: Setting | None = None
    offload_params: Setting | None = None  # parameters and gradients on the CPU (absent: false)
    activation_checkpointing: Setting | None = None  # absent: false
    activation_checkpointing_offload: Setting | None = None  # FSDP2 only
    auto_wrap_policy: Setting | None = None  # TRANSFORMER_BASED_WRAP | SIZE_BASED_WRAP | NO_WRAP
    transformer_layer_cls_to_wrap: Setting | None = None
    min_num_params: Setting | None = None
    cpu_ram_efficient_loading: Setting | None = None
    state_dict_type: Setting | None = None
    use_orig_params: Setting | None = None
    sync_module_states: Setting | None = None
    backward_prefetch: Setting | None = None
    forward_prefetch: Setting | None = None


@dataclass(frozen=True)
class AccelerateSettings:
    """Top-level accelerate settings, each (value as written, span) or None if absent (see ACCELERATE_DEFAULTS)."""

    compute_environment: Setting | None = None  # LOCAL_MACHINE | AMAZON_SAGEMAKER
    distributed_type: Setting | None = None  # NO | MULTI_GPU | DEEPSPEED | FSDP | MULTI_CPU | XLA | MEGATRON_LM | ...
    num_processes: Setting | None = None  # total processes over all machines; absent: see the module docstring
    num_machines: Setting | None = None
    machine_rank: Setting | None = None
    gpu_ids: Setting | None = None
    mixed_precision: Setting | None = None  # "no" | "fp16" | "bf16" | "fp8"; legacy `fp16: true` reads as "fp16"
    use_cpu: Setting | None = None
    deepspeed: AccelerateDeepSpeed | None = None  # None when there is no `deepspeed_config` mapping
    fsdp: AccelerateFsdp | None = None  # None when there is no `fsdp_config` mapping

    def refused_with_config_file(self) -> tuple[tuple[str, Span], ...]:
        """Settings accelerate refuses next to a deepspeed_config_file (it stops with a ValueError at start-up)."""
        if self.deepspeed is None or self.deepspeed.deepspeed_config_file is None:
            return ()
        found = [(name, getattr(self.deepspeed, name)[1]) for name in _REFUSED_WITH_CONFIG_FILE
                 if getattr(self.deepspeed, name) is not None]
        if self.mixed_precision is not None:
            found.append(("mixed_precision", self.mixed_precision[1]))
        return tuple(found)


def _get(reading: ConfigReading, key: str) -> Setting | None:
    entry = reading.get(key)
    return (entry.value, entry.span) if entry is not None else None


def accelerate_settings(reading: ConfigReading) -> AccelerateSettings:
    mixed = _get(reading, "mixed_precision")
    if mixed is None:
        legacy = _get(reading, "fp16")  # process_config: "fp16" if config_dict.get("fp16") else None
        if legacy is not None and legacy[0]:
            mixed = ("fp16", legacy[1])
    return AccelerateSettings(
        compute_environment=_get(reading, "compute_environment"),
        distributed_type=_get(reading, "distributed_type"),
        num_processes=_get(reading, "num_processes"),
        num_machines=_get(reading, "num_machines"),
        machine_rank=_get(reading, "machine_rank"),
        gpu_ids=_get(reading, "gpu_ids"),
        mixed_precision=mixed,
        use_cpu=_get(reading, "use_cpu"),
        deepspeed=_deepspeed(reading),
        fsdp=_fsdp(reading),
    )


def _section(reading: ConfigReading, name: str) -> list[tuple[str, Setting]] | None:
    """The direct keys of a top-level mapping, in file order, or None when it is absent or not a mapping."""
    head = reading.get(name)
    if head is None or not isinstance(head.value, dict):
        return None
    prefix = name + "."
    return [(e.key[len(prefix):], (e.value, e.span)) for e in reading.entries
            if e.key.startswith(prefix) and "." not in e.key[len(prefix):]]


def _deepspeed(reading: ConfigReading) -> AccelerateDeepSpeed | None:
    keys = _section(reading, "deepspeed_config")
    if keys is None:
        return None
    found = dict(keys)
    fields = {name: found.get(name) for name in AccelerateDeepSpeed.__dataclass_fields__ if name != "ignored"}
    ignored = tuple((name, reading.get(f"deepspeed_config.{name}").key_span)  # type: ignore[union-attr]
                    for name, _ in keys if name not in _DEEPSPEED_ARGS)
    return AccelerateDeepSpeed(**fields, ignored=ignored)


def _fsdp(reading: ConfigReading) -> AccelerateFsdp | None:
    keys = _section(reading, "fsdp_config")
    if keys is None:
        return None
    found: dict[str, Setting] = {}
    for name, setting in keys:  # file order, so the last of `fsdp_version` / `version` wins, as in launch.py
        found[name[len("fsdp_"):] if name.startswith("fsdp_") else name] = setting
    return AccelerateFsdp(**{name: found.get(name) for name in AccelerateFsdp.__dataclass_fields__})
