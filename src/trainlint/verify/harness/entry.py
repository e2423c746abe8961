"""The harness's entry point: parse its command line, prepare the sandbox, the memory tracker and the hooks,
run the script with ``runpy`` and write the result. See the package docstring for the contract."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import traceback

from trainlint.verify.harness import result as results
from trainlint.verify.harness.base import StopAfterSteps, Terminated, log
from trainlint.verify.harness.checks import NO_GRAD_MESSAGE
from trainlint.verify.harness.libraries import install_library_patches
from trainlint.verify.harness.memory_cpu import CpuMemory
from trainlint.verify.harness.memory_cuda import CudaMemory
from trainlint.verify.harness.sandbox import set_environment
from trainlint.verify.harness.steps import Harness, install_torch_hooks


def parse(argv: list[str]):
    if "--" in argv:
        i = argv.index("--")
        own, script_args = argv[:i], argv[i + 1 :]
    else:
        own, script_args = argv, []
    p = argparse.ArgumentParser(prog="python -m trainlint.verify.harness", allow_abbrev=False,
                                description="Run a training script for N optimizer steps and measure it.")
    p.add_argument("--script", required=True)
    p.add_argument("--steps", required=True, type=int)
    p.add_argument("--out", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--online", action="store_true")
    opts = p.parse_args(own)  # exits 2 on a usage error
    opts.out = os.path.abspath(opts.out)
    opts.workdir = os.path.realpath(opts.workdir)
    opts.script = os.path.abspath(opts.script)
    return opts, list(script_args)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    opts, script_args = parse(argv)  # argparse exits 2 on a usage error
    rank = os.environ.get("RANK") or os.environ.get("LOCAL_RANK")
    if rank not in (None, "", "0"):  # under a multi-process launcher only rank 0 writes RESULT.json itself
        opts.out = f"{opts.out}.rank{rank}"
    os.makedirs(opts.workdir, exist_ok=True)
    set_environment(opts)
    started = time.perf_counter()

    def fail(kind: str, message: str, code: int) -> int:
        results.write_json(opts.out, results.failure(kind, message, time.perf_counter() - started))
        log(f"{kind}: {message}")
        return code

    if opts.steps < 1:
        return fail("HarnessUsageError", "--steps must be at least 1", 2)
    if not os.path.isfile(opts.script):
        return fail("HarnessUsageError", f"{opts.script}: no such file", 2)
    try:
        import torch
    except Exception as exc:
        return fail("HarnessError", f"cannot import torch: {exc}", 1)
    use_cuda = opts.device != "cpu" and torch.cuda.is_available()
    if opts.device == "cuda" and not use_cuda:
        return fail("DeviceUnavailable", "--device cuda but torch.cuda.is_available() is False", 2)

    try:
        memory = CudaMemory(torch) if use_cuda else CpuMemory(torch)
        H = Harness(opts, torch, memory)
        install_torch_hooks(H)
        install_library_patches(H)
        sys.addaudithook(H.sandbox.audit)
    except Exception as exc:
        return fail("HarnessError", f"installing the harness failed: {type(exc).__name__}: {exc}", 1)

    def on_sigterm(signum, frame):
        raise Terminated("the harness received SIGTERM")

    try:
        signal.signal(signal.SIGTERM, on_sigterm)
    except (ValueError, OSError):
        pass

    sys.argv = [opts.script, *script_args]
    script_dir = os.path.dirname(opts.script)
    if sys.path:
        sys.path[0] = script_dir
    else:
        sys.path.insert(0, script_dir)

    import runpy

    error = None
    stopped_by = "script_end"
    t0 = time.perf_counter()
    H._started = t0
    try:
        H.script_running = True
        if memory.kind == "cpu":
            with memory.mode:
                runpy.run_path(opts.script, run_name="__main__")
        else:
            runpy.run_path(opts.script, run_name="__main__")
    except StopAfterSteps:
        stopped_by = "steps"
    except SystemExit as exc:
        if exc.code not in (None, 0):
            error = results.error_of(exc)
            error["message"] = f"the script called sys.exit({exc.code!r})"
            stopped_by = "error"
    except BaseException as exc:  # noqa: BLE001 - everything the script raises is reported, not re-raised
        error = results.error_of(exc)
        stopped_by = "error"
        H.script_running = False
        if H.steps_done == 0 and NO_GRAD_MESSAGE in error["message"]:
            H.adapters.no_grad_crash(memory.paused)  # now, while the traceback still keeps the script's model alive
    finally:
        H.script_running = False
    seconds = time.perf_counter() - t0
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except (ValueError, OSError):
        pass
    if stopped_by == "script_end" and H.steps_done >= H.n:
        stopped_by = "steps"

    try:
        results.write_json(opts.out, results.build(H, True, error, stopped_by, seconds))
    except Exception as exc:
        return fail("HarnessError", f"writing the result failed: {type(exc).__name__}: {exc}\n"
                                    f"{traceback.format_exc()[-3000:]}", 1)
    try:
        os.unlink(opts.out + ".partial")
    except OSError:
        pass
    if error:
        log(f"the script raised {error['type']}: {error['message'][:300]}")
    log(f"{H.steps_done} optimizer step(s), stopped by {stopped_by}, {seconds:.1f} s")
    return 0

