"""`estimate --max-batch`: the largest per-device micro-batch that fits a GPU, found by asking the caller's
`fits` (which re-estimates the whole run at that batch), and the gradient accumulation that keeps the script's
effective batch (micro-batch x accumulation) the same."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

LIMIT = 4096  # a power of two: the search doubles up to it and says "at least" when it still fits there


@dataclass(frozen=True)
class MaxBatch:
    batch: int  # the largest micro-batch that fits; 0 when not even 1 does
    at_limit: bool  # LIMIT still fits: the largest may be larger
    effective: int | None  # the script's micro-batch x gradient_accumulation_steps; None when either is unknown

    @property
    def accumulation(self) -> int | None:
        """The steps that keep `effective` at `batch`, rounded up."""
        return math.ceil(self.effective / self.batch) if self.effective and self.batch else None

    @property
    def exact(self) -> bool:
        return self.accumulation is not None and self.batch * self.accumulation == self.effective

    @property
    def exact_batch(self) -> int | None:
        """The largest micro-batch at or under `batch` that divides `effective` (keeps it exactly)."""
        if not self.effective or not self.batch:
            return None
        return max(d for d in range(1, min(self.batch, self.effective) + 1) if self.effective % d == 0)


def largest_batch(fits: Callable[[int], bool]) -> tuple[int, bool]:
    """(largest b <= LIMIT with fits(b), whether LIMIT fits); fits must be monotone (more batch, more memory)."""
    if not fits(1):
        return 0, False
    low, high = 1, 2
    while high <= LIMIT and fits(high):
        low, high = high, high * 2
    if high > LIMIT:
        return LIMIT, True
    while high - low > 1:  # fits(low), not fits(high)
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low, False
