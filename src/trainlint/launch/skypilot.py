"""SkyPilot task YAMLs (`sky launch task.yaml`): the GPU `resources.accelerators` requests for the scripts the
task's `run` block starts. Read with the safe loader (launch/configs.py); the `run` block with the shell reader,
never run.

The grammar, from SkyPilot's YAML reference (docs.skypilot.co/en/latest/reference/yaml-spec.html):
`accelerators: H100:8`, a name alone (count 1), a mapping `{A100-80GB: 8}`, or a list / set of candidates any of
which SkyPilot may pick; `resources.any_of` / `resources.ordered` list alternative resources the same way. Only a
request whose every candidate names one memory size (knowledge/gpu_types.py) gives a GPU: SkyPilot's `A100`
stays ambiguous here, as everywhere in trainlint, though SkyPilot's catalog separates `A100` from `A100-80GB`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainlint.diagnostics import Span
from trainlint.launch.discover import task_files
from trainlint.launch.gpu import LaunchGpu

MAX_BYTES = 256 * 1024


def _raw(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(MAX_BYTES + 1)
    except OSError:
        return b""


def task_stamp(root: Path, recursive: bool = True) -> str:
    """Paths, sizes and mtimes of the task files (for the result cache's key)."""
    parts = []
    for path in task_files(root, recursive):
        try:
            st = path.stat()
        except OSError:
            continue
        parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
    return "\n".join(parts)


def task_gpus(path: Path, settings) -> list[tuple[LaunchGpu | None, str]]:
    """(GPU or None, why not) for each SkyPilot task of the repository whose `run` block starts `path`."""
    from trainlint.discovery import _root, display, repo_root

    me = path.resolve()
    root, recursive = _root(me.parent, settings.root.resolve())
    out = []
    for task in task_files(root, recursive):
        raw = _raw(task)
        if len(raw) > MAX_BYTES or path.name.encode() not in raw:
            continue
        reading = _reading(task)
        if reading is None or not _runs(reading, task, me, repo_root(task, settings)):
            continue
        out.append(_requested(reading, display(task)))
    return out


def _reading(task: Path):
    from trainlint.launch.configs import read_config

    reading = read_config(task)
    if reading.problem is not None or not isinstance(getattr(reading.get("run"), "value", None), str):
        return None
    return reading


def _runs(reading, task: Path, me: Path, root: Path) -> bool:
    from trainlint.launch.discover import read_launch_text, target_of

    run = reading.get("run").value
    invocations = read_launch_text(run, task.with_suffix(".sh")).invocations
    return any(target_of(inv, task, root) == me for inv in invocations)


def _requested(reading, where: str) -> tuple[LaunchGpu | None, str]:
    """The GPU of `resources.accelerators` (or of every `any_of` / `ordered` alternative), when all agree."""
    from trainlint.knowledge.gpu_types import gpu_of_type
    from trainlint.knowledge.gpus import GPUS, MIB

    entries = [e for e in reading.entries if e.key == "resources.accelerators"]
    for key in ("resources.any_of", "resources.ordered"):
        alternatives = reading.get(key)
        if alternatives is not None and isinstance(alternatives.value, list):
            # the alternatives' own entries are not split out per item: each item's accelerators, at the list
            entries += [_Item(item.get("accelerators"), alternatives.span) for item in alternatives.value
                        if isinstance(item, dict)]
    if not entries:
        return None, ""
    found: list[LaunchGpu] = []
    for entry in entries:
        for name in _names(entry.value):
            gpu, note = gpu_of_type(name)
            if gpu is None:
                return None, f"{where}:{entry.span.line}: {note or f'`{name}`: GPU type not known to trainlint'}"
            found.append(LaunchGpu(gpu, GPUS[gpu][0] * MIB, f"accelerators: {name}", entry.span.in_file(where)))
    if not found:
        return None, f"{where}: `accelerators` is not a name trainlint can read"
    if any(g.capacity != found[0].capacity for g in found):
        return None, f"{where}: the task lets SkyPilot choose GPUs of different sizes; the GPU is not known"
    return found[0], ""


@dataclass(frozen=True)
class _Item:
    """One `any_of` / `ordered` alternative's accelerators, located at the list (its items carry no spans)."""

    value: Any
    span: Span


def _names(value) -> list[str]:
    """`H100:8` -> ['H100']; {'A100-80GB': 8} -> ['A100-80GB']; ['L4:1', 'A10G'] -> ['L4', 'A10G']."""
    if isinstance(value, str):
        return [v.strip().split(":")[0] for v in value.strip("{}[] ").split(",") if v.strip()]
    if isinstance(value, dict):
        return [str(k) for k in value]
    if isinstance(value, (list, tuple, set)):
        return [n for v in value for n in _names(v)]
    return []
