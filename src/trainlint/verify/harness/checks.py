"""Checks of what a training step did, beyond memory. TL201's: do the LoRA adapters get a gradient?

At the first optimizer step (after the first backward, from the step PRE hook) every trainable LoRA B weight
the optimizer steps (else every one found) must hold a non-zero ``.grad``: B starts at zero, so with no gradient
flowing through the checkpointed segments the adapters never move and the loss never changes, with no error
(the lessons' "silent trap"). A script that dies with "element 0 of tensors does not require grad" before its
first step fails the check too (:meth:`AdapterCheck.no_grad_crash`)."""

from __future__ import annotations

import gc
import re
import sys

LORA_B = re.compile(r"(^|\.)lora_(embedding_)?B(\.|$)")
NO_GRAD_MESSAGE = "does not require grad"


class AdapterCheck:
    def __init__(self, torch, models):
        self.torch = torch
        self.models = models  # the harness's WeakSet of the modules seen in training forwards
        self.checked = 0
        self.with_grad = 0
        self.ok: bool | None = None

    def lora_b_params(self) -> list:
        found: dict[int, object] = {}
        for model in list(self.models):
            for name, p in model.named_parameters():
                if p.requires_grad and LORA_B.search(name):
                    found.setdefault(id(p), p)
        if found:
            return list(found.values())
        layer_mod = sys.modules.get("peft.tuners.lora.layer")
        if layer_mod is None or not hasattr(layer_mod, "LoraLayer"):
            return []
        gc.collect()
        for obj in gc.get_objects():
            if isinstance(obj, layer_mod.LoraLayer):
                for holder in (getattr(obj, "lora_B", None), getattr(obj, "lora_embedding_B", None)):
                    if holder is None:
                        continue
                    for sub in holder.values():
                        p = getattr(sub, "weight", sub)
                        if isinstance(p, self.torch.Tensor) and p.requires_grad:
                            found.setdefault(id(p), p)
        return list(found.values())

    def check(self, optimizer) -> None:
        params = self.lora_b_params()
        if not params:
            return
        in_opt = {id(p) for g in optimizer.param_groups for p in g["params"]}
        stepped = [p for p in params if id(p) in in_opt]
        params = stepped or params
        with_grad = 0
        for p in params:
            g = p.grad
            if g is not None and bool(g.detach().ne(0).any()):
                with_grad += 1
        self.checked = len(params)
        self.with_grad = with_grad
        self.ok = with_grad == len(params)

    def no_grad_crash(self, paused) -> None:
        """The script died with "element 0 of tensors does not require grad" before its first step; `paused` is
        the memory tracker's pause (the check's own tensors are not the script's)."""
        try:
            with paused():
                params = self.lora_b_params()
        except Exception:
            params = []
        if params:
            self.ok = False
            self.checked = len(params)
            self.with_grad = 0
        elif sys.modules.get("peft") is not None:
            self.ok = False
