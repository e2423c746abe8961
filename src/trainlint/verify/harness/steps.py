"""Step control: what counts as a training step, when the memory window of a step opens and closes, and how the
script is stopped after N optimizer steps. The hooks (installed by :func:`install_torch_hooks`):

- optimizer step post hook (``torch.optim.optimizer.register_optimizer_step_post_hook``): counts steps, closes
  the memory window of the step; after the N-th step, outside ``Trainer.train``, it raises ``StopAfterSteps``
  (a BaseException) that ends the script as a normal stop. Inside ``Trainer.train`` the Trainer stops itself
  (max_steps and the callback) and the script goes on (so its saves after training run, redirected); any
  optimizer step after the N-th raises ``StopAfterSteps`` from the step PRE hook, so no more than N steps ever
  happen;
- optimizer step pre hook: at the first step (after the first backward) the adapter check (``checks.py``);
- ``torch.nn.Module.__call__`` is wrapped (not global forward hooks: those do not see keyword arguments, and HF
  models are called with ``**batch``): the outermost module call in the main thread with grad enabled and
  outside backward (so no checkpoint recompute) is a training forward; its batch dimension (first dim of
  input_ids / pixel_values / input_features / input_values / inputs_embeds, else of the first positional tensor)
  is added up between optimizer steps (``samples_per_step``). transformers PreTrainedModel / PeftModel calls are
  preferred; other outermost modules count only in a step where no HF model was called. The first training
  forward opens the memory window of step 1;
- ``torch.autograd.backward`` (which ``Tensor.backward`` calls): records ``float(loss)`` of every scalar backward
  without an explicit gradient; the loss of an optimizer step is the sum over its micro-batches (which is what
  was optimised: scripts and Trainer divide by the accumulation steps themselves), divided by the GradScaler's
  scale when the step goes through ``GradScaler.step``;
- ``torch.amp.GradScaler.step``: a step the scaler skips (inf/nan grads, so ``optimizer.step()`` never runs)
  still ends a step window and counts towards N, as Trainer counts it; its index is listed in ``skipped_steps``;
- ``torch.save`` goes through the sandbox (``sandbox.py``).

One memory "window" per optimizer step: from the first training forward, or the end of the previous step, to
the end of the step's ``optimizer.step()``.
"""

from __future__ import annotations

import functools
import math
import sys
import threading
import time
import weakref

from trainlint.verify.harness import result
from trainlint.verify.harness.base import MAX_LISTED, StopAfterSteps, log
from trainlint.verify.harness.checks import AdapterCheck
from trainlint.verify.harness.memory_cpu import classify
from trainlint.verify.harness.patching import wraps_once
from trainlint.verify.harness.sandbox import Sandbox, redirecting_function

BATCH_KEYS = ("input_ids", "pixel_values", "input_features", "input_values", "inputs_embeds")


class Harness:
    def __init__(self, opts, torch, memory):
        self.torch = torch
        self.opts = opts
        self.n = opts.steps
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
        self.models = weakref.WeakSet()
        self.optimizers = weakref.WeakSet()
        self.warnings: list[str] = []
        self.script_running = False
        self.sandbox = Sandbox(opts.workdir, {opts.out, opts.out + ".partial"}, lambda: self.script_running)
        self.adapters = AdapterCheck(torch, self.models)
        self._hf_classes: tuple = ()
        self._started = time.perf_counter()
        # phases (RL / preference trainers): the peak while TRL generates and scores completions, while the
        # harness's evaluation runs, and the rest of every step window ("train"); see switch_phase
        self.phase_peaks: dict[str, int] = {}
        self.in_phase: list[str] = []  # the wrappers entered, innermost last
        self._label: str | None = None
        self.phased = False  # a generation or evaluation wrapper was entered: phases are switched from then on
        self.notes: list[str] = []  # what the harness changed in the run that the report must say (use_vllm)
        self.eval_wanted = False  # the script's config evaluates (eval_strategy other than "no")
        self.eval_error: dict | None = None

    def warn(self, msg: str) -> None:
        if len(self.warnings) < MAX_LISTED:
            self.warnings.append(msg)
        log(msg)

    # -- phases --------------------------------------------------------------------------------------------
    def _current_label(self) -> str | None:
        if "eval" in self.in_phase:
            return "eval"
        if self.in_phase:
            return self.in_phase[-1]
        return "train" if self.window_open else None

    def switch_phase(self) -> None:
        """Give the memory peak since the previous switch to the phase in effect until now, then take the phase
        in effect from now. Called before and after every change of phase (a wrapper entered or left, a step
        window opened or closed): the peak of a phase is the highest level while it was in effect, resident
        weights, models and optimizer state included, as memory.estimate's phase peaks count them."""
        switch = getattr(self.memory, "phase_switch", None)
        if switch is None or not self.phased:
            # no generation or evaluation yet: each step window is the train phase (close_window records it), and
            # the CUDA counters are reset at the window boundaries only, as before phases existed
            self._label = self._current_label()
            return
        peak = int(switch())
        if self._label is not None:
            self.phase_peaks[self._label] = max(self.phase_peaks.get(self._label, 0), peak)
        self._label = self._current_label()

    def phase(self, name: str):
        """A context manager: the code inside runs as phase `name` ("generation", "eval")."""
        H = self

        class _Phase:
            def __enter__(self):
                if threading.get_ident() == H.main_ident:
                    H.phased = True
                    H.switch_phase()
                    H.in_phase.append(name)
                    H.switch_phase()

            def __exit__(self, *exc):
                if threading.get_ident() == H.main_ident and H.in_phase:
                    H.switch_phase()
                    H.in_phase.pop()
                    H.switch_phase()
                return False

        return _Phase()

    # -- windows -------------------------------------------------------------------------------------------
    def open_window(self) -> None:
        if self.window_open or self.steps_done >= self.n:
            return
        self.switch_phase()
        prev = self.memory.new_segment()
        if self.steps_done == 0 and self.setup_peak is None:
            self.setup_peak = prev
        self.window_open = True
        self.switch_phase()

    def close_window(self, optimizer) -> None:
        self.switch_phase()
        peak, reserved, cats = self.memory.end_window(self._classify if self.memory.kind == "cpu" else None)
        if not self.phased:
            self.phase_peaks["train"] = max(self.phase_peaks.get("train", 0), int(peak))
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
        self.switch_phase()

    def _classify(self, snap: dict, live: dict) -> dict:
        return classify(self.torch, self.models, self.optimizers, snap, live)

    # -- hooks ---------------------------------------------------------------------------------------------
    def optimizer_pre_hook(self, optimizer, args, kwargs):
        if threading.get_ident() != self.main_ident:
            return None
        if self.steps_done >= self.n:
            raise StopAfterSteps()
        self.optimizers.add(optimizer)
        self.open_window()
        if self.steps_done == 0:
            with self.memory.paused():
                try:
                    self.adapters.check(optimizer)
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
            raise StopAfterSteps()

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
                raise StopAfterSteps()
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

    # -- output ----------------------------------------------------------------------------------------------
    def write_partial(self) -> None:
        result.write_partial(self)


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



def install_torch_hooks(H: Harness) -> None:
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

            GradScaler.step = wraps_once(orig_step, step)
    except Exception as exc:
        H.warn(f"GradScaler.step not patched: {exc}")

    for owner in (torch, torch.serialization):
        owner.save = redirecting_function(H.sandbox, owner.save, 1, "f")

