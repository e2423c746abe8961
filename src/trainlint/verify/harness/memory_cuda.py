"""CUDA memory: the caching allocator's own peak counters, one window per optimizer step.

``reset_peak_memory_stats`` at every window boundary; ``max_memory_allocated`` / ``max_memory_reserved`` per
window; the process's GPU memory from pynvml at each step end where pynvml can see this process
(``nvml_process_bytes``), else null. The window that holds the allocated peak also gives ``reserved_at_peak``:
its ``max_memory_reserved``, what the allocator held from the driver then. ``trainlint.verify.fragmentation``
reads the gap between the two (fragmentation, in the lessons' diagnostic sequence)."""

from __future__ import annotations

import contextlib
import os


class CudaMemory:
    kind = "cuda"

    def __init__(self, torch):
        self.torch = torch
        self.cuda = torch.cuda
        self.peak = 0
        self.peak_reserved = 0
        self.reserved_at_peak = 0  # max_memory_reserved of the window whose allocated peak is the highest
        self.carry = (0, 0)  # a window's allocated / reserved peaks before its last phase switch (phase_switch)
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
        a = max(int(self.cuda.max_memory_allocated()), self.carry[0])
        r = max(int(self.cuda.max_memory_reserved()), self.carry[1])
        if a >= self.peak:
            self.reserved_at_peak = r
        self.peak = max(self.peak, a)
        self.peak_reserved = max(self.peak_reserved, r)
        return a, r

    def new_segment(self) -> int:
        a, _ = self._fold()
        self.cuda.reset_peak_memory_stats()
        self.carry = (0, 0)
        return a

    def end_window(self, classify):
        a, r = self._fold()
        self.cuda.reset_peak_memory_stats()
        self.carry = (0, 0)
        return a, r, None

    def phase_switch(self) -> int:
        """The allocated peak since the previous switch (or window boundary); the window keeps its own peak in
        `carry`, so a phase inside a step window does not lose the window's."""
        a, r = int(self.cuda.max_memory_allocated()), int(self.cuda.max_memory_reserved())
        self.carry = (max(self.carry[0], a), max(self.carry[1], r))
        self.cuda.reset_peak_memory_stats()
        return a

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

    def driver_version(self) -> str | None:
        """The NVIDIA driver: from NVML where pynvml is installed, else the kernel module's /proc file."""
        if self.nvml is not None:
            try:
                v = self.nvml[0].nvmlSystemGetDriverVersion()
                return v.decode() if isinstance(v, bytes) else str(v)
            except Exception:
                pass
        try:
            with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
                words = fh.readline().split()
        except OSError:
            return None
        # "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024"
        return next((w for w in words if w[:1].isdigit() and w.count(".") >= 1), None)

    def paused(self):
        return contextlib.nullcontext()
