"""Parallelism: the ZeRO stage / FSDP sharding the trainer's arguments or the launch's config set, and what they
move to the CPU (offload)."""

from __future__ import annotations

import json
from pathlib import Path

from trainlint.context import FileContext
from trainlint.run.decided import Decided


def sharding(ctx: FileContext) -> Decided[str | None]:
    """"zero2" | "zero3" | "zero1" | None: the trainer's `fsdp` / `deepspeed` arguments, else the launch's
    accelerate / DeepSpeed config; `notes` say where a launch's value came from, or why a config was not read."""
    notes: list[str] = []
    found = _args_sharding(ctx, notes)
    launched = ctx.launch.sharding
    if found is None and launched is not None and launched.known:
        where = f" ({launched.origin.file}:{launched.origin.line})" if launched.origin and launched.origin.file else ""
        notes.append(f"{launched.value} from the launch's {launched.via} config{where}")
        return Decided(launched.value, launched.origin, not launched.assumed, f"the launch's {launched.via} config",
                       tuple(notes))
    return Decided(found, None, True, "the trainer's arguments" if found else "no sharding found", tuple(notes))


def offload(ctx: FileContext) -> Decided[tuple[str, ...]]:
    """What the run keeps on the CPU instead of the GPU: "optimizer" (the optimizer state, stepped on the CPU),
    "params" (the parameters, gathered to the GPU a layer at a time), "gradients" (FSDP's CPU offload only:
    DeepSpeed's offload_optimizer also moves gradient partitions, but its reduce buckets stay on the GPU, so they
    are still counted). From the trainer's arguments: a DeepSpeed
    config's `zero_optimization.offload_optimizer.device` / `offload_param.device` "cpu" | "nvme" (deepspeed
    runtime/zero/offload_config.py, default "none"; the deprecated `cpu_offload` / `cpu_offload_param` booleans mean
    "cpu", runtime/zero/config.py); `fsdp="full_shard offload"` (transformers training_args.py FSDPOption.OFFLOAD:
    torch's CPUOffload(offload_params=True), which also keeps gradients and the optimizer step on the CPU). Else the
    launch's accelerate config (launch/discover.py _accelerate_offload)."""
    args = ctx.main_args
    found: list[str] = []
    if args is not None:
        fsdp = args.get("fsdp")
        if fsdp.known and isinstance(fsdp.value, str) and "offload" in fsdp.value.split():
            found += ["params", "gradients", "optimizer"]
        config = _deepspeed_config(ctx, args, [])
        zero = (config or {}).get("zero_optimization") if isinstance(config, dict) else None
        if isinstance(zero, dict):
            for what, section, legacy in (("optimizer", "offload_optimizer", "cpu_offload"),
                                          ("params", "offload_param", "cpu_offload_param")):
                device = zero.get(section)
                device = device.get("device") if isinstance(device, dict) else None
                if str(device).lower() in ("cpu", "nvme") or zero.get(legacy) is True:
                    found.append(what)
    if found:
        return Decided(tuple(dict.fromkeys(found)), None, True, "the trainer's arguments",
                       (f"offloaded to the CPU: {', '.join(dict.fromkeys(found))} (the trainer's arguments)",))
    launched = ctx.launch.offload
    if launched is not None and launched.known:
        where = f" ({launched.origin.file}:{launched.origin.line})" if launched.origin and launched.origin.file else ""
        return Decided(launched.value, launched.origin, not launched.assumed, f"the launch's {launched.via} config",
                       (f"offloaded to the CPU: {', '.join(launched.value)} ({launched.via} config{where})",))
    return Decided((), None, True, "no offload found")


def _deepspeed_config(ctx: FileContext, args, notes: list[str]) -> dict | None:
    ds = args.get("deepspeed")
    if ds.known and isinstance(ds.value, dict):
        return ds.value
    if ds.known and isinstance(ds.value, str):
        path = Path(ds.value)
        path = path if path.is_absolute() else ctx.path.parent / path
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            notes.append(f"DeepSpeed config {ds.value} not readable: sharding not counted")
    return None


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
    config = _deepspeed_config(ctx, args, notes)
    if isinstance(config, dict):
        stage = (config.get("zero_optimization") or {}).get("stage")
        if stage in (1, 2, 3):
            return f"zero{stage}"
    return None
