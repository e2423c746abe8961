"""`Decided[T]`: one value of a Run, with where it was written and whether it is certain or assumed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from trainlint.diagnostics import Span
from trainlint.facts import Value

T = TypeVar("T")

# How a Value was found that makes it a default the caller could override (facts/values.py `via`)
DEFAULT_VIAS = frozenset({"library default", "argparse default", "dataclass default"})


@dataclass(frozen=True)
class Decided(Generic[T]):
    """A decision of the Run.

    `value`: what will execute (None where the script does not let us know). `span`: where the deciding value was
    written (a launcher's span for a launch value; None for a library default). `certain`: the script (or its launch)
    fixes it; False when it rests on a default or a guess the caller could change. `why`: how it was decided, in
    the words messages use. `notes`: what the estimate lists as assumed for it, in order (empty when nothing is)."""

    value: T
    span: Span | None = None
    certain: bool = True
    why: str = ""
    notes: tuple[str, ...] = ()

    @property
    def assumed(self) -> bool:
        return not self.certain

    @property
    def assumption(self) -> str | None:
        """The assumption text, when the value is assumed and says why; None otherwise."""
        return "; ".join(self.notes) or None


def certain(value: T, span: Span | None = None, why: str = "", notes: tuple[str, ...] = ()) -> Decided[T]:
    return Decided(value, span, True, why, tuple(notes))


def assumed(value: T, why: str = "", notes: tuple[str, ...] | list[str] = (), span: Span | None = None) -> Decided[T]:
    return Decided(value, span, False, why, tuple(notes))


def from_value(value: Value, default=None, notes: tuple[str, ...] | list[str] = ()) -> Decided:
    """A fact's Value as a decision: certain when it is known and was written (not a default, not resting on a
    launcher's default); an unset or unknown value gives `default`, assumed."""
    if value.known:
        sure = value.via not in DEFAULT_VIAS and not value.via.endswith(" default") and not value.assumed
        return Decided(value.value, value.origin, sure, value.via, tuple(notes))
    return Decided(default, None, False, value.state, tuple(notes))
