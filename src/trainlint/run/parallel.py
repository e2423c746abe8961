"""Parallelism: the ZeRO stage / FSDP sharding the trainer's arguments or the launch's config set."""

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
