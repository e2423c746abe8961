"""Statically resolved values: known (with where it came from), unknown (never guessed), or unset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainlint.diagnostics import Span


@dataclass(frozen=True)
class Value:
    """What a script says about one setting.

    ``state`` is ``"known"`` (``value`` holds it), ``"unknown"`` (the script sets it, but not to
    something we can read without running it) or ``"unset"`` (the script does not set it, so the
    library default applies). ``origin`` is where a known value was written, and ``via`` says how it
    was found (``"literal"``, ``"constant"``, ``"argparse default"``, ``"dataclass default"``,
    ``"library default"``), so messages and ``--verbose`` can say why.
    """

    state: str
    value: Any = None
    origin: Span | None = None
    via: str = ""
    # The defaults a launch value rests on, said ("MODEL=org/model-7b, the default at finetune.sh:6"): the caller
    # could override them. Empty for a certain value.
    assumed: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        return self.state == "known"

    @property
    def unknown(self) -> bool:
        return self.state == "unknown"

    @property
    def unset(self) -> bool:
        return self.state == "unset"

    def get(self, default: Any = None) -> Any:
        return self.value if self.state == "known" else default

    def is_(self, expected: Any) -> bool:
        """True only when the value is known and equal to ``expected`` (``True == 1`` excluded)."""
        return self.state == "known" and type(self.value) is type(expected) and self.value == expected


UNKNOWN = Value("unknown")
UNSET = Value("unset")


def known(value: Any, origin: Span | None = None, via: str = "literal") -> Value:
    return Value("known", value, origin, via)


def library_default(value: Any) -> Value:
    return Value("known", value, None, "library default")


def map_fields(obj, walk):
    """`obj` (a frozen dataclass) with `walk` applied to each field; `obj` itself when nothing changed."""
    from dataclasses import fields, replace

    changes = {}
    for f in fields(obj):
        old = getattr(obj, f.name)
        new = walk(old)
        if new is not old:
            changes[f.name] = new
    return replace(obj, **changes) if changes else obj


def keep_guard_symbols(before, after):
    """`after` (a Call whose values were bound at a call site or under a launch) with each guard condition that
    became unknown given back its symbol (`args.use_lora`): two calls in branches that cannot both run are then
    still seen as such (Call.excludes); a condition that became known, or another symbol (a function's parameter
    bound to a command-line option at its call site), is kept as it became."""
    from dataclasses import replace

    return replace(after, guards=tuple(old if new[0].unknown else new for old, new in zip(before.guards, after.guards)))
