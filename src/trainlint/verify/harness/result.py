"""The result file: what one run measured, written atomically to RESULT.json (by a process whose RANK /
LOCAL_RANK is not 0, to RESULT.json.rank<R>). RESULT.json.partial is rewritten after every step
(``stopped_by: "running"``) and removed at the end, so a caller that kills a hung run still has the steps done
so far.

The fixed contract: ok, device, steps, peak_allocated, peak_reserved, step_peaks, step1_peak, steady_peak,
categories, losses, adapter_grad_ok, lora_params_checked, lora_params_with_grad, samples_per_step, error,
stopped_by, written_outside_workdir, seconds. Extras: skipped_steps, setup_peak (before the first training
forward), peak_where, step_reserved (CUDA), reserved_at_peak (CUDA: max_memory_reserved of the window holding
the allocated peak), step_categories (CPU), nvml_process_bytes, device_info (device, driver, versions:
``device.py``), unredirected_writes, user_output_dirs, harness_warnings, phase_peaks (the peak of each phase
seen: "train", "generation", "eval"; ``steps.Harness.switch_phase``), notes (what the harness changed in the run
that a report must say: use_vllm) and eval_error (the harness's evaluation failed). Losses that are not finite are
null."""

from __future__ import annotations

import json
import time
import traceback

from trainlint.verify.harness.device import device_info, device_label


def build(H, ok: bool, error: dict | None, stopped_by: str, seconds: float) -> dict:
    memory = H.memory
    try:
        H.switch_phase()  # the phase in effect now gets its peak so far
    except Exception:
        pass
    peak, reserved = memory.overall()
    last_segment = memory.tail()[0]  # since the last window boundary
    if H.window_open:
        last_label = f"step {H.steps_done + 1} (not completed)"
    else:
        last_label = "after the steps" if H.steps_done else "whole script (no optimizer step)"
    peaks = H.step_peaks
    where = None
    candidates = [("setup", H.setup_peak)] + [(f"step {i + 1}", p) for i, p in enumerate(peaks)]
    candidates.append((last_label, last_segment))
    best = max((c for c in candidates if c[1] is not None), key=lambda c: c[1], default=None)
    if best is not None:
        where = best[0]
    cats = None
    if peaks and H.step_categories and any(c is not None for c in H.step_categories):
        i = max(range(len(peaks)), key=lambda k: peaks[k])
        cats = H.step_categories[i]
    cuda = memory.kind == "cuda"
    nvml = None
    if cuda and any(b is not None for b in H.nvml_bytes):
        nvml = H.nvml_bytes
    if getattr(H, "device_info", None) is None:
        H.device_info = device_info(H.torch, memory)
    box, adapters = H.sandbox, H.adapters
    return {
        "ok": ok,
        "device": device_label(H.torch, memory),
        "steps": H.steps_done,
        "peak_allocated": int(peak),
        "peak_reserved": None if reserved is None else int(reserved),
        "step_peaks": peaks,
        "step1_peak": peaks[0] if peaks else None,
        "steady_peak": max(peaks[1:]) if len(peaks) > 1 else None,
        "categories": cats,
        "losses": H.losses,
        "adapter_grad_ok": adapters.ok,
        "lora_params_checked": adapters.checked,
        "lora_params_with_grad": adapters.with_grad,
        "samples_per_step": H.samples_per_step,
        "error": error,
        "stopped_by": stopped_by,
        "written_outside_workdir": box.redirected,
        "seconds": round(seconds, 3),
        # extras (not part of the fixed contract)
        "skipped_steps": H.skipped_steps,
        "setup_peak": H.setup_peak,
        "peak_where": where,
        "step_reserved": H.step_reserved if cuda else None,
        "reserved_at_peak": int(memory.reserved_at_peak) if cuda else None,
        "step_categories": H.step_categories if memory.kind == "cpu" else None,
        "nvml_process_bytes": nvml,
        "device_info": H.device_info,
        "unredirected_writes": box.unredirected,
        "user_output_dirs": box.user_output_dirs,
        "harness_warnings": H.warnings,
        "phase_peaks": dict(H.phase_peaks),
        "notes": list(H.notes),
        "eval_error": H.eval_error,
    }


def write_partial(H) -> None:
    with H.sandbox.quiet():  # the harness's own files are not the script's writes
        try:
            data = build(H, True, None, "running", time.perf_counter() - H._started)
            write_json(H.opts.out + ".partial", data)
        except Exception:
            pass


def failure(kind: str, message: str, seconds: float) -> dict:
    """The result of a run the harness could not start or finish (usage errors, a failed install)."""
    return {"ok": False, "device": None, "steps": 0, "peak_allocated": None, "peak_reserved": None,
            "step_peaks": [], "step1_peak": None, "steady_peak": None, "categories": None, "losses": [],
            "adapter_grad_ok": None, "lora_params_checked": 0, "lora_params_with_grad": 0, "samples_per_step": [],
            "error": {"type": kind, "message": message, "traceback_tail": ""}, "stopped_by": "error",
            "written_outside_workdir": [], "seconds": round(seconds, 3)}


def write_json(path: str, data: dict) -> None:
    from trainlint.atomic import write_bytes_atomic

    write_bytes_atomic(path, json.dumps(data, indent=1, default=str).encode("utf-8"))


def error_of(exc: BaseException) -> dict:
    lines = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).splitlines()
    return {"type": type(exc).__name__, "message": str(exc)[:2000], "traceback_tail": "\n".join(lines[-30:])}
