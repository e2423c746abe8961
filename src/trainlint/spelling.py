"""How the user writes a setting in the file a finding lands in: a Python keyword (`use_liger_kernel=True`), a key of
a framework config in the framework's own name (`enable_liger_kernel: true`), or a command-line flag
(`--enable_liger_kernel true`). The front end that read the file makes its Spelling; rules say settings and advice
only through it, so no layer rewrites a message afterwards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STYLES = ("python", "yaml", "flag")


@dataclass(frozen=True)
class Spelling:
    """`style`: "python" | "yaml" | "flag". `keys`: the library's argument name -> the front end's own key for it.
    `values`: (argument, the library's value) -> the front end's own value. `trainers`: a trainer class -> the
    trainer as the user knows it. `levers`: an intervention ("fused_loss", "attention") -> the front end's own
    advice for it, where it is not "set <argument>" (a plugin to list, a key with its conditions). `unsettable`:
    arguments the front end gives the user no way to set."""

    style: str = "python"
    keys: tuple[tuple[str, str], ...] = ()
    values: tuple[tuple[tuple[str, Any], Any], ...] = ()
    trainers: tuple[tuple[str, str], ...] = ()
    levers: tuple[tuple[str, str], ...] = ()
    unsettable: tuple[str, ...] = ()  # arguments the front end has no key for (advice to set them is left out)

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise ValueError(f"style must be one of {STYLES}, not {self.style!r}")

    def can_set(self, argument: str) -> bool:
        return argument not in self.unsettable

    def name(self, argument: str) -> str:
        """The key the user writes for `argument`."""
        return dict(self.keys).get(argument, argument)

    def value(self, argument: str, value: Any) -> str:
        """`value` of `argument` as the user writes it: a Python literal, or a YAML scalar (a flag's word too)."""
        for (arg, library_value), own in self.values:
            if arg == argument and library_value == value and type(library_value) is type(value):
                value = own
                break
        if self.style == "python":
            return f'"{value}"' if isinstance(value, str) else repr(value)
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, dict):  # a YAML flow mapping: `{use_reentrant: false}`
            return "{" + ", ".join(f"{k}: {self.value('', v)}" for k, v in value.items()) + "}"
        return str(value)

    def setting(self, argument: str, value: Any) -> str:
        """`attn_implementation="sdpa"` | `attn_implementation: sdpa` | `--flash_attn sdpa`."""
        name, written = self.name(argument), self.value(argument, value)
        if self.style == "python":
            return f"{name}={written}"
        if self.style == "flag":
            return f"--{name} {written}"
        return f"{name}: {written}"

    def advise(self, argument: str, value: Any, note: str | None = None) -> str:
        """"set <setting>" ("pass <flag>" on a command line), with `note` in parentheses."""
        verb = "pass" if self.style == "flag" else "set"
        return f"{verb} {self.setting(argument, value)}" + (f" ({note})" if note else "")

    def trainer(self, class_name: str) -> str:
        """The trainer as the user knows it: the class a script builds, or the framework's trainer."""
        return dict(self.trainers).get(class_name, class_name)

    def lever(self, intervention: str, default: str) -> str:
        """The front end's own advice for `intervention`, else `default` (the rule's, in this spelling)."""
        return dict(self.levers).get(intervention, default)


PYTHON = Spelling()
