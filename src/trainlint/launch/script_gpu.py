"""The GPU a script is checked against when no launch is given: what the repository's launchers that run it
request (`--gres=gpu:...`, launch/gpu.py), and its SkyPilot tasks' `accelerators` (launch/skypilot.py), when they
agree on its size. Above both, and above launch discovery, which it asks for the launchers.
"""

from __future__ import annotations

from trainlint.discovery import display
from trainlint.launch.discover import index_for, repo_root, target_of
from trainlint.launch.gpu import LaunchGpu, requested_gpu
from trainlint.launch.skypilot import task_gpus


def script_gpu(path, settings) -> tuple[LaunchGpu | None, str]:
    """For a script checked without a launch (it declares no parameters, so no launch binds them): the GPU the
    launchers that run it request, when they agree on its size; None and why otherwise."""
    if not settings.discover_launches or settings.launch_args is not None:
        return None, ""
    me = path.resolve()
    found: list[LaunchGpu] = []
    why: list[str] = []
    for launcher, indexed in index_for(path, settings):
        here = repo_root(launcher, settings)
        for inv in indexed.invocations:
            if target_of(inv, launcher, here) != me:
                continue
            gpu, note = requested_gpu(inv, display(launcher))
            if gpu is not None:
                found.append(gpu)
            elif note:
                why.append(note)
    for gpu, note in task_gpus(path, settings):  # `sky launch task.yaml`: its `resources.accelerators`
        if gpu is not None:
            found.append(gpu)
        elif note:
            why.append(note)
    if not found:
        return None, "; ".join(dict.fromkeys(why))
    other = next((g for g in found if g.capacity != found[0].capacity), None)
    if other is not None:
        return None, (f"its launchers request different GPUs ({found[0].name} at {found[0].span.file}:"
                      f"{found[0].span.line}, {other.name} at {other.span.file}:{other.span.line}); the GPU is not known")
    return found[0], ""


def gpu_of_context(ctx) -> tuple[LaunchGpu | None, str]:
    """The GPU of the launch a file is checked under; under the defaults, the one its launchers agree on."""
    if ctx.launch.file is not None:
        return ctx.launch.gpu, ctx.launch.gpu_note
    return script_gpu(ctx.path, ctx.settings)
