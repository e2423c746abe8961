"""The batch shape: micro-batch per device, gradient accumulation, sequence length, packing; and the shape as
TL401 compares it between two versions of a file (where each number is written, what keyword the fix sets)."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainlint.context import FileContext
from trainlint.diagnostics import Span
from trainlint.facts import ArgsObject, Call, ScriptFacts, Value
from trainlint.facts.names import ACCELERATOR, DATALOADER
from trainlint.knowledge.libraries import TRAINING_ARGS_DEFAULTS
from trainlint.run.decided import Decided, from_value


@dataclass(frozen=True)
class Shape:
    """A version's batch x accumulation, with where each is written (TL401 compares two of them)."""

    batch: int
    accum: int
    batch_name: str
    accum_name: str
    span: Span  # where the batch is set in this version
    accum_span: Span | None
    call: Call | None = None  # the call that takes the accumulation keyword, for the fix
    accum_value: Value | None = None
    accum_keyword: str = "gradient_accumulation_steps"


def _int(value: Value, default: int | None) -> int | None:
    if value.unset:
        return default
    if value.known and isinstance(value.value, int) and not isinstance(value.value, bool) and value.value > 0:
        return value.value
    return None


def args_shape(args: ArgsObject) -> Shape | None:
    """The shape a trainer's arguments object sets (TrainingArguments' defaults for what it leaves unset); None
    when a number is not readable."""
    if args.call.opaque_kwargs:
        return None
    batch = _int(args.get("per_device_train_batch_size"), TRAINING_ARGS_DEFAULTS["per_device_train_batch_size"])
    accum = _int(args.get("gradient_accumulation_steps"), TRAINING_ARGS_DEFAULTS["gradient_accumulation_steps"])
    if batch is None or accum is None:
        return None
    return Shape(batch, accum, "per_device_train_batch_size", "gradient_accumulation_steps",
                 args.call.kw_span("per_device_train_batch_size") or args.call.span,
                 args.call.kw_span("gradient_accumulation_steps"), args.call, args.get("gradient_accumulation_steps"))


def loop_shape(facts: ScriptFacts) -> Shape | None:
    """The shape of a hand-written loop: its one DataLoader's batch_size and the accumulation it writes."""
    loaders = [c for c in facts.calls if c.is_api(*DATALOADER)]
    if len(loaders) != 1:
        return None
    batch = _int(loaders[0].arg(1, "batch_size"), 1)
    accums = {e.value.value for e in facts.accum_evidence if e.value.known}
    if any(not e.value.known for e in facts.accum_evidence) or len(accums) > 1:
        return None
    accum = accums.pop() if accums else 1
    if batch is None or not isinstance(accum, int) or isinstance(accum, bool) or accum <= 0:
        return None
    span = loaders[0].kw_span("batch_size") or loaders[0].span
    where = next((e for e in facts.accum_evidence), None)
    name = "accumulation steps"
    if where is not None:
        name = ("Accelerator gradient_accumulation_steps" if where.source.startswith("Accelerator(")
                else where.source.removesuffix(" ="))
    accelerators = [c for c in facts.calls if c.is_api(*ACCELERATOR)]
    call = accelerators[0] if len(accelerators) == 1 and where is not None and where.source.startswith("Accelerator(") \
        else None
    return Shape(batch, accum, "DataLoader batch_size", name, span, where.span if where else None, call,
                 where.value if where is not None else None)


@dataclass(frozen=True)
class Batch:
    """What one optimizer step sees per device. `micro`, `accumulation` and `seq_len` come from the context's
    reading of the facts (context.py: batch, accumulation, seq_len); None where not known."""

    micro: Decided[int | None]
    accumulation: Decided[int | None]
    seq_len: Decided[int | None]
    packing: Decided[bool | None]
    facts: ScriptFacts = field(repr=False, compare=False)

    def shape_for(self, args: ArgsObject) -> Shape | None:
        """The shape an arguments object of this run sets (TL401)."""
        return args_shape(args)

    @property
    def loop(self) -> Shape | None:
        """The shape of this run's hand-written loop (TL401)."""
        return loop_shape(self.facts)


def resolve_batch(ctx: FileContext) -> Batch:
    args = ctx.main_args
    packing = args.get("packing") if args is not None else None
    if packing is None:
        packed = Decided(None, None, False, "no arguments object")
    elif packing.unset and args.class_name == "SFTConfig":
        packed = Decided(False, None, False, "SFTConfig's default packing=False")
    else:
        packed = from_value(packing)
    return Batch(from_value(ctx.batch), from_value(ctx.accumulation), from_value(ctx.seq_len), packed, ctx.facts)
