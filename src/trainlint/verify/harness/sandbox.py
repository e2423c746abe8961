"""The sandbox a script runs in: nothing it writes lands outside the harness's work directory where that can be
redirected, nothing is pushed to the Hugging Face Hub, and experiment trackers are off.

* The environment (:func:`set_environment`): HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE / HF_DATASETS_OFFLINE = 1
  (unless --online), WANDB_MODE=disabled, WANDB_DISABLED=true, COMET_MODE=disabled,
  MLFLOW_TRACKING_URI=file://DIR/mlruns, HF_HUB_DISABLE_TELEMETRY=1, PYTHONDONTWRITEBYTECODE=1 (and
  ``sys.dont_write_bytecode``), CUDA_VISIBLE_DEVICES="" for ``--device cpu``, and TRAINLINT_VERIFY=1 /
  TRAINLINT_VERIFY_WORKDIR=DIR for scripts that want to know.
* Path-based saves whose target lies outside DIR go to DIR/redirected/<absolute path> (:meth:`Sandbox.redirect`,
  applied by the wrappers below, which ``libraries.py`` puts on the libraries' save functions); the original
  paths are listed in ``written_outside_workdir``.
* Pushes raise :class:`PushBlockedError` (:func:`blocked`).
* Anything else the script opens for writing outside DIR (plain ``open(..., "w")``, caches) is NOT redirected;
  a ``sys.addaudithook`` (:meth:`Sandbox.audit`) lists it in ``unredirected_writes``.
"""

from __future__ import annotations

import contextlib
import os
import sys

from trainlint.verify.harness.base import MAX_LISTED, log
from trainlint.verify.harness.patching import wraps_once


class PushBlockedError(RuntimeError):
    """Raised instead of any upload to the Hugging Face Hub while a script runs under `trainlint verify`."""


def set_environment(opts) -> None:
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


class Sandbox:
    """Where writes go, and which ones got away. `running()` says whether the script (not the harness) runs."""

    def __init__(self, workdir: str, own_files: set[str], running):
        self.workdir = workdir
        self.output_dir = os.path.join(workdir, "output")
        self.running = running
        self.redirected: list[str] = []
        self.unredirected: list[str] = []
        self.user_output_dirs: list[str] = []
        self._own_files = own_files
        self._in_audit = False

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
            log(f"write to {absolute} redirected to {new}")
        return new

    @contextlib.contextmanager
    def quiet(self):
        """The harness's own writes (the partial result) are not the script's."""
        self._in_audit = True
        try:
            yield
        finally:
            self._in_audit = False

    def audit(self, event, args) -> None:
        if event not in ("open", "os.mkdir") or not self.running() or self._in_audit:
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


def _redirect_arg(box: Sandbox, args, kwargs, pos: int, name: str):
    if len(args) > pos:
        args = list(args)
        args[pos] = box.redirect(args[pos])
    elif name in kwargs:
        kwargs[name] = box.redirect(kwargs[name])
    return args, kwargs


def redirecting_method(box: Sandbox, pos: int, name: str, block_push: bool = False):
    """A `make` for patch_method: the path argument at `pos` (or keyword `name`) goes through the sandbox."""
    def make(fn):
        def wrapper(self, *args, **kwargs):
            if block_push and kwargs.get("push_to_hub"):
                raise PushBlockedError("trainlint verify: save_pretrained(push_to_hub=True) is disabled; "
                                       "nothing is pushed while verifying")
            args, kwargs = _redirect_arg(box, args, kwargs, pos, name)
            return fn(self, *args, **kwargs)

        return wrapper

    return make


def redirecting_function(box: Sandbox, fn, pos: int, name: str):
    if getattr(fn, "__trainlint_wrapped__", False):
        return fn

    def wrapper(*args, **kwargs):
        args, kwargs = _redirect_arg(box, args, kwargs, pos, name)
        return fn(*args, **kwargs)

    return wraps_once(fn, wrapper)


def blocked(what: str):
    """A `make` for patch_method: the method raises PushBlockedError instead of uploading."""
    def make(fn):
        def wrapper(*args, **kwargs):
            raise PushBlockedError(f"trainlint verify: {what} is disabled; nothing is pushed or uploaded while "
                                   "verifying")

        return wrapper

    return make
