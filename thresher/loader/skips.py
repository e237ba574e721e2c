"""Skipped steps: global position ranges the loader never hands out, and the jumps over them.

``it.set_state(state, skip_steps=range(a, b))`` records the steps as the global
positions they cover, ``[a*G, b*G)`` with G the global batch (all processes' step),
so the skips mean the same records under any later number of processes. The state
keeps them (``state["dataset"]["skips"]``). A step is skipped when any of its
positions is; the iterator then restarts its producer after the skipped steps,
reading none of their records, and every other step is the batch the run without
skips would have made.

Example:
    >>> s = SkipRanges.of([(8, 16)])
    >>> plan = s.plan(batch_size=4, global_batch=4)
    >>> plan.next_start(0), plan.resume_at(8), plan.resume_at(4)
    (8, 16, 4)
    >>> s.steps_skipped(global_batch=4, stop=5)
    [2, 3]
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from thresher._validate import is_int
from thresher.errors import ConfigError, InvalidStateError

__all__ = ["SkipPlan", "SkipRanges"]


@dataclass(frozen=True)
class SkipRanges:
    """Sorted, disjoint, non-empty global position ranges ``[start, stop)`` that are skipped."""

    ranges: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(cls, ranges: Iterable[Sequence[int]]) -> SkipRanges:
        """Sorts and merges ranges (empty ones are dropped)."""
        merged: list[list[int]] = []
        for a, b in sorted((int(r[0]), int(r[1])) for r in ranges if int(r[1]) > int(r[0])):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        return cls(tuple((a, b) for a, b in merged))

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def union(self, other: SkipRanges) -> SkipRanges:
        return SkipRanges.of(self.ranges + other.ranges)

    @classmethod
    def of_steps(cls, steps: range, global_batch: int) -> SkipRanges:
        """The global positions of ``steps`` (a range with step 1) of G = ``global_batch`` positions."""
        if not isinstance(steps, range) or steps.step != 1 or not is_int(steps.start, minimum=0):
            raise ConfigError(f"skip_steps must be a range of step numbers >= 0 with step 1, e.g. "
                              f"range(81200, 81500); got {steps!r}")
        return cls.of([(steps.start * global_batch, steps.stop * global_batch)])

    def to_json(self) -> list[list[int]]:
        return [[a, b] for a, b in self.ranges]

    @classmethod
    def from_json(cls, value: Any, where: str = "state['dataset']['skips']",
                  what: str = "global position") -> SkipRanges:
        """Reads ``state["dataset"]["skips"]`` (or the field ``where``); InvalidStateError when malformed."""
        ok = isinstance(value, list) and all(
            isinstance(r, list) and len(r) == 2 and all(is_int(x, 0, 2**62, numpy=False) for x in r)
            and r[0] < r[1] for r in value)
        if not ok:
            raise InvalidStateError(f"{where} is malformed: {str(value)[:200]}; expected a list of "
                                    f"[start, stop) {what} pairs with 0 <= start < stop <= 2**62")
        return cls.of(value)

    @cached_property
    def _bounds(self) -> tuple[np.ndarray, np.ndarray]:
        starts = np.array([a for a, _ in self.ranges], dtype=np.int64)
        return starts, np.array([b for _, b in self.ranges], dtype=np.int64)

    def contains(self, values: np.ndarray) -> np.ndarray:
        """A bool array: which of ``values`` (int64) lie in some range. O(n log ranges).

        Example:
            >>> SkipRanges.of([(2, 4), (9, 10)]).contains(np.arange(11)).nonzero()[0].tolist()
            [2, 3, 9]
        """
        starts, stops = self._bounds
        v = np.asarray(values, dtype=np.int64)
        i = np.searchsorted(starts, v, side="right") - 1
        return (i >= 0) & (v < stops[np.maximum(i, 0)]) if len(starts) else np.zeros(v.shape, dtype=bool)

    def count(self) -> int:
        """The number of values in the ranges."""
        return sum(b - a for a, b in self.ranges)

    def intersects(self, start: int, stop: int) -> bool:
        """True when some skipped position lies in ``[start, stop)``."""
        i = bisect_right(self.ranges, (start, 2**63)) - 1
        if i >= 0 and self.ranges[i][1] > start:
            return True
        return i + 1 < len(self.ranges) and self.ranges[i + 1][0] < stop

    def steps_skipped(self, global_batch: int, stop: int | None = None) -> list[int]:
        """The step numbers (of G = ``global_batch`` positions) that are skipped, below ``stop``."""
        out: list[int] = []
        for a, b in self.ranges:
            first, last = a // global_batch, -(-b // global_batch)
            out.extend(t for t in range(first, last if stop is None else min(last, stop)) if not out or t > out[-1])
        return out

    def plan(self, batch_size: int, global_batch: int) -> SkipPlan:
        """The jumps of one process whose step t is local positions ``[t*B, (t+1)*B)`` and
        global positions ``[t*G, (t+1)*G)`` together with the other processes'."""
        return SkipPlan(self, batch_size, global_batch)


@dataclass(frozen=True)
class SkipPlan:
    """Where one process's iterator jumps: local positions at step boundaries."""

    skips: SkipRanges
    batch_size: int
    global_batch: int

    def next_start(self, position: int) -> int | None:
        """The first position >= ``position`` where a skipped step starts (None: none)."""
        G, B = self.global_batch, self.batch_size
        step = -(-position // B)
        for a, b in self.skips.ranges:
            if b > step * G:
                return max(step, a // G) * B
        return None

    def resume_at(self, position: int) -> int:
        """``position``, or the position after the skipped steps that start there."""
        G, B = self.global_batch, self.batch_size
        step = start = -(-position // B)
        while self.skips.intersects(step * G, (step + 1) * G):
            i = bisect_right(self.skips.ranges, (step * G, 2**63)) - 1
            stop = self.skips.ranges[i][1] if i >= 0 and self.skips.ranges[i][1] > step * G \
                else self.skips.ranges[i + 1][1]
            step = -(-stop // G)
        return position if step == start else step * B
