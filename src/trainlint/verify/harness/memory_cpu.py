"""CPU memory: a TorchDispatchMode that counts the bytes of every live tensor storage (each untyped storage once,
released by a weakref callback; ``UntypedStorage.resize_`` is followed as MemTracker does).

Storages created without a dispatched op (``torch.from_numpy``, tensors made in DataLoader worker processes or
other threads) are counted when an op first reads them. Allocations inside a kernel that never surface as an op
output (CUDA workspaces and the like) are not seen; neither are allocator rounding and fragmentation: the number
is comparable to ``torch.cuda.max_memory_allocated``, not to nvidia-smi. Per-category bytes at each window's
peak (params, buffers, grads, optimizer_state, other) are computed from a copy of the live set taken at the peak,
classified at the end of the step (:func:`classify`). The mode is incompatible with ``torch.compile`` on CPU.
"""

from __future__ import annotations

import functools
import weakref

CATEGORIES = ("params", "buffers", "grads", "optimizer_state", "other")


def make_cpu_tracker(torch):
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
            self.phase_peak = 0  # since the last phase switch (Harness.switch_phase), apart from the windows
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
            if self.current > self.phase_peak:
                self.phase_peak = self.current
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
            self.phase_peak = self.current  # a phase's peak is never older than its window's start
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


class CpuMemory:
    kind = "cpu"

    def __init__(self, torch):
        self.mode = make_cpu_tracker(torch)

    def new_segment(self) -> int:
        return self.mode.new_segment()

    def end_window(self, classify):
        peak, cats = self.mode.end_segment(classify)
        return peak, None, cats

    def tail(self) -> tuple[int, None]:
        return self.mode.seg_peak, None

    def phase_switch(self) -> int:
        """The peak since the previous switch; the next phase starts at the current level."""
        mode = self.mode
        peak, mode.phase_peak = mode.phase_peak, mode.current
        return peak

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



def classify(torch, models, optimizers, snap: dict, live: dict) -> dict:
    """Bytes per category of the live set `snap` copied at a window's peak: storages of the parameters and
    buffers of the models seen in training forwards and of the optimizers' param groups, their ``.grad``, the
    optimizers' state; a storage freed since the peak (or unknown) is "other"."""
    roles: dict[int, str] = {}

    def mark(t, role):
        if isinstance(t, torch.Tensor) and t.device.type != "meta":
            try:
                roles.setdefault(id(t.untyped_storage()), role)
            except Exception:
                pass

    params = []
    for opt in list(optimizers):
        for group in opt.param_groups:
            params.extend(group["params"])
    for model in list(models):
        params.extend(model.parameters())
    for p in params:
        if p.grad is not None:
            mark(p.grad, "grads")
    for opt in list(optimizers):
        for state in opt.state.values():
            if isinstance(state, dict):
                for v in state.values():
                    mark(v, "optimizer_state")
    for p in params:
        mark(p, "params")
    for model in list(models):
        for b in model.buffers():
            mark(b, "buffers")
    totals = dict.fromkeys(CATEGORIES, 0)
    for key, entry in snap.items():
        role = roles.get(key, "other") if live.get(key) is entry else "other"
        totals[role] += entry[0]
    return totals
