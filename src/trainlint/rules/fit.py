"""Does the run fit the GPU it is meant for? The GPU a file's jobs run on (`--gpu`, `gpus` per path, `gpu`,
else the GPU its launch requests: launch/gpu.py) and the run's estimate against it, shared by TL202 and TL701
so both judge with the same numbers as `trainlint estimate` (memory.estimate, with its CUDA context allowance)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from dataclasses import replace as dc_replace
from fnmatch import fnmatch
from typing import Any

from trainlint.context import FileContext
from trainlint.diagnostics import Span
from trainlint.discovery import relative
from trainlint.knowledge.gpus import parse_gpu
from typing import TYPE_CHECKING

from trainlint.memory import fmt_bytes

if TYPE_CHECKING:  # the estimate is imported only when a GPU is known (a one-file check stays light)
    from trainlint.memory.estimate import Estimate, Plan


@dataclass(frozen=True)
class Fit:
    gpu: str
    capacity: int  # bytes
    plan: "Plan"
    estimate: "Estimate"
    source: Any = None  # launch.gpu.LaunchGpu when the GPU is the one the launch requests (no setting gives one)

    @property
    def need(self) -> int:
        """What the GPU must hold: the predicted peak plus the CUDA context (as `estimate`'s verdict)."""
        from trainlint.memory.estimate import CUDA_OVERHEAD

        return self.estimate.peak + CUDA_OVERHEAD

    @property
    def fits(self) -> bool:
        return self.need <= self.capacity

    def need_with(self, **changes) -> int:
        from trainlint.memory.estimate import CUDA_OVERHEAD, estimate

        return estimate(replace(self.plan, **changes)).peak + CUDA_OVERHEAD

    @property
    def where(self) -> str:
        # as `estimate` prints it; a size the user gave is its own name ("the 24 GiB GPU")
        gpu = f"the {self.gpu} GPU" + ("" if self.gpu.endswith("GiB") else f" ({fmt_bytes(self.capacity)})")
        if self.source is not None:  # "the L4 GPU (22.5 GiB) the launch requests (scripts/train.slurm:3)"
            return f"{gpu} the launch requests ({self.source.span.file}:{self.source.span.line})"
        return gpu

    def related(self, diag):
        """The finding relates to the line that requests the GPU, when a launch decided it."""
        if self.source is None:
            return diag
        span = self.source.span
        entry = (span.file, span.local(), f"the GPU the launch requests ({self.source.option})")
        if diag.filename == span.file and diag.span == span.local():
            return diag
        return dc_replace(diag, related=diag.related + (entry,))


def gpu_for(ctx: FileContext) -> tuple[str, int] | None:
    """The settings' GPU (`--gpu`, `gpus`, `gpu`), else the one the launch requests."""
    gpu, _source = gpu_and_source(ctx)
    return gpu


def gpu_and_source(ctx: FileContext):
    """(name, bytes) or None, and the LaunchGpu when the launch decided it: settings and --gpu win."""
    chosen = gpu_for_path(ctx.path, ctx.settings)
    if chosen is not None:
        return chosen, None
    source, _note = ctx.launch_gpu
    return ((source.name, source.capacity), source) if source is not None else (None, None)


def gpu_for_path(path, settings) -> tuple[str, int] | None:
    """The first `gpus` pattern matching the file (relative to the config's folder), else `gpu`; None: no GPU
    is known, and the rules that judge the fit stay silent. (`--gpu` on the command line replaces both.)"""
    rel = relative(path, settings.root)
    for pattern, gpu in settings.gpus:
        if fnmatch(rel, pattern) or fnmatch(path.name, pattern):
            return parse_gpu(gpu)
    return parse_gpu(settings.gpu) if settings.gpu else None


def known_plan(ctx: FileContext, model=None) -> "Plan | None":
    """The run's plan (planning.plan_for) when its model, batch and sequence length are known, and, when `model` is
    given, it is the model the run trains; None otherwise."""
    from trainlint.planning import Overrides, PlanError, plan_for

    try:
        plan, trained, _notes, unknown = plan_for(ctx, Overrides())
    except PlanError:
        return None
    if ctx.seq_len.unset and plan_for_images(ctx):
        # a VLM sample's length taken from its image tokens is `estimate`'s assumption (run/vision.py), listed
        # there; a finding's GiB and verdicts do not rest on it (TL101 names it where it uses it)
        return None
    return None if unknown or (model is not None and trained is not model) else plan


def plan_for_images(ctx: FileContext) -> bool:
    from trainlint.run import resolve

    return resolve(ctx).images.value is not None


def peak_saving(ctx: FileContext, model, code: str, fix: str) -> str:
    """', ~X GiB off this run's peak with {fix}': memory.estimate.fix_saving, the figure `estimate`'s lever and
    `verify` print for this finding; '' when the run's plan is not known or the finding does not apply to it."""
    from trainlint.memory.estimate import FIXES, fix_saving

    plan = known_plan(ctx, model)
    field_name, before, _after = FIXES[code]
    if plan is None or getattr(plan, field_name) not in (before if isinstance(before, tuple) else (before,)):
        # (the plan does not see the run as the rule does)
        return ""
    saved = fix_saving(plan, code)
    if saved > 0:
        return f", ~{fmt_bytes(saved)} off this run's peak with {fix}"
    return f" ({fix} would not lower this run's peak: another consumer sets it)"


def run_fit(ctx: FileContext) -> Fit | None:
    """The estimate of the run against its GPU; None when no GPU is known or the estimate would rest on a
    guess (unknown model, batch or sequence length)."""
    gpu, source = gpu_and_source(ctx)
    if gpu is None:
        return None
    from trainlint.memory.estimate import estimate

    plan = known_plan(ctx)
    if plan is None or ctx.gradient_checkpointing is None:
        return None
    return Fit(gpu[0], gpu[1], plan, estimate(plan), source)


def anchor(ctx: FileContext) -> tuple[Span, object]:
    """Where a finding about the whole run points: the trainer call, else the arguments object, else the
    training loop's backward call, else the model load; and the Value (if any) whose span decides it."""
    if ctx.facts.trainers:
        return ctx.facts.trainers[0].call.span, None
    if ctx.main_args is not None:
        return ctx.main_args.call.span, None
    backward = next((c for c in ctx.facts.calls if c.short == "backward"), None)
    if backward is not None:
        return backward.span, None
    return ctx.facts.models[0].anchor, None


def consumers_text(est: "Estimate") -> str:
    names = {"weights": "weights", "gradients": "gradients", "optimizer": "optimizer state",
             "activations": "activations", "logits": "logits/loss", "attention": "attention scores"}
    return ", ".join(f"{names[k]} {fmt_bytes(v)}" for k, v in est.consumers.items() if v)


def with_fit_note(ctx: FileContext, diag, **changes):
    """A specific finding whose one change makes the run fit its GPU says so (TL701 then stays silent, so the
    overflow is reported once)."""
    fit = run_fit(ctx)
    if fit is None or fit.fits:
        return diag
    after = fit.need_with(**changes)
    if after > fit.capacity:
        return diag
    return fit.related(dc_replace(diag, message=f"{diag.message}; this alone makes the run fit {fit.where}: "
                                                f"~{fmt_bytes(fit.need)} -> ~{fmt_bytes(after)}"))
