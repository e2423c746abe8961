"""The GPU a launch requests: a Slurm job's GPU type, read from srun / sbatch options and `#SBATCH` lines (and,
for a script checked without a launch, what its launchers and SkyPilot tasks agree on: launch/script_gpu.py).

The option grammar, from the sbatch(1) and srun(1) manual pages (slurm.schedmd.com/sbatch.html, Slurm 23.x+):
- `--gres=<list>`: comma-delimited entries `name[[:type]:count]`, e.g. `--gres=gpu:kepler:2`; only entries named
  `gpu` request GPUs (`mps`, `shard` share one). A type without a count (`gpu:a100`) asks for one.
- `-G, --gpus=[type:]<number>`, `--gpus-per-node=`, `--gpus-per-task=`, `--gpus-per-socket=`: the same
  `[type:]<number>`, several types as a comma-separated list (`--gpus=volta:3,kepler:1`).
- `-C, --constraint=<list>`: node features, combined with `&` (AND), `|` (OR), `[...]` (matching OR) and `*count`.
  A feature is the admin's word; only one that names a GPU model (knowledge/gpu_types.py) says which GPU.
The options in job_options are innermost first (srun's own, then `#SBATCH`); every type that resolves must agree
on the memory size (a feature may narrow `gpu:a100` down to `a100_80gb`), else the GPU is unknown. A type that
does not resolve (ambiguous, unknown) only speaks when none does, and then the GPU is unknown too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainlint.diagnostics import Span
from trainlint.launch.model import Invocation, Word

_COUNTED = ("gpus", "gpus_per_node", "gpus_per_task", "gpus_per_socket")


@dataclass(frozen=True)
class LaunchGpu:
    """A GPU a launch asks for, resolved to the catalog (knowledge/gpus.py)."""

    name: str  # GPUS key: "L4", "A100-80GB"
    capacity: int  # bytes
    option: str  # as written: "--gres=gpu:l4:1"
    span: Span  # where the value is written, with the launch file's display path


def requested_gpu(inv: Invocation, where: str) -> tuple[LaunchGpu | None, str]:
    """The GPU the invocation's job options request, or None and why not ('' when no type is asked for)."""
    from trainlint.knowledge.gpus import GPUS, MIB

    found: list[LaunchGpu] = []
    why: list[str] = []
    for key, word in inv.job_options:
        for name, note in _types(key, word):
            if name is not None:
                span = (word.origin or word.span).in_file(word.origin.file if word.origin and word.origin.file
                                                          else where)
                found.append(LaunchGpu(name, GPUS[name][0] * MIB, f"--{key.replace('_', '-')}={word.text}", span))
            elif note:
                why.append(f"{where}:{word.span.line}: {note}")
    if found:
        other = next((g for g in found if g.capacity != found[0].capacity), None)
        if other is not None:
            return None, (f"{where}: the launch requests both {found[0].name} ({found[0].span.line}) and "
                          f"{other.name} ({other.span.line}); the GPU is not known")
        return found[0], ""
    return None, "; ".join(dict.fromkeys(why))


def _types(key: str, word: Word | None) -> list[tuple[str | None, str]]:
    """(GPUS name or None, why not) for each GPU type the option's value names."""
    from trainlint.knowledge.gpu_types import gpu_of_type

    if word is None or key not in ("gres", "constraint") + _COUNTED:
        return []
    if word.text is None:
        if key == "constraint":
            return []
        return [(None, f"--{key.replace('_', '-')} is not known statically ({word.note or 'set when it runs'})")]
    out: list[tuple[str | None, str]] = []
    if key == "constraint":
        for term in word.text.split("&"):
            alternatives = [re.sub(r"\*\d+$", "", a) for a in term.strip("[]").split("|") if a]
            mapped = [gpu_of_type(a) for a in alternatives]
            named = [m for m in mapped if m[0] is not None or m[1]]
            if not named:
                continue  # a feature that is not a GPU model (`ib`, `skylake`)
            names = {m[0] for m in named}
            if len(named) != len(mapped) or len(names) != 1 or None in names:
                reason = next((m[1] for m in named if m[1]), "")
                out.append((None, reason or f"`--constraint={word.text}` allows several GPUs"))
            else:
                out.append((names.pop(), ""))
        return out
    for entry in word.text.split(","):
        parts = re.sub(r"\(.*\)$", "", entry).split(":")
        if key == "gres":
            if parts[0] != "gpu" or len(parts) < 2 or (len(parts) == 2 and parts[1].isdigit()):
                continue  # `gpu`, `gpu:2`, `mps:100`: no type
            gpu_type, count = parts[1], parts[2:] or ["1"]
        else:
            if len(parts) < 2:
                continue  # `--gpus=4`: no type
            gpu_type, count = parts[0], parts[1:]
        if len(count) != 1 or not count[0].isdigit():
            out.append((None, f"`--{key.replace('_', '-')}={word.text}` is not `[type:]count` as Slurm reads it"))
            continue
        name, note = gpu_of_type(gpu_type)
        out.append((name, note or f"`{gpu_type}`: GPU type not known to trainlint"))
    return out


def describe(gpu: LaunchGpu | None, note: str) -> list[str]:
    """--verbose: where the GPU came from, or why the launch names none trainlint can size."""
    if gpu is not None:
        from trainlint.knowledge.gpus import describe_gpu

        return [f"GPU: {describe_gpu(gpu.name, gpu.capacity)}, requested at {gpu.span.file}:{gpu.span.line} "
                f"({gpu.option}); TL202/TL701 judge against it"]
    if note:
        return [f"GPU: none known (TL202/TL701 stay silent): {note}"]
    return []
