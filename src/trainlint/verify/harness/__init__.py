"""The measuring harness of `trainlint verify`: runs ONE training script, in its own subprocess, for N optimizer
steps and writes what it saw to a JSON file.

    python -m trainlint.verify.harness --script PATH --steps N --out RESULT.json --workdir DIR
        [--device auto|cpu|cuda] [--online] [-- SCRIPT_ARGS...]

The script runs with ``runpy.run_path(PATH, run_name="__main__")``, ``sys.argv = [PATH, *SCRIPT_ARGS]``,
``sys.path[0]`` = the script's directory and the caller's cwd. One module per concern:

=================  ================================================================================================
``entry.py``       the command line and ``main``: set up, run the script, write the result (``__main__.py`` runs it)
``sandbox.py``     the environment (hub offline, trackers off), saves outside DIR redirected, pushes blocked,
                   other writes outside DIR listed
``patching.py``    post-import hooks and wrap-once helpers: how a library is patched when it is imported
``libraries.py``   the patches of transformers, peft, huggingface_hub, datasets, accelerate, safetensors
``steps.py``       step control: training forwards, losses, optimizer steps, the memory windows, the stop after N
``memory_cpu.py``  the CPU tracker of live tensor storages (comparable to ``max_memory_allocated``)
``memory_cuda.py`` the CUDA allocator's counters per window, reserved at the peak, NVML, the driver version
``checks.py``      the adapter-gradient check (TL201)
``device.py``      device name, driver, torch and library versions recorded in the result
``result.py``      the result file and its keys
=================  ================================================================================================

Exit code: 0 when the harness worked (also when the script raised: that is in ``error``); 2 on misuse (bad
arguments, a missing script, ``--steps`` < 1, ``--device cuda`` without CUDA); 1 if the harness itself failed.
A usage error found by argparse writes no RESULT.json; the others write one with ``ok: false``. SIGTERM while
the script runs is reported as error type ``Terminated``.

Importing this package imports no torch: ``main`` imports it when a run starts.

Known limits: per-parameter optimizers stepped from grad hooks (optimizer-in-backward, LOMO) count every
parameter's step as an optimizer step; ``torch.compile`` does not work under the CPU tracker; with DataParallel
only the main thread's calls count.
"""

from trainlint.verify.harness.entry import main
from trainlint.verify.harness.sandbox import PushBlockedError

__all__ = ["PushBlockedError", "main"]
