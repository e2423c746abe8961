"""What a script trains, as a memory Plan: read from its Run (trainlint.run: model, dtype, quantization, LoRA,
checkpointing, attention, loss path, batch, sequence length, optimizer, sharding, eval phase). Every value the
script does not fix is listed as an assumption (the Run's notes, in this order); nothing is silently invented.
Command-line overrides (--batch, --seq, --world-size) apply on top of the Run."""

from __future__ import annotations

from dataclasses import dataclass

from trainlint.config import for_path
from trainlint.context import FileContext
from trainlint.facts import ModelLoad
from trainlint.memory.estimate import Plan
from trainlint.run import PlanError, resolve
from trainlint.run.model import training_model

__all__ = ["Overrides", "PlanError", "plan_for", "training_model"]


@dataclass(frozen=True)
class Overrides:
    batch: int | None = None
    seq: int | None = None
    world_size: int | None = None


def plan_for(ctx: FileContext, overrides: Overrides) -> tuple[Plan, ModelLoad, list[str], list[str]]:
    """(plan, model, assumptions, unknowns). unknowns name the consumers that rest on values not known."""
    run = resolve(ctx)
    trained = run.trained
    if trained is None:
        raise PlanError("no model load found (from_pretrained, from_config, a model class, or a TRL trainer's model=)")
    model = trained.load
    notes: list[str] = []
    geo = trained.geometry
    notes += geo.notes
    precision = trained.precision
    notes += precision.notes
    w, act = precision.value
    lora = run.lora
    notes += lora.notes
    attention = trained.kernel
    notes += attention.notes
    gc = run.checkpointing.on
    notes += gc.notes
    unknown: list[str] = []
    shape = run.batch
    batch = overrides.batch or shape.micro.value
    seq = overrides.seq or shape.seq_len.value
    if batch is None:
        unknown.append("batch")
    elif not overrides.batch and ctx.batch.via == "library default":
        notes.append(f"batch {batch}: the library default (per_device_train_batch_size)")
    images = run.images
    if images.value is not None and not overrides.seq:
        tokens = images.value.per_sample
        notes += images.notes
        if seq is None:  # TRL's vision advice is max_length=None: the sample is as long as its image makes it
            seq = tokens
            notes.append(f"sequence length not set: taken as the {tokens:,} image tokens of one sample (the text "
                         f"tokens are not counted); pass --seq")
        elif tokens > seq:  # max_length bounds text and image tokens together (trl 1.16.0 sft_trainer.py l.488-495)
            notes.append(f"max length {seq:,} is shorter than one image's {tokens:,} tokens: truncation cuts an "
                         f"image's tokens, which the model rejects (image features and image tokens do not match)")
    if seq is None:
        unknown.append("sequence length")
    elif not overrides.seq and ctx.seq_len.via == "SFTConfig.max_length default":
        notes.append(f"sequence length {seq}: SFTConfig's default max_length")
    loss = run.loss
    trl_shape = loss.shape
    if trl_shape is not None and batch is not None:
        if trl_shape.rows > 1:
            batch *= trl_shape.rows
            notes.append(f"{trl_shape.trainer} runs chosen and rejected together: {trl_shape.rows} x the batch per "
                         f"forward")
        if trl_shape.reference is not None:
            notes.append(f"{trl_shape.trainer} builds the {trl_shape.reference} model's logits in the same step")
    if loss.reference_copy is not None:
        notes.append(f"{loss.reference_copy} keeps a frozen copy of the model as its reference (no PEFT, no "
                     f"ref_model, no precompute_ref_log_probs)")
    sharding = run.sharding
    notes += sharding.notes
    world = overrides.world_size
    stated = for_path(ctx.settings.world_sizes, ctx.path, ctx.settings.root) if world is None else None
    if stated is not None:
        world = stated[1]
        notes.append(f"{world} processes ({ctx.settings.source} world-size.\"{stated[0]}\")")
    launched = ctx.launch.world_size
    if world is None and launched is not None and launched.known and isinstance(launched.value, int) and \
            not isinstance(launched.value, bool) and launched.value > 0:
        world = launched.value  # the launch's processes (torchrun / accelerate / deepspeed / Slurm), as `estimate`
        if sharding.value:
            notes.append(f"{sharding.value} over {world} processes ({launched.via})")
    world = world or 1
    if sharding.value and not overrides.world_size and stated is None and (launched is None or not launched.known):
        notes.append(f"{sharding.value} sharding found: assumed 1 GPU; pass --world-size")
    offloaded = run.offload
    notes += offloaded.notes
    optim = run.optimizer
    notes += optim.notes
    evaluation = run.evaluation
    notes += evaluation.notes
    plan = Plan(
        geometry=geo.value,
        batch=batch or 1,
        seq=seq or 1,
        dtype_bytes=w,
        act_bytes=act,
        quantization=model.quantization.value if model.quantization.known else None,
        lora_r=lora.value.rank if lora.value is not None else None,
        lora_targets=(lora.value.targets if lora.value is not None else ()) or ("q_proj", "v_proj"),
        checkpointing=bool(gc.value),
        attention=attention.value,
        loss=loss.path.value,
        reference_logits=trl_shape is not None and trl_shape.reference is not None,
        reference_weights=loss.reference_copy is not None,
        optimizer=optim.value,
        world_size=world,
        sharding=sharding.value,
        offload=offloaded.value,
        evaluation=evaluation.value,
        assumptions=tuple(notes),
    )
    return plan, model, notes, unknown
