"""Decoded row groups kept as Arrow record batches, and a batch's rows gathered in one take.

A source keeps each row group it decodes as an Arrow record batch of the requested columns, least
recently used out once their Arrow bytes pass the budget. A batch's rows are gathered with
Arrow's ``take`` (in C) and converted to records once, per batch
(:func:`~thresher.sources.formats.parquet.convert.column_values`): no Python object is kept per
cached row, so a read touches no object made long ago, and a cached row costs its Arrow bytes.
What is held, where and when it was last read are NumPy arrays indexed by row group, so a
batch's bookkeeping is a few vectorized steps however many row groups it touches.

A take costs a call per table, and a shuffled batch touches about as many row groups as it has
keys. So once the calls a store has spent on batches spread over many row groups add up to about
the bytes it holds (:data:`TAKE_CALL_BYTES` counted per call over :data:`FREE_TAKES` a batch), the
store *merges* what it holds into a few large tables (segments of up to :data:`SEGMENT_BYTES`, so
32-bit offsets never overflow), copied once; later batches over those row groups are one take per
segment. A merged row group is still evicted in its turn: its bytes are then dead until the next
merge (made early once half the merged bytes are dead), so a store holds at most about 1.5 times
its budget. A batch over a few row groups (keys in order, a block shuffle's window) never pays
for a merge.

Example:
    >>> import numpy as np, pyarrow as pa
    >>> store = RowGroupStore(1 << 20, groups=2)
    >>> store.put(0, pa.record_batch({"x": [0, 1, 2]})); store.put(1, pa.record_batch({"x": [3, 4]}))
    >>> plan = store.plan(np.array([1, 0, 1]))
    >>> plan.missing.tolist()
    []
    >>> plan.gather(np.array([1, 2, 0])).column("x").to_pylist()
    [4, 2, 3]
    >>> store.info()
    {'hits': 3, 'misses': 0, 'entries': 2, 'bytes': 40, 'merged': 0}
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from thresher.sources.formats.parquet.arrow import pyarrow

__all__ = ["FREE_TAKES", "SEGMENT_BYTES", "TAKE_CALL_BYTES", "Plan", "RowGroupStore"]

SEGMENT_BYTES = 1 << 30
"""Bytes of one merged table at most: its string offsets (32-bit) cannot overflow."""
TAKE_CALL_BYTES = 64 << 10
"""A take call over one more table costs about as much time as copying this many bytes."""
FREE_TAKES = 8
"""Take calls a batch makes without counting toward a merge (a block shuffle's window)."""


def _indices(positions: np.ndarray) -> Any:
    """``positions`` as an Arrow int64 array over the same bytes (``pa.array`` of a NumPy array
    would import pandas, about half a second in every worker)."""
    pa = pyarrow()
    positions = np.ascontiguousarray(positions, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(positions), [None, pa.py_buffer(positions)])


def _unique(groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(groups, return_inverse=True)``, without sorting where the groups span a
    short range (a batch in key order spans one or two; a shuffle spans a source's groups)."""
    if not len(groups):
        return groups, groups
    lo, hi = int(groups.min()), int(groups.max())
    if hi - lo > 8 * len(groups) + 1024:
        return np.unique(groups, return_inverse=True)
    at = groups - lo
    present = np.zeros(hi - lo + 1, dtype=bool)
    present[at] = True
    rank = np.cumsum(present) - 1
    return np.flatnonzero(present) + lo, rank[at]


class Plan:
    """A batch's row groups as :meth:`RowGroupStore.plan` found them: ``missing`` (to decode
    and :meth:`add`), and where the others are, as they were then (later merges and evictions
    do not change a plan)."""

    def __init__(self, store: RowGroupStore, groups: np.ndarray, uniq: np.ndarray, inverse: np.ndarray | None,
                 segment: np.ndarray, base: np.ndarray, segments: tuple[Any, ...],
                 tables: dict[int, Any], missing: np.ndarray, extras: dict[int, Any]) -> None:
        self._store, self._groups, self._uniq, self._inverse = store, groups, uniq, inverse
        self._segment, self._base, self._segments, self._tables = segment, base, segments, tables
        self._extras = extras
        self.missing = missing

    def add(self, g: int, table: Any, extra: Any = None) -> None:
        """Row group ``g`` (one of ``missing``), decoded."""
        self._tables[g] = table
        self._extras[g] = extra

    def extras(self) -> list[Any]:
        """Each key's row group's ``extra`` (see :meth:`RowGroupStore.put`), in key order."""
        extras = self._extras
        return [extras[g] for g in self._groups.tolist()]

    def gather(self, rows: np.ndarray) -> Any:
        """One Arrow record batch of row ``rows[i]`` of row group ``groups[i]`` (the planned
        groups), in that order."""
        pa = pyarrow()
        segment, base = self._segment, self._base
        if self._inverse is None:  # planned all in one merged table: base is per key
            return self._segments[0].take(_indices(base + rows))
        inverse = self._inverse
        sources: list[Any] = list(self._segments)
        source_of = segment.copy()
        for j in np.flatnonzero(segment < 0).tolist():
            source_of[j] = len(sources)
            sources.append(self._tables[int(self._uniq[j])])
        at = base[inverse] + rows
        if len(sources) == 1:
            return sources[0].take(_indices(at))
        of_key = source_of[inverse]
        order = np.argsort(of_key, kind="stable")
        ordered = of_key[order]
        cuts = (np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist()
        at = at[order]
        pieces = [sources[int(ordered[a])].take(_indices(at[a:b]))
                  for a, b in zip([0, *cuts], [*cuts, len(ordered)], strict=True)]
        self._store.spent(len(pieces))
        back = np.empty(len(order), dtype=np.int64)
        back[order] = np.arange(len(order))
        return pa.concat_batches(pieces).take(_indices(back))


class RowGroupStore:
    """Arrow record batches of row groups ``0..groups-1``, evicted least recently used first once their
    bytes pass ``budget`` (a table costing more than the budget is not kept); thread-safe."""

    def __init__(self, budget: int, groups: int) -> None:
        self.budget = budget
        self.size = 0
        self.hits = self.misses = 0
        self._tick = 0
        self._used = np.zeros(groups, dtype=np.int64)  # the plan that last read it
        self._cost = np.zeros(groups, dtype=np.int64)  # its bytes; 0: not held
        self._xcost = np.zeros(groups, dtype=np.int64)  # its extra's bytes (in _cost)
        self._xsize = 0
        self._held = np.zeros(groups, dtype=bool)
        self._rows = np.zeros(groups, dtype=np.int64)
        self._segment = np.full(groups, -1, dtype=np.int64)  # merged: its segment
        self._base = np.zeros(groups, dtype=np.int64)  # merged: its first row there
        self._tables: dict[int, Any] = {}  # held, not merged
        self._extras: dict[int, Any] = {}  # held, with an extra
        self._segments: tuple[Any, ...] = ()
        self._merged_bytes = 0
        self._dead = 0  # bytes of merged row groups since evicted
        self._debt = 0  # take calls over FREE_TAKES since the last merge, in TAKE_CALL_BYTES
        self._can_merge = True
        self._lock = threading.Lock()

    def plan(self, groups: np.ndarray) -> Plan:
        """The row groups of a batch (one per key, int64): which are held and where (the keys
        of held ones counted as hits, each distinct missing one as a miss; all marked read)."""
        with self._lock:
            self._tick += 1
            self._used[groups] = self._tick
            segment = self._segment[groups]
            if len(self._segments) == 1 and len(groups) and segment.min() >= 0:  # all in one merged table
                self.hits += len(groups)
                extras = self._extras_of(np.unique(groups).tolist()) if self._extras else {}
                return Plan(self, groups, groups, None, segment, self._base[groups], self._segments, {},
                            groups[:0], extras)
        uniq, inverse = _unique(groups)
        with self._lock:
            held = self._held[uniq]
            missing = uniq[~held]
            self.hits += int(held[inverse].sum())
            self.misses += len(missing)
            segment = self._segment[uniq]
            base = np.where(segment >= 0, self._base[uniq], 0)  # a table held alone starts at 0
            tables = {} if len(self._tables) == 0 else {
                g: self._tables[g] for g in uniq[held & (segment < 0)].tolist()}
            segments = self._segments
            extras = self._extras_of(uniq[held].tolist()) if self._extras else {}
        return Plan(self, groups, uniq, inverse, segment, base, segments, tables, missing, extras)

    def _extras_of(self, groups: list[int]) -> dict[int, Any]:
        extras = self._extras
        return {g: extras.get(g) for g in groups}

    def peek(self, g: int) -> tuple[Any, Any] | None:
        """Row group ``g``'s table and extra if held (not counted, not marked read), else None."""
        with self._lock:
            if not self._held[g]:
                return None
            if self._segment[g] >= 0:
                table = self._segments[self._segment[g]].slice(int(self._base[g]), int(self._rows[g]))
            else:
                table = self._tables[g]
            return table, self._extras.get(g)

    def put(self, g: int, table: Any, extra: Any = None, extra_cost: int = 0) -> None:
        """Keeps ``table`` (a record batch) as row group ``g`` (its cost: its Arrow bytes), and with it ``extra``
        (anything, costing ``extra_cost`` bytes: values a source keeps as Python objects)."""
        cost = int(table.nbytes) + extra_cost
        if cost > self.budget:
            return
        with self._lock:
            if self._held[g]:
                self._drop(g)
            self._tables[g] = table
            self._used[g] = max(self._used[g], self._tick)  # newest: not the one evicted for room
            if extra is not None:
                self._extras[g] = extra
            self._held[g] = True
            self._cost[g] = cost
            self._xcost[g] = extra_cost
            self._xsize += extra_cost
            self._rows[g] = table.num_rows
            self.size += cost
            while self.size > self.budget:
                held = np.flatnonzero(self._held)
                self._drop(int(held[np.argmin(self._used[held])]))

    def _drop(self, g: int) -> None:
        cost = int(self._cost[g])
        self.size -= cost
        extra_cost = int(self._xcost[g])
        self._xsize -= extra_cost
        cost -= extra_cost
        self._held[g] = False
        self._cost[g] = 0
        self._extras.pop(g, None)
        if self._segment[g] >= 0:
            self._segment[g] = -1
            self._dead += cost
        else:
            del self._tables[g]

    # --- merging -----------------------------------------------------------------------

    def spent(self, takes: int) -> None:
        """A gather made ``takes`` take calls."""
        if takes > FREE_TAKES:
            with self._lock:
                self._debt += (takes - FREE_TAKES) * TAKE_CALL_BYTES

    def maybe_merge(self) -> None:
        """Merges what is held if the take calls saved would pay for the copy, or if half the
        merged bytes are dead (see the module's docstring)."""
        with self._lock:
            stale = self._merged_bytes > 0 and 2 * self._dead > self._merged_bytes
            tables = self.size - self._xsize
            if not self._can_merge or not tables or (self._debt < tables and not stale):
                return
            self._merge()

    def _merge(self) -> None:
        pa = pyarrow()
        groups = np.flatnonzero(self._held).tolist()
        tables = [self._tables[g] if self._segment[g] < 0 else
                  self._segments[self._segment[g]].slice(int(self._base[g]), int(self._rows[g]))
                  for g in groups]
        segments: list[Any] = []
        segment_of = np.empty(len(groups), dtype=np.int64)
        base = np.empty(len(groups), dtype=np.int64)
        batch: list[Any] = []
        size = rows = 0
        try:
            for j, t in enumerate(tables):
                if batch and size + t.nbytes > SEGMENT_BYTES:
                    segments.append(pa.concat_batches(batch))
                    batch, size, rows = [], 0, 0
                segment_of[j], base[j] = len(segments), rows
                batch.append(t)
                size += t.nbytes
                rows += t.num_rows
            if batch:
                segments.append(pa.concat_batches(batch))
        except (pa.ArrowException, TypeError, ValueError):
            self._can_merge = False  # tables that do not concatenate: keep taking from each
            return
        self._segments = tuple(segments)
        self._merged_bytes = sum(int(s.nbytes) for s in segments)
        self._segment[groups] = segment_of
        self._base[groups] = base
        self._tables.clear()
        self._dead = self._debt = 0

    # --- what it holds -----------------------------------------------------------------

    def info(self) -> dict[str, int]:
        """``hits`` (keys read from held row groups), ``misses`` (row groups decoded: each
        distinct one a batch found missing), ``entries``, ``bytes`` (their Arrow bytes, and
        their extras' costs) and ``merged`` (entries held in merged tables)."""
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "entries": int(self._held.sum()),
                    "bytes": self.size, "merged": int((self._segment >= 0).sum())}

    def __len__(self) -> int:
        return int(self._held.sum())

    def clear(self) -> None:
        with self._lock:
            self._held[:] = False
            self._cost[:] = 0
            self._segment[:] = -1
            self._tables.clear()
            self._extras.clear()
            self._segments = ()
            self._xcost[:] = 0
            self.size = self._xsize = self._merged_bytes = self._dead = self._debt = 0
