"""The optimizer a run steps: a torch / bitsandbytes / transformers optimizer class the script builds, else the
trainer's `optim`, else the Trainer's default for the targeted transformers."""

from __future__ import annotations

from trainlint.context import FileContext
from trainlint.run.decided import Decided

_OPTIM_CLASSES = {"AdamW": "adamw", "Adam": "adam", "AdamW8bit": "adamw_8bit", "Adam8bit": "adamw_8bit",
                  "PagedAdamW8bit": "paged_adamw_8bit", "PagedAdamW32bit": "paged_adamw_32bit",
                  "PagedAdamW": "paged_adamw_32bit", "Adafactor": "adafactor"}


def optimizer(ctx: FileContext) -> Decided[str]:
    """The optimizer's name as memory.estimate knows it; `notes` say what was assumed."""
    for call in ctx.facts.calls:
        if call.short in _OPTIM_CLASSES and (call.qualname.startswith(("torch.", "bitsandbytes", "bnb", "transformers"))):
            return Decided(_OPTIM_CLASSES[call.short], call.span, True, f"{call.short}(...)")
        if call.short == "SGD" and call.qualname.startswith("torch."):
            momentum = call.kw("momentum")
            return Decided("sgd_momentum" if momentum.known and momentum.value else "sgd", call.span, True,
                           "SGD(...)")
    args = ctx.main_args
    if args is not None:
        optim = args.get("optim")
        if optim.known and isinstance(optim.value, str):
            return Decided(optim.value, optim.origin, not optim.assumed, f"optim={optim.value!r}")
        if not optim.unset:
            return Decided("adamw", None, False, "optim not readable", ("optimizer not readable: assumed AdamW",))
        if ctx.versions.transformers.at_least(4, 54):
            # training_args.py (4.54.0 l.1292; 5.25.0 l.806-813): "adamw_torch_fused" when torch >= 2.8 is installed
            return Decided("adamw_torch_fused", None, False, "TrainingArguments' default optim", (
                f"optim not set: transformers {ctx.versions.transformers.version}'s default adamw_torch_fused "
                f"(assuming torch >= 2.8 where it runs; older torch gets adamw_torch)",))
        return Decided("adamw_torch", None, False, "TrainingArguments' default optim")
    return Decided("adamw", None, False, "no optimizer found", ("no optimizer found: assumed AdamW",))
