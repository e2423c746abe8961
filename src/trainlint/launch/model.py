"""How a script is run: the types the launch layer produces and the rest of trainlint reads.

The launch layer never executes anything. Shell launchers are read with a shell lexer (launch/shell.py),
args files and framework configs with a safe loader (launch/configs.py). A value that depends on
something outside the file (`$1`, an unset variable, `$(cmd)`) is carried with text None: unknown,
never guessed. Every value keeps the span it is written at, so a finding can point there.

Spans follow trainlint.diagnostics.Span: 1-based lines, 1-based columns, end column exclusive.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainlint.diagnostics import Span


@dataclass(frozen=True)
class Assumption:
    """A value the documented run takes from a default the caller could override: `MODEL=org/model-7b` before
    an option parser the run as documented (no options) leaves alone, `${1:-x}`, `${VAR:-x}`."""

    name: str  # the variable ("MODEL"), or the positional parameter ("1")
    value: str
    file: str  # the file the default is written in, as the reader was given it
    line: int

    def said(self, file: str | None = None) -> str:
        """`MODEL=org/model-7b, the default at finetune.sh:6` (`file`: how to show the file)."""
        name = f"${self.name}" if self.name.isdigit() else self.name
        return f"{name}={self.value}, the default at {file or self.file}:{self.line}"


@dataclass(frozen=True)
class Word:
    """One shell word after quote removal and expansion of the variables the file sets itself."""

    text: str | None  # None: depends on something not known statically (see `note`)
    span: Span  # where the word is written, in the file of the Invocation it belongs to
    raw: str = ""  # the word as written, quotes and `$VAR`s included (a fix edits this text)
    # When the whole word is one variable's value (`$MODEL`, `${MODEL}`, a word of a heredoc held in `$cmd`):
    # where that value is written (the assignment `MODEL=...` or the heredoc line), so a finding and a fix
    # land on the value itself; None otherwise.
    origin: Span | None = None
    note: str = ""  # why text is None, e.g. "$1 is set by the caller"
    # The defaults a known text rests on (the caller could override them); empty when the text is certain.
    assumed: tuple[Assumption, ...] = ()


@dataclass(frozen=True)
class Invocation:
    """One command line that runs a Python training script (or module)."""

    file: Path  # the file the command is written in (launcher, README, notebook)
    span: Span  # the whole command, continuation lines included
    launcher: str  # "python" | "torchrun" | "accelerate launch" | "deepspeed" | "srun torchrun" | ...
    script: Word | None  # the script path as written; None when a module is launched
    module: str | None  # `python -m pkg.train`, `deepspeed --module pkg.train`
    cwd: str | None  # directory after a `cd` in the file ("" when none); None when the cd target is unknown
    args: tuple[Word, ...]  # the script's own arguments, in order
    # Launcher options, names with dashes turned into underscores and leading dashes dropped:
    # ("nproc_per_node", Word("8")), ("config_file", Word("acc.yaml")), ("num_gpus", ...), ("num_processes", ...),
    # ("nnodes", ...), ("num_nodes", ...), ("multi_gpu", None) for a flag without a value.
    options: tuple[tuple[str, Word | None], ...] = ()
    env: tuple[tuple[str, Word], ...] = ()  # `VAR=value cmd` prefixes and exported variables the file sets
    # Options of the job launchers in front of the command (`srun`, `mpirun`, `sbatch --wrap`), normalised like
    # `options`, in order, then the file's `#SBATCH` header lines (the allocation every command of the job runs
    # in): ("nodes", Word("2")), ("ntasks_per_node", Word("1")), ("gpus_per_node", ...), ("gres", ...).
    # The first match is the one in force: srun's own options override the header's.
    job_options: tuple[tuple[str, Word | None], ...] = ()
    # Paths the file creates, downloads (`wget`, `curl -o`, `huggingface-cli download`, `git clone`) or tests for
    # (`[ ! -f x ]`) before this command, and the outputs of its earlier commands: normalised from the folder the
    # file runs in; a folder ends in "/" (everything under it).
    made: tuple[str, ...] = ()

    def option(self, *names: str) -> Word | None:
        for key, word in self.options:
            if key in names:
                return word
        return None

    def has_option(self, *names: str) -> bool:
        return any(key in names for key, _ in self.options)

    def job_option(self, *names: str) -> Word | None:
        for key, word in self.job_options:
            if key in names:
                return word
        return None


@dataclass(frozen=True)
class LaunchProblem:
    """A launcher or config that could not be read (reported as a TL0xx diagnostic on that file)."""

    file: Path
    span: Span
    message: str


@dataclass(frozen=True)
class ShellReading:
    invocations: tuple[Invocation, ...]
    problems: tuple[LaunchProblem, ...] = ()


@dataclass(frozen=True)
class Entry:
    """One key of a JSON/YAML file: an args file, a TRL recipe, a DeepSpeed or accelerate config."""

    key: str  # dotted for nested mappings: "zero_optimization.stage"
    value: Any  # as the safe loader constructs it (dicts and lists included for non-leaf keys)
    span: Span  # where the value is written
    key_span: Span  # where the key is written
    depth: int = 0  # 0 for a top-level key (a key may itself contain a dot: depth, not the dots, says where)


@dataclass(frozen=True)
class ConfigReading:
    file: Path
    entries: tuple[Entry, ...]  # every key, nested ones dotted, in file order
    problem: LaunchProblem | None = None
    # Every problem found, `problem` first. A file can be read and still have several (a comment in JSON and a
    # duplicate key); entries are kept whenever the values could still be read.
    problems: tuple[LaunchProblem, ...] = ()

    def get(self, key: str) -> Entry | None:
        for entry in self.entries:
            if entry.key == key:
                return entry
        return None

    def top_level(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.depth == 0)


HYDRA_DEFAULT = "hydra config"  # the label of the run composed as the script names its config (no launch found)
HYDRA = "hydra:"  # the prefix of a binding read from a Hydra / OmegaConf config (launch/hydra.py)


def hydra_binding(variable: str, path: str) -> str:
    """The binding name of key `path` ("model.name_or_path") of the config the script holds in `variable`."""
    return f"{HYDRA}{variable}.{path}"


@dataclass(frozen=True)
class Launch:
    """One way the script is run: its parameters bound to values, each carrying where it is written.

    `bindings` maps a parameter name (a dataclass field or an argparse dest) to its Value; a Value's origin
    Span names its file (a launcher, an args file). The defaults-only run is `Launch.defaults()`."""

    label: str  # "scripts/train_lora.sh:12", "command line", "defaults"
    file: str | None = None  # display path of the file the launch is written in
    span: Span | None = None
    bindings: tuple[tuple[str, Any], ...] = ()  # (name, facts.Value)
    world_size: Any = None  # facts.Value of the processes started, or None when not stated
    sources: tuple[str, ...] = ()  # files the values were read from, in order (launcher, recipe, args file)
    notes: tuple[str, ...] = ()  # what could not be read, for --verbose
    sharding: Any = None  # facts.Value "zero2" | "zero3" from an accelerate config's DeepSpeed / FSDP, or None
    # facts.Value: a tuple of what the accelerate config moves to the CPU ("optimizer", "params"), or None
    offload: Any = None
    # facts.Value True when the accelerate config's FSDP plugin checkpoints activations itself, or None
    fsdp_checkpointing: Any = None
    # facts.Value True when the accelerate config runs FSDP2 with mixed precision (accelerate's fsdp2_prepare_model
    # upcasts parameters to fp32 then: planning.py), or None
    fsdp2_mixed: Any = None
    launcher: str | None = None  # the launcher file's absolute path (TL401 reads its git base version)
    ordinal: int = 0  # which of that launcher's invocations of the script this is
    gpu: Any = None  # launch.gpu.LaunchGpu: the GPU the job requests (`#SBATCH --gres=gpu:l4:1`), or None
    gpu_note: str = ""  # why the GPU it requests is not known (an ambiguous type), for --verbose
    # Hydra / OmegaConf configs that could not be composed fully (broken YAML, a missing group file, a cyclic
    # interpolation): reported as TL005 in the config file (lint.py)
    problems: tuple[LaunchProblem, ...] = ()

    @staticmethod
    def defaults() -> "Launch":
        return Launch("defaults")

    def get(self, name: str):
        for key, value in self.bindings:
            if key == name:
                return value
        return None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.bindings)

    @property
    def assumptions(self) -> tuple[str, ...]:
        """The defaults this launch's values rest on, said, in order (empty when every value is certain)."""
        values = [v for _, v in self.bindings] + [self.world_size]
        return tuple(dict.fromkeys(a for v in values for a in getattr(v, "assumed", ())))

    def without(self, assumptions: tuple[str, ...]) -> "Launch":
        """The same launch with the values resting on any of `assumptions` unknown: what holds whatever the
        caller passes for them."""
        from dataclasses import replace

        def drop(value):
            if not set(getattr(value, "assumed", ())) & set(assumptions):
                return value
            return replace(value, state="unknown", value=None, assumed=())

        return replace(self, bindings=tuple((k, drop(v)) for k, v in self.bindings),
                       world_size=drop(self.world_size))
