"""`resolve(ctx) -> Run`: what will execute for one entry point under one launch (the FileContext's facts,
resolved under its launch, and the targeted library versions).

A Run is immutable. Each of its decisions is worked out on first use and then fixed (`cached_property` on a frozen
dataclass): a rule that only asks about the attention does not pay for the optimizer or the eval phase, and a file
no rule asks about costs nothing. One Run per context: `resolve` keeps it on the context."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from trainlint.context import FileContext
from trainlint.facts import ModelLoad
from trainlint.knowledge.versions import Versions
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (the estimator is imported only when a run is estimated: a one-file check stays light)
    from trainlint.memory.estimate import EvalPhase
    from trainlint.memory.vision import VisionPlan
from trainlint.run.batch import Batch, resolve_batch
from trainlint.run.checkpointing import Checkpointing, resolve_checkpointing
from trainlint.run.components import Components, Generation, generation_phase, resolve_components
from trainlint.run.decided import Decided
from trainlint.run.eval import eval_phase
from trainlint.run.loss import Loss, fused_loss_applied, resolve_loss
from trainlint.run.model import Lora, ModelRun, lora, training_model
from trainlint.run.optimizer import optimizer
from trainlint.run.parallel import offload, sharding
from trainlint.run.vision import ImageTokens, image_tokens, tower_plan

_KEY = "_trainlint_run"  # where resolve() keeps a context's Run


@dataclass(frozen=True)
class Run:
    """One entry point under one launch. Values are `Decided` (value, span, certain or assumed, notes)."""

    ctx: FileContext = field(repr=False, compare=False)

    @property
    def versions(self) -> Versions:
        return self.ctx.versions

    # -- models -----------------------------------------------------------------------------------------
    @cached_property
    def models(self) -> tuple[ModelRun, ...]:
        """Every model load of the script, in file order."""
        return tuple(ModelRun(m, self.ctx.spec(m), self.ctx) for m in self.ctx.facts.models)

    def model(self, load: ModelLoad) -> ModelRun:
        """The ModelRun of one of the script's loads."""
        return self.models[next(i for i, m in enumerate(self.ctx.facts.models) if m is load)]

    @cached_property
    def trained(self) -> ModelRun | None:
        """The model the run trains (run/model.py training_model)."""
        load = training_model(self.ctx)
        return self.model(load) if load is not None else None

    @cached_property
    def images(self) -> Decided[ImageTokens | None]:
        """The image tokens each sample adds, for a vision-language model (run/vision.py)."""
        return image_tokens(self.ctx)

    @cached_property
    def tower(self) -> Decided[VisionPlan | None]:
        """A vision-language model's tower in the step: geometry, patches per sample, what trains (run/vision.py)."""
        spec = self.trained.spec if self.trained is not None else None
        return tower_plan(self.ctx, spec, self.images, self.lora.value, self.checkpointing.on.value is True)

    @cached_property
    def lora(self) -> Decided[Lora | None]:
        """The LoRA adapters on the trained model (PEFT's defaults where the config does not say)."""
        spec = self.trained.spec if self.trained is not None else None
        return lora(self.ctx, spec.model_type if spec is not None else None)

    # -- the step ---------------------------------------------------------------------------------------
    @cached_property
    def loss(self) -> Loss:
        """The training loss's path ("liger" | "chunked" | "full"), TRL's extra logits, the reference copy."""
        return resolve_loss(self.ctx)

    @cached_property
    def fused_loss_applied(self) -> bool:
        """Liger's fused linear cross-entropy or cut-cross-entropy is switched on in the script itself."""
        return fused_loss_applied(self.ctx)

    @cached_property
    def evaluation(self) -> Decided[EvalPhase | None]:
        """The eval step Trainer's evaluation loop runs, or None."""
        return eval_phase(self.ctx, self.loss.path.value)

    @cached_property
    def components(self) -> Components:
        """The models kept on the GPU besides the policy (reference, reward, value, teacher), per TRL trainer,
        version and setting (run/components.py)."""
        return resolve_components(self.ctx)

    @cached_property
    def generation(self) -> Decided[Generation | None]:
        """The generation phase of GRPO / RLOO / Online DPO, or None."""
        return generation_phase(self.ctx)

    @cached_property
    def checkpointing(self) -> Checkpointing:
        return resolve_checkpointing(self.ctx)

    @cached_property
    def batch(self) -> Batch:
        return resolve_batch(self.ctx)

    @cached_property
    def optimizer(self) -> Decided[str]:
        return optimizer(self.ctx)

    @cached_property
    def sharding(self) -> Decided[str | None]:
        return sharding(self.ctx)

    @cached_property
    def offload(self) -> Decided[tuple[str, ...]]:
        return offload(self.ctx)


def resolve(ctx: FileContext) -> Run:
    """The Run of a context, made once and kept on it."""
    run = ctx.__dict__.get(_KEY)
    if run is None:
        run = ctx.__dict__[_KEY] = Run(ctx)
    return run
