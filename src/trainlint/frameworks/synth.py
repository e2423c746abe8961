"""Facts built from a framework config: the same Call / ModelLoad / ArgsObject / TrainerCall a script yields,
each value carrying the span of the YAML key that sets it, so the rules read a config as they read a script.

A call made here is one the framework makes when it runs the config (a `from_pretrained`, the TrainingArguments
it builds, `enable_input_require_grads()`): `qualname` names the framework function it stands for."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainlint.diagnostics import Span
from trainlint.facts.model import Call
from trainlint.facts.values import UNSET, Value
from trainlint.launch.model import ConfigReading, Entry

ORIGIN = "framework config"  # Value.via of a value read from the config (rules' own fixes skip it: see fixes.py)


@dataclass
class Keys:
    """The top-level keys of a config, read once: value, value span, key span."""

    reading: ConfigReading
    top: dict[str, Entry] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.top = {e.key: e for e in self.reading.top_level()}

    def has(self, name: str) -> bool:
        return name in self.top

    def raw(self, name: str, default: Any = None) -> Any:
        entry = self.top.get(name)
        return entry.value if entry is not None else default

    def value(self, name: str, convert=None) -> Value:
        """The key as a known Value located at its value (UNSET when absent)."""
        entry = self.top.get(name)
        if entry is None:
            return UNSET
        v = entry.value if convert is None else convert(entry.value)
        return Value("known", v, entry.span, ORIGIN)

    def nested(self, dotted: str) -> Value:
        """A nested key (`trl.num_generations`) as a known Value located at its value (UNSET when absent or null)."""
        entry = self.reading.get(dotted)
        if entry is None or entry.value is None:
            return UNSET
        return Value("known", entry.value, entry.span, ORIGIN)

    def nested_line(self, dotted: str) -> Span | None:
        return _key_line(self.reading.get(dotted))

    def key_span(self, name: str) -> Span | None:
        entry = self.top.get(name)
        return entry.key_span if entry is not None else None

    def line_span(self, name: str) -> Span | None:
        """From the key to the end of its value (where a diagnostic about the setting points)."""
        return _key_line(self.top.get(name))


def _key_line(entry) -> Span | None:
    """From an entry's key to the end of its value when the value starts on the key's line, else the key; None
    without an entry."""
    if entry is None:
        return None
    if entry.span.line == entry.key_span.line:
        return Span(entry.key_span.line, entry.key_span.col, entry.span.end_line, entry.span.end_col)
    return entry.key_span


def local_file(value: Value, config: Path) -> Value:
    """A relative file a config names (`deepspeed: examples/deepspeed/ds_z3_config.json`) is opened from the folder
    the framework runs in, usually the repository root: found beside the config or in a folder above it (up to the
    git top level), the value becomes that absolute path, keeping its span."""
    if not value.known or not isinstance(value.value, str) or Path(value.value).is_absolute():
        return value
    folder = config.resolve().parent
    while True:
        candidate = folder / value.value
        if candidate.is_file():
            return Value("known", str(candidate), value.origin, value.via)
        if (folder / ".git").exists() or folder.parent == folder:
            return value
        folder = folder.parent


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def next(self) -> int:
        self.n += 1
        return self.n


def call(qualname: str, kwargs: dict[str, tuple[Value, Span | None]], span: Span, counter: Counter,
         target: str | None = None, receiver: str | None = None) -> Call:
    """A call the framework makes, its keywords the config's values (unset ones left out)."""
    kept = [(k, v, s) for k, (v, s) in kwargs.items() if not v.unset]
    return Call(qualname=qualname, short=qualname.rsplit(".", 1)[-1], receiver=receiver, target=target, args=(),
                arg_names=(), kwargs=tuple((k, v) for k, v, _ in kept),
                kw_spans=tuple((k, s) for k, _, s in kept if s is not None), kw_names=(), opaque_kwargs=False,
                span=span, index=counter.next(), scope="<module>")


def default(value: Any, why: str) -> Value:
    """A framework default (not written in the config): known, no origin."""
    return Value("known", value, None, why)


@dataclass(frozen=True)
class Problem:
    """A TL0xx finding about the config itself (a key the framework refuses or ignores, a missing model path)."""

    code: str
    message: str
    span: Span


@dataclass
class Mapped:
    """A framework config read as facts, with what the rules cannot see in the facts alone."""

    framework: str
    release: str  # the framework release whose semantics were applied
    version_note: str  # why that release
    facts: Any  # ScriptFacts
    keys: Keys
    problems: list[Problem] = field(default_factory=list)
    spelled: dict[str, str] = field(default_factory=dict)  # HF argument name -> the config's key for it
    attention_key: str = "attn_implementation"  # the key a TL101 fix writes
