"""Is a CUDA run short of memory, or is its allocator fragmented? The first step of the lessons' diagnostic
sequence (shared/domain/where-the-memory-goes.md, "The diagnostic sequence"): compare what the tensors hold
(``max_memory_allocated``) with what the caching allocator holds from the driver (``max_memory_reserved``); when
much more is reserved than allocated, the memory is lost to fragmentation, not to the tensors, and
``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` is the fix to try before any model change.

The threshold (why these two numbers):

* ``SHARE = 0.30``: fragmentation is called when more than 30% of the memory reserved at the peak is not
  allocated. Reserved minus allocated "commonly adds 5-30%, more with varying shapes"
  (shared/research/measuring-memory-on-cpu.md, what CPU tracking misses), and DeepSpeed's ZeRO reports an OOM
  with over 30% of the memory free to fragmentation (shared/research/memory-estimators.md, B7); the ROCm
  Megatron report measured 7%. So up to 30% is an allocator doing its ordinary work, and past it the caching
  allocator, not the model, is what a larger run would run out of.
* ``MIN_BYTES = 512 MiB``: the gap must also be large in absolute terms. The allocator packs allocations up to
  1 MiB into 2 MiB segments, lets allocations of 1-10 MiB take larger buffers and rounds larger ones up to
  2 MiB (torch==2.13.0, c10/core/AllocatorConfig.h: kSmallBuffer, kSmallSize, kMinLargeAlloc, kRoundLarge), so
  a small model's run reserves whole segments for a few MiB of tensors: its share is high and means nothing.
  512 MiB is the low end of the CUDA context's own cost (300 MiB - 2 GiB, memory-estimators.md B7), a size
  that decides whether a run fits a card.

Only numbers the harness read from the allocator are used: a CPU run (no allocator counters) gives None.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainlint.memory import fmt_bytes

SHARE = 0.30
MIN_BYTES = 512 * 2**20
EXPANDABLE = "expandable_segments:True"


@dataclass(frozen=True)
class Fragmentation:
    allocated: int  # max_memory_allocated at the run's peak
    reserved: int  # max_memory_reserved of the same window

    @property
    def gap(self) -> int:
        return max(self.reserved - self.allocated, 0)

    @property
    def share(self) -> float:
        """The part of the reserved memory no tensor held."""
        return self.gap / self.reserved if self.reserved > 0 else 0.0

    @property
    def fragmented(self) -> bool:
        return self.share > SHARE and self.gap >= MIN_BYTES


def of_run(data: dict) -> Fragmentation | None:
    """The allocated / reserved pair at a CUDA run's peak; None off CUDA or when the run recorded neither."""
    if not str(data.get("device") or "").startswith("cuda"):
        return None
    allocated = data.get("peak_allocated")
    reserved = data.get("reserved_at_peak")
    if reserved is None:
        reserved = data.get("peak_reserved")
    if not isinstance(allocated, int) or not isinstance(reserved, int) or reserved <= 0:
        return None
    return Fragmentation(allocated, reserved)


def expandable_already(env: dict) -> bool:
    """The run already had expandable segments on: a rerun with them would show nothing new."""
    conf = env.get("PYTORCH_CUDA_ALLOC_CONF") or env.get("PYTORCH_ALLOC_CONF") or ""
    return any(part.strip().replace(" ", "") == EXPANDABLE for part in conf.split(","))


def rerun_env(env: dict) -> dict:
    """The environment of the rerun: the caller's allocator settings with expandable segments added."""
    conf = env.get("PYTORCH_CUDA_ALLOC_CONF") or ""
    parts = [p for p in conf.split(",") if p.strip() and not p.strip().startswith("expandable_segments")]
    return {**env, "PYTORCH_CUDA_ALLOC_CONF": ",".join([*parts, EXPANDABLE])}


def verdict(label: str, data: dict, env: dict) -> dict | None:
    """What the report says of one run's allocator: None off CUDA; else the numbers, whether they read as
    fragmentation, and whether a rerun with expandable segments is due (`rerun`)."""
    f = of_run(data)
    if f is None:
        return None
    row = {"run": label, "allocated_at_peak": f.allocated, "reserved_at_peak": f.reserved, "unallocated": f.gap,
           "unallocated_share": round(f.share, 4), "fragmented": f.fragmented, "rerun": False,
           "threshold": {"share": SHARE, "min_bytes": MIN_BYTES}}
    if not f.fragmented:
        row["note"] = (f"{f.share:.0%} of the reserved memory unallocated at the peak: within what the caching "
                       f"allocator ordinarily keeps")
    elif expandable_already(env):
        row["note"] = (f"{f.share:.0%} of the reserved memory unallocated at the peak although "
                       f"PYTORCH_CUDA_ALLOC_CONF has {EXPANDABLE}: fragmentation that expandable segments do not "
                       f"cure (varying shapes; try padding to fixed lengths)")
    else:
        row["rerun"] = True
        row["note"] = (f"fragmentation: {f.share:.0%} of the reserved memory unallocated at the peak; rerun with "
                       f"PYTORCH_CUDA_ALLOC_CONF={EXPANDABLE}")
    return row


def compare(row: dict, rerun: dict) -> dict:
    """The fragmentation row with the rerun's numbers and what they show."""
    after = of_run(rerun)
    out = dict(row)
    if after is None or rerun.get("error"):
        err = (rerun.get("error") or {}).get("type", "no numbers")
        out["with_expandable_segments"] = None
        out["note"] = row["note"] + f"; the rerun did not complete ({err})"
        return out
    out["with_expandable_segments"] = {"allocated_at_peak": after.allocated, "reserved_at_peak": after.reserved,
                                       "unallocated_share": round(after.share, 4)}
    saved = row["reserved_at_peak"] - after.reserved
    if saved > 0:
        out["note"] = (row["note"] + f": reserved {fmt_bytes(saved)} lower "
                       f"({after.share:.0%} unallocated); set it for this run")
    else:
        out["note"] = row["note"] + ": reserved no lower with expandable segments"
    return out


def check_runs(runs: dict[str, dict | None], env: dict, rerun) -> list[dict]:
    """One row per CUDA run; a fragmented run is rerun once (`rerun(label)` -> its result data) with expandable
    segments, and its row says what that changed. A run that is None (no fixed run) is skipped."""
    rows = []
    for label, data in runs.items():
        if data is None:
            continue
        row = verdict(label, data, env)
        if row is None:
            continue
        if row["rerun"]:
            row = compare(row, rerun(label))
        rows.append(row)
    return rows
