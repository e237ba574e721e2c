"""Decoded row groups kept as Arrow record batches, and a batch's rows gathered in one take.

A source keeps each row group it decodes as an Arrow record batch of the requested columns, least
recently used out once their Arrow bytes pass the budget. A batch's rows are gathered with
Arrow's ``take`` (in C) and converted to records once, per batch
(:func:`~thresher.sources.formats.parquet.convert.column_values`): no Python object is kept per
cached row, so a read touches no object made long ago, and a cached row costs its Arrow bytes.
What is held, where and when it was last read are NumPy arrays indexed by row group, so a
batch's bookkeeping is a few vectorized steps however many row groups it touches.

A take costs a call per table, and a shuffled batch touches about as many row groups as it has
keys. So the store counts the take calls past the first that batches make (:data:`TAKE_CALL_BYTES`
each); once they add up to the bytes of the tables it holds alone, it copies those into one
*merged* table (or several of up to :data:`SEGMENT_BYTES`, so 32-bit offsets never overflow), and
later batches over them are one take. A wide shuffle's row groups are merged once, early in its
first epoch; a block shuffle's window once, early in the window; keys in order never (their rows
are sliced, without a copy). A merged row group is still evicted in its turn: a merged table is
freed once none of its row groups is held, and while some are, the others' bytes are dead; once
the dead bytes pass half the budget, everything held is merged again, so a store holds at most
1.5 times its budget (and, for a moment, the copy a merge is making). More than
:data:`MAX_PIECES` live merged tables are merged into one once the calls pay for it.

Where thresher's C module reads every column of a batch (numbers, bools, times, strings,
binaries: :mod:`~thresher.sources.formats.parquet.gather`), none of that is needed: a store made
with ``spec_of`` describes each table once when it is put, a batch is located per key
(:meth:`Plan.locate`) and read from any number of tables in one call, and nothing is merged.

Example:
    >>> import numpy as np, pyarrow as pa
    >>> store = RowGroupStore(1 << 20, groups=2)
    >>> store.put(0, pa.record_batch({"x": [0, 1, 2]})); store.put(1, pa.record_batch({"x": [3, 4]}))
    >>> plan = store.plan(np.array([1, 0, 1]))
    >>> plan.missing.tolist()
    []
    >>> pieces, order = plan.gather(np.array([1, 2, 0]))    # keys 0 and 2 from row group 1, then key 1
    >>> [p.column("x").to_pylist() for p in pieces], order.tolist()
    ([[2], [4, 3]], [1, 0, 2])
    >>> store.info()
    {'hits': 3, 'misses': 0, 'entries': 2, 'bytes': 40, 'merged': 0, 'merged_tables': 0}
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from thresher.sources.formats.parquet.arrow import pyarrow

__all__ = ["MAX_PIECES", "SEGMENT_BYTES", "TAKE_CALL_BYTES", "Plan", "RowGroupStore"]

SEGMENT_BYTES = 1 << 30
"""Bytes of one merged table at most: its string offsets (32-bit) cannot overflow."""
TAKE_CALL_BYTES = 256 << 10
"""A take call over one more table costs about as much time as copying this many bytes. Measured
(1M short texts, batches of 256 keys): a take call from a table of 10k rows, its rows' memory
cold, about 50 us; merging 25 MB of row groups, 3 ms where the memory is reused and up to
about 15 ms where it is touched for the first time. With 64 KiB, a block shuffle's window was
read about 36 batches from its tables apart before being merged (each batch about a dozen
takes); with 256 KiB, about 9 (``benchmarks.block_shuffle_parquet``: 10% less time)."""
MAX_PIECES = 8
"""Pieces of a batch converted one by one (more are joined first), and live merged tables kept apart."""


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
                 tables: dict[int, Any], missing: np.ndarray, extras: dict[int, Any],
                 specs: tuple[Any, ...] = (), slots: np.ndarray | None = None) -> None:
        self._store, self._groups, self._uniq, self._inverse = store, groups, uniq, inverse
        self._segment, self._base, self._segments, self._tables = segment, base, segments, tables
        self._extras = extras
        self._specs, self._slots = specs, slots
        self.missing = missing

    @property
    def located(self) -> bool:
        """Whether the store describes its tables for a gatherer (see :meth:`locate`)."""
        return self._slots is not None

    def add(self, g: int, table: Any, extra: Any = None) -> None:
        """Row group ``g`` (one of ``missing``), decoded."""
        self._tables[g] = table
        self._extras[g] = extra

    def locate(self) -> tuple[tuple[Any, ...], np.ndarray]:
        """For a store made with ``spec_of``: ``(specs, slots)``, key ``i`` being its row of the
        table ``specs[slots[i]]`` describes (the row groups added included)."""
        assert self._slots is not None
        slots, specs = self._slots, self._specs
        if self._tables:  # the decoded ones: described after the held ones
            spec_of = self._store.spec_of
            assert spec_of is not None
            slots = slots.copy()
            extra: list[Any] = []
            for g, table in self._tables.items():
                slots[self._groups == g] = len(specs) + len(extra)
                extra.append(spec_of(table))
            specs = specs + tuple(extra)
        return specs, slots

    def extras(self) -> list[Any]:
        """Each key's row group's ``extra`` (see :meth:`RowGroupStore.put`), in key order."""
        extras = self._extras
        return [extras[g] for g in self._groups.tolist()]

    def distinct_extras(self) -> tuple[list[Any], np.ndarray]:
        """The ``extra`` of each distinct row group of the keys, and each key's index into them."""
        uniq, inverse = _unique(self._groups)
        extras = self._extras
        return [extras[g] for g in uniq.tolist()], np.ascontiguousarray(inverse, dtype=np.int64)

    def gather(self, rows: np.ndarray) -> tuple[list[Any], np.ndarray | None]:
        """Row ``rows[i]`` of row group ``groups[i]`` (the planned groups) for every ``i``, as
        Arrow record batches (``pieces``) and ``order``: the rows of the pieces, one after the
        other, are those of keys ``order[0], order[1], ...`` (``order`` None: keys in order).
        One piece per table the keys read (a merged table, or a row group held alone), taken
        from it in one call (or sliced, without a copy, where its rows are consecutive); more
        than :data:`MAX_PIECES` pieces are joined into one."""
        segment, base = self._segment, self._base
        if self._inverse is None:  # planned all in one merged table (the only one given): base is per key
            return [_take(self._segments[0], base + rows)], None
        inverse = self._inverse
        sources: list[Any] = list(self._segments)
        source_of = segment.copy()
        for j in np.flatnonzero(segment < 0).tolist():
            source_of[j] = len(sources)
            sources.append(self._tables[int(self._uniq[j])])
        at = base[inverse] + rows
        if len(sources) == 1:
            return [_take(sources[0], at)], None
        of_key = source_of[inverse]
        order = np.argsort(of_key, kind="stable")
        ordered = of_key[order]
        cuts = (np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist()
        at = at[order]
        pieces = [_take(sources[int(ordered[a])], at[a:b]) for a, b in zip([0, *cuts], [*cuts, len(ordered)],
                                                                              strict=True)]
        self._store.spent(len(pieces))
        if len(pieces) > MAX_PIECES:  # converting many small pieces costs more than one copy of them
            pieces = [pyarrow().concat_batches(pieces)]
        return pieces, order


def _take(table: Any, at: np.ndarray) -> Any:
    """Rows ``at`` of ``table``: a zero-copy slice where they are consecutive, else a take."""
    if len(at) and int(at[-1]) - int(at[0]) == len(at) - 1 and (len(at) == 1 or bool((np.diff(at) == 1).all())):
        return table.slice(int(at[0]), len(at))
    return table.take(_indices(at))


class RowGroupStore:
    """Arrow record batches of row groups ``0..groups-1``, evicted least recently used first once their
    bytes pass ``budget`` (a table costing more than the budget is not kept); thread-safe.

    With ``spec_of`` (a :meth:`~thresher.sources.formats.parquet.gather.Gatherer.spec`), each table
    is described once when put, batches are read with :meth:`Plan.locate` and a gatherer, and
    tables are never merged (a gather reads any number of tables in one call)."""

    def __init__(self, budget: int, groups: int, spec_of: Any = None) -> None:
        self.budget = budget
        self.spec_of = spec_of
        self._slot = np.full(groups, -1, dtype=np.int64)  # with spec_of: its spec's index in _specs
        self._specs: tuple[Any, ...] = ()  # replaced, never changed: plans keep the one they saw
        self._free = 0  # None entries in _specs
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
        self._segments: list[Any] = []  # merged tables (None: every row group in it evicted)
        self._seg_live: list[int] = []  # per segment: bytes of its row groups still held
        self._seg_dead: list[int] = []  # per segment: bytes of its row groups since evicted
        self._dead = 0  # all segments' dead bytes
        self._alone = 0  # bytes of the tables held alone (not merged)
        self._debt = 0  # extra take calls since the last merge, in TAKE_CALL_BYTES
        self._can_merge = spec_of is None
        self._lock = threading.Lock()

    def plan(self, groups: np.ndarray) -> Plan:
        """The row groups of a batch (one per key, int64): which are held and where (the keys
        of held ones counted as hits, each distinct missing one as a miss; all marked read)."""
        if self.spec_of is not None:
            return self._plan_located(groups)
        with self._lock:
            self._tick += 1
            self._used[groups] = self._tick
            segment = self._segment[groups]
            first = int(segment[0]) if len(groups) else -1
            if first >= 0 and bool((segment == first).all()):  # all in one merged table
                self.hits += len(groups)
                extras = self._extras_of(np.unique(groups).tolist()) if self._extras else {}
                return Plan(self, groups, groups, None, segment, self._base[groups], (self._segments[first],), {},
                            groups[:0], extras)
        uniq, inverse = _unique(groups)
        with self._lock:
            held = self._held[uniq]
            missing = uniq[~held]
            self.hits += int(held[inverse].sum())
            self.misses += len(missing)
            segment = self._segment[uniq]
            base = np.where(segment >= 0, self._base[uniq], 0)  # a table held alone starts at 0
            tables = {} if len(self._tables) == 0 or self.spec_of is not None else {
                g: self._tables[g] for g in uniq[held & (segment < 0)].tolist()}
            segments = tuple(self._segments)
            extras = self._extras_of(uniq[held].tolist()) if self._extras else {}
        return Plan(self, groups, uniq, inverse, segment, base, segments, tables, missing, extras)

    def _plan_located(self, groups: np.ndarray) -> Plan:
        """:meth:`plan` for a store with ``spec_of``: each key's slot, looked up without sorting."""
        with self._lock:
            self._tick += 1
            self._used[groups] = self._tick
            slots = self._slot[groups]
            absent = slots < 0
            missing = np.unique(groups[absent]) if absent.any() else groups[:0]
            self.hits += len(groups) - int(absent.sum()) if len(missing) else len(groups)
            self.misses += len(missing)
            extras = self._extras_of(np.unique(groups[~absent]).tolist()) if self._extras else {}
            specs = self._specs
        none = np.zeros(0, dtype=np.int64)
        return Plan(self, groups, none, None, none, none, (), {}, missing, extras, specs, slots)

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
        spec = self.spec_of(table) if self.spec_of is not None else None
        with self._lock:
            if self._held[g]:
                self._drop(g)
            self._tables[g] = table
            if self.spec_of is not None:
                self._slot[g] = len(self._specs)
                self._specs = (*self._specs, spec)
            self._alone += cost - extra_cost
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
        if self._slot[g] >= 0:
            self._unslot(g)
        s = int(self._segment[g])
        if s < 0:
            del self._tables[g]
            self._alone -= cost
            return
        self._segment[g] = -1
        self._seg_live[s] -= cost
        self._seg_dead[s] += cost
        self._dead += cost
        if self._seg_live[s] <= 0:  # nothing held reads it: freed (plans made before keep their reference)
            self._dead -= self._seg_dead[s]
            self._segments[s] = None
            self._seg_live[s] = self._seg_dead[s] = 0

    def _unslot(self, g: int) -> None:
        """Row group ``g``'s spec let go (its slot None); the specs renumbered once half are free."""
        i = int(self._slot[g])
        self._slot[g] = -1
        self._specs = (*self._specs[:i], None, *self._specs[i + 1:])
        self._free += 1
        if self._free > 16 and 2 * self._free > len(self._specs):
            held = np.flatnonzero(self._slot >= 0)
            self._specs = tuple(self._specs[int(i)] for i in self._slot[held].tolist())
            self._slot[held] = np.arange(len(held))
            self._free = 0

    # --- merging -----------------------------------------------------------------------

    def spent(self, pieces: int) -> None:
        """A gather took ``pieces`` pieces (one per table): each past the first counts toward a merge."""
        if pieces > 1:
            with self._lock:
                self._debt += (pieces - 1) * TAKE_CALL_BYTES

    def maybe_merge(self) -> None:
        """Merges the tables held alone into a new merged table once the extra take calls spent
        since the last merge would have paid for copying them; merges everything held again when
        the dead bytes pass half the budget, or the live merged tables grow many (see the
        module's docstring)."""
        with self._lock:
            if not self._can_merge:
                return
            live = sum(1 for t in self._segments if t is not None)
            if 2 * self._dead > self.budget or (live >= MAX_PIECES and self._debt >= self.size - self._xsize):
                self._merge(everything=True)
            elif self._alone and self._debt >= self._alone:
                self._merge(everything=False)

    def _merge(self, everything: bool) -> None:
        pa = pyarrow()
        held = self._held & (self._segment < 0) if not everything else self._held
        groups = np.flatnonzero(held).tolist()
        if not groups:
            return
        tables = [self._tables[g] if self._segment[g] < 0 else
                  self._segments[self._segment[g]].slice(int(self._base[g]), int(self._rows[g]))
                  for g in groups]
        first = 0 if everything else len(self._segments)
        made: list[Any] = []
        lives: list[int] = []
        segment_of = np.empty(len(groups), dtype=np.int64)
        base = np.empty(len(groups), dtype=np.int64)
        batch: list[Any] = []
        size = rows = live = 0
        try:
            for j, (g, t) in enumerate(zip(groups, tables, strict=True)):
                if batch and size + t.nbytes > SEGMENT_BYTES:
                    made.append(pa.concat_batches(batch))
                    lives.append(live)
                    batch, size, rows, live = [], 0, 0, 0
                segment_of[j], base[j] = first + len(made), rows
                batch.append(t)
                size += t.nbytes
                rows += t.num_rows
                live += int(self._cost[g] - self._xcost[g])
            made.append(pa.concat_batches(batch))
            lives.append(live)
        except (pa.ArrowException, TypeError, ValueError):
            self._can_merge = False  # tables that do not concatenate: keep taking from each
            return
        if everything:
            self._segments, self._seg_live, self._seg_dead, self._dead = made, lives, [0] * len(made), 0
        else:
            self._segments += made
            self._seg_live += lives
            self._seg_dead += [0] * len(made)
        for g in groups:
            self._tables.pop(g, None)
        self._alone = 0
        self._segment[groups] = segment_of
        self._base[groups] = base
        self._debt = 0
        if len(self._segments) > 4 * MAX_PIECES:  # many freed slots: number the live tables again
            self._renumber()

    def _renumber(self) -> None:
        keep = [i for i, t in enumerate(self._segments) if t is not None]
        new_of = np.full(len(self._segments), -1, dtype=np.int64)
        new_of[keep] = np.arange(len(keep))
        merged = self._segment >= 0
        self._segment[merged] = new_of[self._segment[merged]]
        self._segments = [self._segments[i] for i in keep]
        self._seg_live = [self._seg_live[i] for i in keep]
        self._seg_dead = [self._seg_dead[i] for i in keep]

    # --- what it holds -----------------------------------------------------------------

    def info(self) -> dict[str, int]:
        """``hits`` (keys read from held row groups), ``misses`` (row groups decoded: each
        distinct one a batch found missing), ``entries``, ``bytes`` (their Arrow bytes, and
        their extras' costs), ``merged`` (entries held in merged tables) and ``merged_tables``."""
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "entries": int(self._held.sum()),
                    "bytes": self.size, "merged": int((self._segment >= 0).sum()),
                    "merged_tables": sum(1 for t in self._segments if t is not None)}

    def __len__(self) -> int:
        return int(self._held.sum())

    def clear(self) -> None:
        with self._lock:
            self._held[:] = False
            self._cost[:] = 0
            self._segment[:] = -1
            self._tables.clear()
            self._extras.clear()
            self._segments, self._seg_live, self._seg_dead = [], [], []
            self._xcost[:] = 0
            self._slot[:] = -1
            self._specs, self._free = (), 0
            self.size = self._xsize = self._alone = self._dead = self._debt = 0
