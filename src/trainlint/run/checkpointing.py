"""Activation (gradient) checkpointing: whether it is on, and whether it runs reentrant.

Library facts: context.py `gradient_checkpointing` / `checkpointing` (the flag, its transformers 5.x name
`activation_checkpointing`, TRL's default True since 0.22, FSDP's own activation checkpointing);
knowledge/libraries.py `gc_reentrant_default` (the reentrant default per transformers release).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainlint.context import FileContext
from trainlint.facts import Value
from trainlint.facts.values import UNSET
from trainlint.knowledge import libraries
from trainlint.run.decided import Decided

GC_ENABLE = ("gradient_checkpointing_enable", "activation_checkpointing_enable")
GC_KWARGS = ("gradient_checkpointing_kwargs", "activation_checkpointing_kwargs")


def reentrant_in_effect(kwargs: Value, transformers_5: bool, via_trainer: bool) -> bool | None:
    """Whether `*_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)` runs reentrant checkpointing.

    transformers 5.24 `_activation_checkpointing_enable`: None -> {"use_reentrant": False};
    <= 4.57: None -> {"use_reentrant": True}. A dict without the key (even `{}`) is passed through and
    torch 2.13's checkpoint defaults to use_reentrant=True (with a warning). The 5.24 Trainer passes
    `gc_kwargs or None`, so `{}` there means the 5.x default.
    """
    if kwargs.unset or (kwargs.known and kwargs.value is None):
        return not transformers_5
    if not kwargs.known or not isinstance(kwargs.value, dict):
        return None
    if via_trainer and transformers_5 and not kwargs.value:
        return False
    if "use_reentrant" not in kwargs.value:
        return True
    flag = kwargs.value["use_reentrant"]
    return flag if isinstance(flag, bool) else None


def kwargs_of(call) -> Value:
    """The checkpointing kwargs an `*_checkpointing_enable(...)` call passes (UNSET when none)."""
    for name in GC_KWARGS:
        if call.has_kw(name):
            return call.kw(name)
    return UNSET


@dataclass(frozen=True)
class Checkpointing:
    on: Decided[bool | None]  # None: the script does not say clearly
    reentrant: Decided[bool | None]  # None when off, or not known


def _own_loop(ctx: FileContext) -> str | None:
    """The TRL trainer whose own `train()` replaces Trainer's (PPO 0.12-1.12, RLOO < 0.22:
    knowledge/trl_trainers.py rollout_loop), so nothing enables checkpointing from the arguments: transformers
    enables it in `Trainer.train()` (5.25.0 trainer.py:1518-1545; 4.57 `_inner_training_loop`), which these override
    (trl 0.19.1 ppo_trainer.py and rloo_trainer.py `train`, no `gradient_checkpointing_enable` call; 1.10.0
    experimental/ppo/ppo_trainer.py:604 `train`, the wrapper's `gradient_checkpointing_enable` l.283 never called)."""
    from trainlint.knowledge import trl_trainers as T

    return next((t.class_name for t in ctx.facts.trainers if t.library == "trl"
                 and T.rollout_loop(t.class_name, ctx.versions.trl)), None)


def resolve_checkpointing(ctx: FileContext) -> Checkpointing:
    on = ctx.gradient_checkpointing
    default = libraries.gc_reentrant_default(ctx.versions.transformers)
    call = next((c for c in ctx.facts.calls if c.short in GC_ENABLE), None)
    args = ctx.main_args
    loop = _own_loop(ctx) if call is None and on else None
    if loop is not None:
        flag = next((args.get(n) for n in ("gradient_checkpointing", "activation_checkpointing")
                     if args is not None and args.get(n).known), None)
        note = (f"{loop} in TRL {ctx.versions.trl.version} runs its own train(), which never enables "
                f"checkpointing: gradient_checkpointing=True in its config does nothing")
        return Checkpointing(Decided(False, flag.origin if flag is not None else None, True, note),
                             Decided(None, None, True, "checkpointing off"))
    if call is not None:
        kwargs, via_trainer, span, written = kwargs_of(call), False, call.span, True
    elif args is not None and on:
        enabled, kwargs = ctx.checkpointing(args)
        flag = next((args.get(n) for n in ("gradient_checkpointing", "activation_checkpointing")
                     if args.get(n).known), None)
        via_trainer, span = True, flag.origin if flag is not None else None
        written = flag is not None and not flag.assumed
    else:
        kwargs, via_trainer, span, written = UNSET, False, None, on is False and not ctx.facts.trainers
    if on is None:
        decided_on = Decided(None, None, False, "gradient checkpointing not readable",
                             ("gradient checkpointing not readable: assumed off",))
    else:
        why = "gradient_checkpointing_enable()" if call is not None else (
            "the trainer's arguments" if args is not None else "no checkpointing found")
        decided_on = Decided(on, span, written, why)
    if not on or default is None:
        return Checkpointing(decided_on, Decided(None, None, not on, "checkpointing off" if not on else
                                                 f"transformers {ctx.versions.transformers.version}'s default is not known"))
    reentrant = reentrant_in_effect(kwargs, not default, via_trainer)
    flag = kwargs.value.get("use_reentrant") if kwargs.known and isinstance(kwargs.value, dict) else None
    if isinstance(flag, bool):
        return Checkpointing(decided_on, Decided(reentrant, kwargs.origin, not kwargs.assumed,
                                                 f"use_reentrant={flag}"))
    why = (f"transformers {ctx.versions.transformers.version}'s default (use_reentrant={reentrant})"
           if kwargs.unset or (kwargs.known and not kwargs.value) or kwargs.is_(None) else
           "torch's checkpoint default (use_reentrant=True)" if reentrant else "not readable")
    return Checkpointing(decided_on, Decided(reentrant, None, False, why))
