"""The measuring harness of `trainlint verify`: runs ONE training script, in its own subprocess, for N optimizer
steps and writes what it saw to a JSON file.

    python -m trainlint.verify.harness --script PATH --steps N --out RESULT.json --workdir DIR
        [--device auto|cpu|cuda] [--online] [-- SCRIPT_ARGS...]

The script runs with ``runpy.run_path(PATH, run_name="__main__")``, ``sys.argv = [PATH, *SCRIPT_ARGS]``,
``sys.path[0]`` = the script's directory and the caller's cwd. Before it starts the harness:

* sets the environment: HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE / HF_DATASETS_OFFLINE = 1 (unless --online),
  WANDB_MODE=disabled, WANDB_DISABLED=true, COMET_MODE=disabled, MLFLOW_TRACKING_URI=file://DIR/mlruns,
  HF_HUB_DISABLE_TELEMETRY=1, PYTHONDONTWRITEBYTECODE=1 (and ``sys.dont_write_bytecode``),
  CUDA_VISIBLE_DEVICES="" for ``--device cpu``, and TRAINLINT_VERIFY=1 / TRAINLINT_VERIFY_WORKDIR=DIR for
  scripts that want to know;
* patches libraries as they get imported (a post-import hook on ``sys.meta_path``, so a script that never
  imports transformers never pays for importing it):

  - ``transformers.TrainingArguments.__post_init__`` (TRL's configs subclass it): max_steps=N,
    output_dir=DIR/output (logging_dir too where that field exists), save_strategy="no", push_to_hub=False,
    report_to="none", eval_strategy="no", eval_on_start=False, load_best_model_at_end=False; hub_strategy
    and everything else untouched;
  - ``transformers.Trainer``: ``__init__`` adds a callback that sets ``control.should_training_stop``
    once N optimizer steps are done; ``train(resume_from_checkpoint=True)`` resumes from the user's
    original output_dir (read only) or starts fresh when it holds no checkpoint; ``save_model(dir)``
    is redirected (below); ``push_to_hub`` raises;
  - pushes raise :class:`PushBlockedError`: ``PushToHubMixin.push_to_hub`` (models, tokenizers,
    configs, processors, PeftModel), ``Trainer.push_to_hub``, huggingface_hub's ``ModelHubMixin.push_to_hub``,
    ``HfApi`` upload / create / delete / commit methods and the module-level functions bound to them,
    ``datasets.Dataset(Dict).push_to_hub``, and ``save_pretrained(..., push_to_hub=True)``;
  - path-based saves whose target lies outside DIR go to DIR/redirected/<absolute path>: ``torch.save``,
    ``safetensors.torch.save_file/save_model``, ``save_pretrained`` of PreTrainedModel, PeftModel
    (and PeftMixedModel), tokenizers, configs, generation configs, processors, feature extractors, image
    processors and huggingface_hub's ModelHubMixin; ``Trainer.save_model(dir)``;
    ``accelerate.Accelerator.save_state/save_model/save``; ``datasets.Dataset(Dict).save_to_disk``.
    The original paths are listed in ``written_outside_workdir``. Anything else the script opens for
    writing outside DIR (plain ``open(..., "w")``, caches) is NOT redirected; a ``sys.addaudithook``
    lists it in ``unredirected_writes``.

* installs global hooks:

  - optimizer step post hook (``torch.optim.optimizer.register_optimizer_step_post_hook``): counts steps,
    closes the memory window of the step; after the N-th step, outside ``Trainer.train``, it raises the
    internal ``_StopAfterSteps`` (a BaseException) that ends the script as a normal stop. Inside
    ``Trainer.train`` the Trainer stops itself (max_steps and the callback) and the script goes on (so its
    saves after training run, redirected); any optimizer step after the N-th raises ``_StopAfterSteps``
    from the step PRE hook, so no more than N steps ever happen;
  - optimizer step pre hook: at the first step (after the first backward) the LoRA check (TL201);
  - ``torch.nn.Module.__call__`` is wrapped (not global forward hooks: those do not see keyword arguments,
    and HF models are called with ``**batch``): the outermost module call in the main thread with grad
    enabled and outside backward (so no checkpoint recompute) is a training forward; its batch dimension
    (first dim of input_ids / pixel_values / input_features / input_values / inputs_embeds, else of the
    first positional tensor) is added up between optimizer steps (``samples_per_step``). transformers
    PreTrainedModel / PeftModel calls are preferred; other outermost modules count only in a step where
    no HF model was called. The first training forward opens the memory window of step 1;
  - ``torch.autograd.backward`` (which ``Tensor.backward`` calls): records ``float(loss)`` of every scalar
    backward without an explicit gradient; the loss of an optimizer step is the sum over its micro-batches
    (which is what was optimised: scripts and Trainer divide by the accumulation steps themselves), divided
    by the GradScaler's scale when the step goes through ``GradScaler.step``;
  - ``torch.amp.GradScaler.step``: a step the scaler skips (inf/nan grads, so ``optimizer.step()`` never
    runs) still ends a step window and counts towards N, as Trainer counts it; its index is listed in
    ``skipped_steps``.

Memory (one "window" per optimizer step: from the first training forward, or the end of the previous
step, to the end of the step's ``optimizer.step()``):

* CUDA (``torch.cuda.is_available()`` and device != cpu): ``reset_peak_memory_stats`` at every window
  boundary; ``max_memory_allocated`` / ``max_memory_reserved`` per window; the process's GPU memory from
  pynvml at each step end where pynvml can see this process (``nvml_process_bytes``), else null.
* CPU: a ``TorchDispatchMode`` entered before the script starts counts the bytes of every live tensor
  storage (each untyped storage once, released by a weakref callback; ``UntypedStorage.resize_`` is
  followed as MemTracker does). Storages created without a dispatched op (``torch.from_numpy``, tensors
  made in DataLoader worker processes or other threads) are counted when an op first reads them.
  Allocations inside a kernel that never surface as an op output (CUDA workspaces and the like) are not
  seen; neither are allocator rounding and fragmentation: the number is comparable to
  ``torch.cuda.max_memory_allocated``, not to nvidia-smi. Per-category bytes at each window's peak
  (params, buffers, grads, optimizer_state, other) are computed from a copy of the live set taken at the
  peak, classified at the end of the step (storages of the parameters and buffers of the models seen in
  training forwards and of the optimizers' param groups, their ``.grad``, the optimizers' state). The mode
  is incompatible with ``torch.compile`` on CPU.

Result: written atomically to RESULT.json (by a process whose RANK / LOCAL_RANK is not 0, to
RESULT.json.rank<R>); RESULT.json.partial is rewritten after every step (``stopped_by: "running"``) and
removed at the end, so a caller that kills a hung run still has the steps done so far. Keys: see
``_Harness.result``; besides the fixed contract it adds ``skipped_steps``, ``setup_peak`` (before the first
training forward), ``peak_where``, ``step_reserved`` (CUDA), ``step_categories`` (CPU),
``nvml_process_bytes``, ``unredirected_writes``, ``user_output_dirs`` and ``harness_warnings``. Losses
that are not finite are null. SIGTERM while the script runs is reported as error type ``Terminated``.

Exit code: 0 when the harness worked (also when the script raised: that is in ``error``); 2 on misuse (bad
arguments, a missing script, ``--steps`` < 1, ``--device cuda`` without CUDA); 1 if the harness itself failed.
A usage error found by argparse writes no RESULT.json; the others write one with ``ok: false``.

Known limits: per-parameter optimizers stepped from grad hooks (optimizer-in-backward, LOMO) count every
parameter's step as an optimizer step; ``torch.compile`` does not work under the CPU tracker; with
DataParallel only the main thread's calls count.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib.abc
import json
import math
import os
import re
import signal
import sys
import threading
import time
import traceback
import weakref

BATCH_KEYS = ("input_ids", "pixel_values", "input_features", "input_values", "inputs_embeds")
CATEGORIES = ("params", "buffers", "grads", "optimizer_state", "other")
LORA_B = re.compile(r"(^|\.)lora_(embedding_)?B(\.|$)")
NO_GRAD_MESSAGE = "does not require grad"
MAX_LISTED = 200


class _StopAfterSteps(BaseException):
    """Raised by the optimizer hooks once N steps are done; the harness treats it as a normal end."""


class Terminated(BaseException):
    """SIGTERM arrived while the script ran (reported as the error; the result is still written)."""


class PushBlockedError(RuntimeError):
    """Raised instead of any upload to the Hugging Face Hub while a script runs under `trainlint verify`."""


def _log(msg: str) -> None:
    print(f"[trainlint verify harness] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------------------
# command line


def _parse(argv: list[str]):
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


def _set_environment(opts) -> None:
    env = os.environ
    if not opts.online:
        env["HF_HUB_OFFLINE"] = "1"
        env["TRANSFORMERS_OFFLINE"] = "1"
        env["HF_DATASETS_OFFLINE"] = "1"
    env["WANDB_MODE"] = "disabled"
    env["WANDB_DISABLED"] = "true"
    env["COMET_MODE"] = "disabled"
    env["MLFLOW_TRACKING_URI"] = "file://" + os.path.join(opts.workdir, "mlruns")
    env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["TRAINLINT_VERIFY"] = "1"
    env["TRAINLINT_VERIFY_WORKDIR"] = opts.workdir
    if opts.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    sys.dont_write_bytecode = True


# --------------------------------------------------------------------------------------------------------------
# post-import hooks


class _PostImportHooks(importlib.abc.MetaPathFinder):
    """Runs hooks[name](module) right after module `name` has executed (or at once if already imported)."""

    def __init__(self, hooks: dict, on_error):
        self.hooks = hooks
        self.on_error = on_error
        self._busy: set[str] = set()

    def install(self) -> None:
        sys.meta_path.insert(0, self)
        for name in list(self.hooks):
            mod = sys.modules.get(name)
            if mod is not None:
                self._run(name, mod)

    def _run(self, name, module) -> None:
        for hook in self.hooks.pop(name, ()):
            try:
                hook(module)
            except Exception as exc:  # a patch that fails must never break the import
                self.on_error(f"patching {name} failed: {type(exc).__name__}: {exc}")

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.hooks or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._busy.discard(fullname)
        loader = getattr(spec, "loader", None)
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return None
        original = loader.exec_module
        hooks = self

        def exec_module(module):
            original(module)
            hooks._run(fullname, module)

        try:
            loader.exec_module = exec_module  # one loader instance per module: safe to shadow on the instance
        except Exception:
            return None
        return spec


# --------------------------------------------------------------------------------------------------------------
# memory backends


def _make_cpu_tracker(torch):
    """A TorchDispatchMode counting the bytes of live tensor storages (each storage once)."""
    from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass

    Tensor = torch.Tensor

    class LiveBytes(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.live: dict[int, list] = {}  # id(storage) -> [nbytes, weakref]
            self.current = 0
            self.peak = 0
            self.seg_peak = 0
            self.paused = 0
            self._dirty = False
            self._snap: dict | None = None
            self._orig_resize = torch.UntypedStorage.resize_

        # storages ---------------------------------------------------------------------------------------
        def _storages(self, t):
            if is_traceable_wrapper_subclass(t):
                attrs, _ = t.__tensor_flatten__()
                out = []
                for a in attrs:
                    v = getattr(t, a, None)
                    if isinstance(v, Tensor):
                        out.extend(self._storages(v))
                return out
            if t.device.type == "meta" or t.is_sparse:
                return ()
            return (t.untyped_storage(),)

        def see(self, t) -> None:
            try:
                storages = self._storages(t)
            except Exception:
                return
            live = self.live
            for st in storages:
                key = id(st)
                entry = live.get(key)
                nbytes = st.nbytes()
                if entry is not None:
                    if nbytes != entry[0]:
                        self._resized(entry, nbytes)
                    continue
                try:
                    ref = weakref.ref(st, functools.partial(self._freed, key))
                except TypeError:
                    continue
                live[key] = [nbytes, ref]
                self._add(nbytes)

        def _add(self, nbytes: int) -> None:
            self.current += nbytes
            if self.current > self.seg_peak:
                self.seg_peak = self.current
                self._dirty = True
                if self.current > self.peak:
                    self.peak = self.current

        def _resized(self, entry, nbytes: int) -> None:
            delta = nbytes - entry[0]
            if delta < 0 and self._dirty:
                self._snapshot()
            entry[0] = nbytes
            if delta > 0:
                self._add(delta)
            else:
                self.current += delta

        def _freed(self, key, _ref) -> None:
            entry = self.live.get(key)
            if entry is None or entry[1] is not _ref:
                return
            if self._dirty:
                self._snapshot()
            del self.live[key]
            self.current -= entry[0]

        def _snapshot(self) -> None:
            self._snap = dict(self.live)  # key -> entry, as at the peak of the window
            self._dirty = False

        # windows ----------------------------------------------------------------------------------------
        def new_segment(self) -> int:
            """End the current segment (returning its peak) and start a new one at the current level."""
            peak = self.seg_peak
            self.seg_peak = self.current
            self._dirty = True
            self._snap = None
            return peak

        def end_segment(self, classify) -> tuple[int, dict | None]:
            if self._dirty or self._snap is None:
                self._snapshot()
            snap = self._snap
            peak = self.seg_peak
            cats = None
            if classify is not None and snap is not None:
                self.paused += 1
                try:
                    cats = classify(snap, self.live)
                except Exception:
                    cats = None
                finally:
                    self.paused -= 1
            self.new_segment()
            return peak, cats

        # dispatch ---------------------------------------------------------------------------------------
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if self.paused:
                return out
            see = self.see
            for a in args:
                if isinstance(a, Tensor):
                    see(a)
                elif isinstance(a, (list, tuple)):
                    for x in a:
                        if isinstance(x, Tensor):
                            see(x)
            if kwargs:
                for a in kwargs.values():
                    if isinstance(a, Tensor):
                        see(a)
            if isinstance(out, Tensor):
                see(out)
            elif isinstance(out, (list, tuple)):
                for x in out:
                    if isinstance(x, Tensor):
                        see(x)
            return out

        def __enter__(self):
            tracker = self
            orig = self._orig_resize

            def resize_(st, size):
                result = orig(st, size)
                entry = tracker.live.get(id(st))
                if entry is not None and st.nbytes() != entry[0]:
                    tracker._resized(entry, st.nbytes())
                return result

            torch.UntypedStorage.resize_ = resize_
            return super().__enter__()

        def __exit__(self, *exc):
            torch.UntypedStorage.resize_ = self._orig_resize
            return super().__exit__(*exc)

    return LiveBytes()


class _CpuMemory:
    kind = "cpu"

    def __init__(self, torch):
        self.mode = _make_cpu_tracker(torch)

    def new_segment(self) -> int:
        return self.mode.new_segment()

    def end_window(self, classify):
        peak, cats = self.mode.end_segment(classify)
        return peak, None, cats

    def tail(self) -> tuple[int, None]:
        return self.mode.seg_peak, None

    def overall(self) -> tuple[int, None]:
        return self.mode.peak, None

    def see(self, t) -> None:
        self.mode.see(t)

    def paused(self):
        mode = self.mode

        class _P:
            def __enter__(self):
                mode.paused += 1

            def __exit__(self, *a):
                mode.paused -= 1

        return _P()


class _CudaMemory:
    kind = "cuda"

    def __init__(self, torch):
        self.torch = torch
        self.cuda = torch.cuda
        self.peak = 0
        self.peak_reserved = 0
        self.nvml = None
        try:  # pynvml (nvidia-ml-py) is optional
            import pynvml

            pynvml.nvmlInit()
            index = 0
            if hasattr(torch.cuda, "_get_nvml_device_index"):
                index = torch.cuda._get_nvml_device_index(0)
            self.nvml = (pynvml, pynvml.nvmlDeviceGetHandleByIndex(index))
        except Exception:
            self.nvml = None

    def _fold(self) -> tuple[int, int]:
        a = int(self.cuda.max_memory_allocated())
        r = int(self.cuda.max_memory_reserved())
        self.peak = max(self.peak, a)
        self.peak_reserved = max(self.peak_reserved, r)
        return a, r

    def new_segment(self) -> int:
        a, _ = self._fold()
        self.cuda.reset_peak_memory_stats()
        return a

    def end_window(self, classify):
        a, r = self._fold()
        self.cuda.reset_peak_memory_stats()
        return a, r, None

    def tail(self):
        return self._fold()

    def overall(self):
        self._fold()
        return self.peak, self.peak_reserved

    def process_bytes(self):
        if self.nvml is None:
            return None
        pynvml, handle = self.nvml
        try:
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if proc.pid == os.getpid():
                    return int(proc.usedGpuMemory) if proc.usedGpuMemory is not None else None
        except Exception:
            return None
        return None

    def paused(self):
        import contextlib

        return contextlib.nullcontext()


# --------------------------------------------------------------------------------------------------------------
# the harness


class _Harness:
    def __init__(self, opts, torch, memory):
        self.torch = torch
        self.opts = opts
        self.n = opts.steps
        self.workdir = opts.workdir
        self.output_dir = os.path.join(opts.workdir, "output")
        self.memory = memory
        self.main_ident = threading.main_thread().ident
        self.steps_done = 0
        self.window_open = False
        self.setup_peak: int | None = None
        self.step_peaks: list[int] = []
        self.step_reserved: list[int | None] = []
        self.step_categories: list = []
        self.nvml_bytes: list = []
        self.samples_per_step: list[int] = []
        self.losses: list = []
        self._samples = [0, 0, 0]  # HF / PEFT models, other model classes, bare torch.nn containers
        self._losses: list[float] = []
        self.depth = 0
        self.in_trainer = 0
        self.post_hook_calls = 0
        self.skipped_steps: list[int] = []
        self.lora_checked: int = 0
        self.lora_with_grad: int = 0
        self.adapter_grad_ok: bool | None = None
        self.models = weakref.WeakSet()
        self.optimizers = weakref.WeakSet()
        self.redirected: list[str] = []
        self.unredirected: list[str] = []
        self.warnings: list[str] = []
        self.user_output_dirs: list[str] = []
        self.script_running = False
        self._in_audit = False
        self._own_files = {opts.out, opts.out + ".partial"}
        self._hf_classes: tuple = ()
        self._started = time.perf_counter()

    # -- bookkeeping ---------------------------------------------------------------------------------------
    def warn(self, msg: str) -> None:
        if len(self.warnings) < MAX_LISTED:
            self.warnings.append(msg)
        _log(msg)

    def inside_workdir(self, path: str) -> bool:
        try:
            real = os.path.realpath(path)
            return os.path.commonpath([real, self.workdir]) == self.workdir
        except (ValueError, OSError):
            return False

    def redirect(self, target):
        """Path-like `target` outside the workdir -> DIR/redirected/<absolute path> (recorded); else as is."""
        if not isinstance(target, (str, bytes, os.PathLike)):
            return target
        path = os.fspath(target)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        absolute = os.path.abspath(path)
        if self.inside_workdir(absolute):
            return target
        rel = absolute.lstrip(os.sep).replace(":", "")
        new = os.path.join(self.workdir, "redirected", rel)
        os.makedirs(os.path.dirname(new), exist_ok=True)
        if absolute not in self.redirected and len(self.redirected) < MAX_LISTED:
            self.redirected.append(absolute)
            _log(f"write to {absolute} redirected to {new}")
        return new

    # -- windows -------------------------------------------------------------------------------------------
    def open_window(self) -> None:
        if self.window_open or self.steps_done >= self.n:
            return
        prev = self.memory.new_segment()
        if self.steps_done == 0 and self.setup_peak is None:
            self.setup_peak = prev
        self.window_open = True

    def close_window(self, optimizer) -> None:
        peak, reserved, cats = self.memory.end_window(self._classify if self.memory.kind == "cpu" else None)
        self.step_peaks.append(int(peak))
        self.step_reserved.append(None if reserved is None else int(reserved))
        self.step_categories.append(cats)
        if self.memory.kind == "cuda":
            self.nvml_bytes.append(self.memory.process_bytes())
        self.samples_per_step.append(next((s for s in self._samples if s), 0))
        self.losses.append(_finite(sum(self._losses)) if self._losses else None)
        self._samples = [0, 0, 0]
        self._losses = []
        self.steps_done += 1
        self.window_open = self.steps_done < self.n  # the next step's window starts right here

    def _classify(self, snap: dict, live: dict) -> dict:
        torch = self.torch
        roles: dict[int, str] = {}

        def mark(t, role):
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                try:
                    roles.setdefault(id(t.untyped_storage()), role)
                except Exception:
                    pass

        params = []
        for opt in list(self.optimizers):
            for group in opt.param_groups:
                params.extend(group["params"])
        for model in list(self.models):
            params.extend(model.parameters())
        for p in params:
            if p.grad is not None:
                mark(p.grad, "grads")
        for opt in list(self.optimizers):
            for state in opt.state.values():
                if isinstance(state, dict):
                    for v in state.values():
                        mark(v, "optimizer_state")
        for p in params:
            mark(p, "params")
        for model in list(self.models):
            for b in model.buffers():
                mark(b, "buffers")
        totals = dict.fromkeys(CATEGORIES, 0)
        for key, entry in snap.items():
            role = roles.get(key, "other") if live.get(key) is entry else "other"
            totals[role] += entry[0]
        return totals

    # -- hooks ---------------------------------------------------------------------------------------------
    def optimizer_pre_hook(self, optimizer, args, kwargs):
        if threading.get_ident() != self.main_ident:
            return None
        if self.steps_done >= self.n:
            raise _StopAfterSteps()
        self.optimizers.add(optimizer)
        self.open_window()
        if self.steps_done == 0:
            with self.memory.paused():
                try:
                    self.lora_check(optimizer)
                except Exception as exc:
                    self.warn(f"LoRA check failed: {type(exc).__name__}: {exc}")
        return None

    def optimizer_post_hook(self, optimizer, args, kwargs):
        if threading.get_ident() != self.main_ident:
            return
        self.post_hook_calls += 1
        self.end_step(optimizer)

    def end_step(self, optimizer, skipped: bool = False) -> None:
        if not self.window_open:
            return
        with self.memory.paused():
            self.close_window(optimizer)
        if skipped:
            self.skipped_steps.append(self.steps_done)
        self.write_partial()
        if self.steps_done >= self.n and self.in_trainer == 0:
            raise _StopAfterSteps()

    def scaler_step(self, orig, scaler, optimizer, args, kwargs):
        """GradScaler.step skips optimizer.step() when the grads hold inf/nan; that is still a step."""
        if threading.get_ident() != self.main_ident:
            return orig(scaler, optimizer, *args, **kwargs)
        if self._losses:  # the losses of this step were recorded scaled: report them unscaled
            try:
                with self.memory.paused():
                    scale = float(scaler.get_scale()) if scaler.is_enabled() else 1.0
                if scale and scale != 1.0:
                    self._losses = [x / scale for x in self._losses]
            except Exception:
                pass
        before = self.post_hook_calls
        out = orig(scaler, optimizer, *args, **kwargs)
        if self.post_hook_calls == before and self.script_running:
            if self.steps_done >= self.n:
                raise _StopAfterSteps()
            self.open_window()
            self.end_step(optimizer, skipped=True)
        return out

    def module_call(self, orig_call, module, args, kwargs):
        if self.depth:
            if threading.get_ident() != self.main_ident:
                return orig_call(module, *args, **kwargs)
            self.depth += 1
            try:
                return orig_call(module, *args, **kwargs)
            finally:
                self.depth -= 1
        if threading.get_ident() != self.main_ident:
            return orig_call(module, *args, **kwargs)
        torch = self.torch
        if (self.script_running and self.steps_done < self.n and torch.is_grad_enabled()
                and torch._C._current_graph_task_id() == -1):
            try:
                self._count_forward(module, args, kwargs)
            except Exception as exc:
                self.warn(f"counting a forward failed: {type(exc).__name__}: {exc}")
        self.depth = 1
        try:
            return orig_call(module, *args, **kwargs)
        finally:
            self.depth = 0

    def _hf_model_classes(self) -> tuple:
        if len(self._hf_classes) == 2:
            return self._hf_classes
        classes = []
        mu = sys.modules.get("transformers.modeling_utils")
        if mu is not None and hasattr(mu, "PreTrainedModel"):
            classes.append(mu.PreTrainedModel)
        pm = sys.modules.get("peft.peft_model")
        if pm is not None and hasattr(pm, "PeftModel"):
            classes.append(pm.PeftModel)
        self._hf_classes = tuple(classes)
        return self._hf_classes

    def _count_forward(self, module, args, kwargs) -> None:
        """An outermost training forward: open the step window, add its batch dimension."""
        torch = self.torch
        hf = self._hf_model_classes()
        if hf and isinstance(module, hf):
            bucket = 0
        elif not type(module).__module__.startswith("torch.nn."):
            bucket = 1  # a model class of the script or of another library
        elif isinstance(module, torch.nn.modules.loss._Loss):
            return  # a loss module called on the logits is not the model
        else:
            bucket = 2  # e.g. a bare nn.Sequential model
        self.open_window()
        self._samples[bucket] += _batch_size(torch, args, kwargs)
        if module not in self.models:
            self.models.add(module)
            self.see_module(module)

    def see_module(self, module) -> None:
        """Count the parameters and buffers of `module` now if the CPU tracker has not seen them yet."""
        see = getattr(self.memory, "see", None)
        if see is None or not isinstance(module, self.torch.nn.Module):
            return
        try:
            for t in module.parameters():
                see(t)
            for t in module.buffers():
                see(t)
        except Exception as exc:
            self.warn(f"counting the weights of {type(module).__name__} failed: {exc}")

    def backward_called(self, tensors, grad_tensors) -> None:
        if (not self.script_running or self.steps_done >= self.n or grad_tensors is not None
                or threading.get_ident() != self.main_ident):
            return
        torch = self.torch
        t = tensors
        if isinstance(t, (list, tuple)) and len(t) == 1:
            t = t[0]
        if not isinstance(t, torch.Tensor) or t.numel() != 1:
            return
        self.open_window()
        with self.memory.paused():
            try:
                self._losses.append(float(t.detach().float().cpu().reshape(())))
            except Exception:
                pass

    # -- TL201 ---------------------------------------------------------------------------------------------
    def _lora_b_params(self) -> list:
        found: dict[int, object] = {}
        for model in list(self.models):
            for name, p in model.named_parameters():
                if p.requires_grad and LORA_B.search(name):
                    found.setdefault(id(p), p)
        if found:
            return list(found.values())
        layer_mod = sys.modules.get("peft.tuners.lora.layer")
        if layer_mod is None or not hasattr(layer_mod, "LoraLayer"):
            return []
        gc.collect()
        for obj in gc.get_objects():
            if isinstance(obj, layer_mod.LoraLayer):
                for holder in (getattr(obj, "lora_B", None), getattr(obj, "lora_embedding_B", None)):
                    if holder is None:
                        continue
                    for sub in holder.values():
                        p = getattr(sub, "weight", sub)
                        if isinstance(p, self.torch.Tensor) and p.requires_grad:
                            found.setdefault(id(p), p)
        return list(found.values())

    def lora_check(self, optimizer) -> None:
        params = self._lora_b_params()
        if not params:
            return
        in_opt = {id(p) for g in optimizer.param_groups for p in g["params"]}
        stepped = [p for p in params if id(p) in in_opt]
        params = stepped or params
        with_grad = 0
        for p in params:
            g = p.grad
            if g is not None and bool(g.detach().ne(0).any()):
                with_grad += 1
        self.lora_checked = len(params)
        self.lora_with_grad = with_grad
        self.adapter_grad_ok = with_grad == len(params)

    def no_grad_crash(self) -> None:
        """The script died with "element 0 of tensors does not require grad" before its first step."""
        try:
            with self.memory.paused():
                params = self._lora_b_params()
        except Exception:
            params = []
        if params:
            self.adapter_grad_ok = False
            self.lora_checked = len(params)
            self.lora_with_grad = 0
        elif sys.modules.get("peft") is not None:
            self.adapter_grad_ok = False

    # -- writes outside the workdir ------------------------------------------------------------------------
    def audit(self, event, args) -> None:
        if event not in ("open", "os.mkdir") or not self.script_running or self._in_audit:
            return
        self._in_audit = True
        try:
            path = args[0]
            if isinstance(path, int) or path is None:
                return
            if event == "os.mkdir" and os.path.exists(path):
                return
            if event == "open":
                mode, flags = args[1], args[2]
                if mode is not None:
                    writing = any(c in mode for c in "wax+")
                else:
                    writing = bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC))
                if not writing:
                    return
            path = os.path.abspath(os.fsdecode(path))
            if path in self._own_files or path.startswith(("/dev/", "/proc/", "/sys/")):
                return
            if self.inside_workdir(path) or path in self.unredirected or len(self.unredirected) >= MAX_LISTED:
                return
            self.unredirected.append(path)
        except Exception:
            pass
        finally:
            self._in_audit = False

    # -- output ----------------------------------------------------------------------------------------------
    def result(self, ok: bool, error: dict | None, stopped_by: str, seconds: float) -> dict:
        peak, reserved = self.memory.overall()
        last_segment = self.memory.tail()[0]  # since the last window boundary
        if self.window_open:
            last_label = f"step {self.steps_done + 1} (not completed)"
        else:
            last_label = "after the steps" if self.steps_done else "whole script (no optimizer step)"
        peaks = self.step_peaks
        where = None
        candidates = [("setup", self.setup_peak)] + [(f"step {i + 1}", p) for i, p in enumerate(peaks)]
        candidates.append((last_label, last_segment))
        best = max((c for c in candidates if c[1] is not None), key=lambda c: c[1], default=None)
        if best is not None:
            where = best[0]
        cats = None
        if peaks and self.step_categories and any(c is not None for c in self.step_categories):
            i = max(range(len(peaks)), key=lambda k: peaks[k])
            cats = self.step_categories[i]
        if self.memory.kind == "cuda":
            index = self.torch.cuda.current_device()
            device = f"cuda:{index} {self.torch.cuda.get_device_name(index)}"
        else:
            device = "cpu"
        nvml = None
        if self.memory.kind == "cuda" and any(b is not None for b in self.nvml_bytes):
            nvml = self.nvml_bytes
        return {
            "ok": ok,
            "device": device,
            "steps": self.steps_done,
            "peak_allocated": int(peak),
            "peak_reserved": None if reserved is None else int(reserved),
            "step_peaks": peaks,
            "step1_peak": peaks[0] if peaks else None,
            "steady_peak": max(peaks[1:]) if len(peaks) > 1 else None,
            "categories": cats,
            "losses": self.losses,
            "adapter_grad_ok": self.adapter_grad_ok,
            "lora_params_checked": self.lora_checked,
            "lora_params_with_grad": self.lora_with_grad,
            "samples_per_step": self.samples_per_step,
            "error": error,
            "stopped_by": stopped_by,
            "written_outside_workdir": self.redirected,
            "seconds": round(seconds, 3),
            # extras (not part of the fixed contract)
            "skipped_steps": self.skipped_steps,
            "setup_peak": self.setup_peak,
            "peak_where": where,
            "step_reserved": self.step_reserved if self.memory.kind == "cuda" else None,
            "step_categories": self.step_categories if self.memory.kind == "cpu" else None,
            "nvml_process_bytes": nvml,
            "unredirected_writes": self.unredirected,
            "user_output_dirs": self.user_output_dirs,
            "harness_warnings": self.warnings,
        }

    def write_partial(self) -> None:
        self._in_audit = True  # the harness's own files are not the script's writes
        try:
            data = self.result(True, None, "running", time.perf_counter() - self._started)
            _write_json(self.opts.out + ".partial", data)
        except Exception:
            pass
        finally:
            self._in_audit = False


def _finite(x: float):
    return x if math.isfinite(x) else None


def _batch_size(torch, args, kwargs) -> int:
    for key in BATCH_KEYS:
        v = kwargs.get(key)
        if isinstance(v, torch.Tensor) and v.dim() >= 1:
            return int(v.shape[0])
    for v in args:
        if isinstance(v, torch.Tensor):
            return int(v.shape[0]) if v.dim() >= 1 else 0
        if isinstance(v, dict):  # model(batch) with a BatchEncoding / dict
            for key in BATCH_KEYS:
                t = v.get(key)
                if isinstance(t, torch.Tensor) and t.dim() >= 1:
                    return int(t.shape[0])
            return 0
    return 0


def _write_json(path: str, data: dict) -> None:
    from trainlint.atomic import write_bytes_atomic

    write_bytes_atomic(path, json.dumps(data, indent=1, default=str).encode("utf-8"))


def _error(exc: BaseException) -> dict:
    lines = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).splitlines()
    return {"type": type(exc).__name__, "message": str(exc)[:2000], "traceback_tail": "\n".join(lines[-30:])}


# --------------------------------------------------------------------------------------------------------------
# patches


def _wraps_once(fn, wrapper):
    functools.update_wrapper(wrapper, fn)
    wrapper.__trainlint_wrapped__ = True
    return wrapper


def _patch_method(cls, name: str, make) -> None:
    fn = cls.__dict__.get(name)
    if fn is None or getattr(fn, "__trainlint_wrapped__", False):
        return
    if isinstance(fn, (staticmethod, classmethod)):
        return
    setattr(cls, name, _wraps_once(fn, make(fn)))


def _patch_classmethod(cls, name: str, make) -> None:
    cm = cls.__dict__.get(name)
    if not isinstance(cm, classmethod) or getattr(cm.__func__, "__trainlint_wrapped__", False):
        return
    setattr(cls, name, classmethod(_wraps_once(cm.__func__, make(cm.__func__))))


def _redirect_arg(H: _Harness, args, kwargs, pos: int, name: str):
    if len(args) > pos:
        args = list(args)
        args[pos] = H.redirect(args[pos])
    elif name in kwargs:
        kwargs[name] = H.redirect(kwargs[name])
    return args, kwargs


def _redirecting_method(H, pos: int, name: str, block_push: bool = False):
    def make(fn):
        def wrapper(self, *args, **kwargs):
            if block_push and kwargs.get("push_to_hub"):
                raise PushBlockedError("trainlint verify: save_pretrained(push_to_hub=True) is disabled; "
                                       "nothing is pushed while verifying")
            args, kwargs = _redirect_arg(H, args, kwargs, pos, name)
            return fn(self, *args, **kwargs)

        return wrapper

    return make


def _redirecting_function(H, fn, pos: int, name: str):
    if getattr(fn, "__trainlint_wrapped__", False):
        return fn

    def wrapper(*args, **kwargs):
        args, kwargs = _redirect_arg(H, args, kwargs, pos, name)
        return fn(*args, **kwargs)

    return _wraps_once(fn, wrapper)


def _blocked(what: str):
    def make(fn):
        def wrapper(*args, **kwargs):
            raise PushBlockedError(f"trainlint verify: {what} is disabled; nothing is pushed or uploaded while "
                                   "verifying")

        return wrapper

    return make


def _install_library_patches(H: _Harness) -> _PostImportHooks:
    hooks: dict[str, list] = {}

    def on(name):
        def register(fn):
            hooks.setdefault(name, []).append(fn)
            return fn

        return register

    @on("transformers.training_args")
    def _training_args(mod):
        cls = mod.TrainingArguments

        def make(fn):
            def __post_init__(self, *args, **kwargs):
                user = getattr(self, "output_dir", None)
                if user is not None and os.fspath(user) != H.output_dir:
                    if os.fspath(user) not in H.user_output_dirs:
                        H.user_output_dirs.append(os.fspath(user))
                    self._trainlint_user_output_dir = os.fspath(user)
                self.output_dir = H.output_dir
                self.max_steps = H.n
                self.save_strategy = "no"
                self.push_to_hub = False
                self.report_to = "none"
                self.load_best_model_at_end = False
                for field, value in (("eval_strategy", "no"), ("evaluation_strategy", "no"),
                                     ("eval_on_start", False), ("logging_dir",
                                                                os.path.join(H.output_dir, "runs"))):
                    if hasattr(self, field):
                        setattr(self, field, value)
                fn(self, *args, **kwargs)
                self.output_dir = H.output_dir
                self.max_steps = H.n
                self.push_to_hub = False

            return __post_init__

        _patch_method(cls, "__post_init__", make)

    @on("transformers.trainer")
    def _trainer(mod):
        cls = mod.Trainer
        from transformers.trainer_callback import TrainerCallback

        class _StopCallback(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if H.steps_done >= H.n or state.global_step >= H.n:
                    control.should_training_stop = True
                return control

        def make_init(fn):
            def __init__(self, *args, **kwargs):
                fn(self, *args, **kwargs)
                try:
                    self.add_callback(_StopCallback())
                except Exception as exc:
                    H.warn(f"could not add the stop callback: {exc}")

            return __init__

        def make_train(fn):
            def train(self, *args, **kwargs):
                resume = args[0] if args else kwargs.get("resume_from_checkpoint")
                if resume is True:
                    user = getattr(self.args, "_trainlint_user_output_dir", None)
                    last = None
                    if user and os.path.isdir(user):
                        from transformers.trainer_utils import get_last_checkpoint

                        last = get_last_checkpoint(user)
                    if args:
                        args = (last, *args[1:])
                    else:
                        kwargs["resume_from_checkpoint"] = last
                    H.warn(f"resume_from_checkpoint=True -> {last!r} (read only)")
                H.in_trainer += 1
                try:
                    return fn(self, *args, **kwargs)
                finally:
                    H.in_trainer -= 1

            return train

        _patch_method(cls, "__init__", make_init)
        _patch_method(cls, "train", make_train)
        _patch_method(cls, "save_model", _redirecting_method(H, 0, "output_dir"))
        _patch_method(cls, "push_to_hub", _blocked("Trainer.push_to_hub"))

    @on("transformers.utils.hub")
    def _hub_mixin(mod):
        _patch_method(mod.PushToHubMixin, "push_to_hub", _blocked("push_to_hub"))

    @on("transformers.modeling_utils")
    def _from_pretrained(mod):
        def make(fn):
            def from_pretrained(cls, *args, **kwargs):
                model = fn(cls, *args, **kwargs)
                H.see_module(model)  # weights loaded from files are made by no dispatched op: count them now
                return model

            return from_pretrained

        _patch_classmethod(mod.PreTrainedModel, "from_pretrained", make)

    for module_name, class_names in (
        ("transformers.modeling_utils", ("PreTrainedModel",)),
        ("transformers.tokenization_utils_base", ("PreTrainedTokenizerBase",)),
        ("transformers.configuration_utils", ("PreTrainedConfig", "PretrainedConfig")),
        ("transformers.generation.configuration_utils", ("GenerationConfig",)),
        ("transformers.processing_utils", ("ProcessorMixin",)),
        ("transformers.feature_extraction_utils", ("FeatureExtractionMixin",)),
        ("transformers.image_processing_base", ("ImageProcessingMixin",)),
        ("peft.peft_model", ("PeftModel",)),
        ("peft.mixed_model", ("PeftMixedModel",)),
        ("huggingface_hub.hub_mixin", ("ModelHubMixin",)),
    ):
        def _save_pretrained(mod, class_names=class_names):
            for cname in class_names:
                cls = getattr(mod, cname, None)
                if cls is not None:
                    _patch_method(cls, "save_pretrained", _redirecting_method(H, 0, "save_directory", True))
                    if cname == "ModelHubMixin":
                        _patch_method(cls, "push_to_hub", _blocked("push_to_hub"))

        on(module_name)(_save_pretrained)

    @on("huggingface_hub.hf_api")
    def _hf_api(mod):
        cls = mod.HfApi
        names = [n for n in vars(cls) if n.startswith(("upload_", "create_", "delete_"))
                 or n in ("move_repo", "duplicate_repo", "update_repo_settings", "super_squash_history",
                          "merge_pull_request", "preupload_lfs_files", "add_space_secret", "add_space_variable")]
        for n in names:
            _patch_method(cls, n, _blocked(f"huggingface_hub {n}"))
        top = sys.modules.get("huggingface_hub")
        for n in names:
            if callable(getattr(mod, n, None)):
                blocked = cls.__dict__[n]
                setattr(mod, n, blocked)
                if top is not None:
                    try:
                        setattr(top, n, blocked)
                    except Exception:
                        pass

    @on("safetensors.torch")
    def _safetensors(mod):
        if hasattr(mod, "save_file"):
            mod.save_file = _redirecting_function(H, mod.save_file, 1, "filename")
        if hasattr(mod, "save_model"):
            mod.save_model = _redirecting_function(H, mod.save_model, 1, "filename")

    @on("accelerate.accelerator")
    def _accelerate(mod):
        cls = mod.Accelerator
        _patch_method(cls, "save_state", _redirecting_method(H, 0, "output_dir"))
        _patch_method(cls, "save_model", _redirecting_method(H, 1, "save_directory"))
        _patch_method(cls, "save", _redirecting_method(H, 1, "f"))

    @on("datasets.arrow_dataset")
    def _dataset(mod):
        _patch_method(mod.Dataset, "save_to_disk", _redirecting_method(H, 0, "dataset_path"))
        _patch_method(mod.Dataset, "push_to_hub", _blocked("Dataset.push_to_hub"))

    @on("datasets.dataset_dict")
    def _dataset_dict(mod):
        for cname in ("DatasetDict", "IterableDatasetDict"):
            cls = getattr(mod, cname, None)
            if cls is not None:
                _patch_method(cls, "save_to_disk", _redirecting_method(H, 0, "dataset_dict_path"))
                _patch_method(cls, "push_to_hub", _blocked(f"{cname}.push_to_hub"))

    finder = _PostImportHooks(hooks, H.warn)
    finder.install()
    return finder


def _install_torch_hooks(H: _Harness) -> None:
    torch = H.torch
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    register_optimizer_step_pre_hook(H.optimizer_pre_hook)
    register_optimizer_step_post_hook(H.optimizer_post_hook)

    module_cls = torch.nn.Module
    orig_call = module_cls.__call__
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)

    def __call__(self, *args, **kwargs):
        if is_compiling():
            return orig_call(self, *args, **kwargs)
        return H.module_call(orig_call, self, args, kwargs)

    functools.update_wrapper(__call__, orig_call)
    module_cls.__call__ = __call__

    orig_backward = torch.autograd.backward

    def backward(tensors, grad_tensors=None, *args, **kwargs):
        try:
            H.backward_called(tensors, grad_tensors)
        except Exception:
            pass
        return orig_backward(tensors, grad_tensors, *args, **kwargs)

    functools.update_wrapper(backward, orig_backward)
    torch.autograd.backward = backward

    try:
        from torch.amp.grad_scaler import GradScaler

        orig_step = GradScaler.step
        if not getattr(orig_step, "__trainlint_wrapped__", False):
            def step(self, optimizer, *args, **kwargs):
                return H.scaler_step(orig_step, self, optimizer, args, kwargs)

            GradScaler.step = _wraps_once(orig_step, step)
    except Exception as exc:
        H.warn(f"GradScaler.step not patched: {exc}")

    for owner in (torch, torch.serialization):
        owner.save = _redirecting_function(H, owner.save, 1, "f")


# --------------------------------------------------------------------------------------------------------------
# main


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    opts, script_args = _parse(argv)  # argparse exits 2 on a usage error
    rank = os.environ.get("RANK") or os.environ.get("LOCAL_RANK")
    if rank not in (None, "", "0"):  # under a multi-process launcher only rank 0 writes RESULT.json itself
        opts.out = f"{opts.out}.rank{rank}"
    os.makedirs(opts.workdir, exist_ok=True)
    _set_environment(opts)
    started = time.perf_counter()

    def fail(kind: str, message: str, code: int) -> int:
        _write_json(opts.out, {"ok": False, "device": None, "steps": 0, "peak_allocated": None,
                               "peak_reserved": None, "step_peaks": [], "step1_peak": None, "steady_peak": None,
                               "categories": None, "losses": [], "adapter_grad_ok": None, "lora_params_checked": 0,
                               "lora_params_with_grad": 0, "samples_per_step": [],
                               "error": {"type": kind, "message": message, "traceback_tail": ""},
                               "stopped_by": "error", "written_outside_workdir": [],
                               "seconds": round(time.perf_counter() - started, 3)})
        _log(f"{kind}: {message}")
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
        memory = _CudaMemory(torch) if use_cuda else _CpuMemory(torch)
        H = _Harness(opts, torch, memory)
        _install_torch_hooks(H)
        _install_library_patches(H)
        sys.addaudithook(H.audit)
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
    except _StopAfterSteps:
        stopped_by = "steps"
    except SystemExit as exc:
        if exc.code not in (None, 0):
            error = _error(exc)
            error["message"] = f"the script called sys.exit({exc.code!r})"
            stopped_by = "error"
    except BaseException as exc:  # noqa: BLE001 - everything the script raises is reported, not re-raised
        error = _error(exc)
        stopped_by = "error"
        H.script_running = False
        if H.steps_done == 0 and NO_GRAD_MESSAGE in error["message"]:
            H.no_grad_crash()  # now, while the traceback still keeps the script's model alive
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
        result = H.result(True, error, stopped_by, seconds)
        _write_json(opts.out, result)
    except Exception as exc:
        return fail("HarnessError", f"writing the result failed: {type(exc).__name__}: {exc}\n"
                                    f"{traceback.format_exc()[-3000:]}", 1)
    try:
        os.unlink(opts.out + ".partial")
    except OSError:
        pass
    if error:
        _log(f"the script raised {error['type']}: {error['message'][:300]}")
    _log(f"{H.steps_done} optimizer step(s), stopped by {stopped_by}, {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)  # threads or workers the script left behind must not keep the process alive
