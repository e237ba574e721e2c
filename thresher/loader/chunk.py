"""The pure function at the heart of the loader: positions -> processed elements.

``ChunkProcessor(start, stop)`` reads the records of positions [start, stop) of this
process's stream and runs the per-record operations on them. Its result depends on
nothing but its arguments, which is why it can run in any worker, in any order.

Each call also notes when each stage ended (``Chunk.marks``: a few clock readings
per chunk, never per record), for ``DataLoaderIterator.stats()`` and tracing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from thresher.errors import TransformError
from thresher.loader.bad_records import DroppedRecord, apply_dropping, read_dropping
from thresher.loader.exclusions import Exclusions
from thresher.randomness.record_rng import RecordRng
from thresher.samplers.index_sampler import IndexSampler
from thresher.sources.protocol import read_many
from thresher.transforms.kinds import ElementFailure, Operation
from thresher.transforms.operations import Plan

SUBCHUNK = 16
"""Elements taken through all record operations at a time once they prove heavy (see
``ChunkProcessor._run_record_ops``)."""
HEAVY_NS = 20_000
"""Operations that take this long a record (all of them together) run part by part."""

__all__ = ["Chunk", "ChunkProcessor", "Reading", "stage_labels"]

SAMPLE, READ = "sample", "read"


@dataclass
class Chunk:
    """The surviving elements of positions [start, stop), in position order.

    A worker may send ``batches`` instead of ``elements``: the chunk's batches, already
    stacked (consecutive groups of ``batch_size`` positions from ``start``; the last one
    partial, or left out with ``drop_remainder``). Only when no Filter comes before the
    Batch and the chunk is a whole number of batches, so they are the very batches the
    main process would have formed.

    ``marks`` are ``time.monotonic_ns()`` readings: the start, then the end of each
    stage of ``ChunkProcessor.stages`` (sample, read, each per-record operation).
    """

    start: int
    stop: int
    positions: np.ndarray  # int64, the positions of ``elements`` (filtered ones removed)
    elements: list[Any]
    batches: list[Any] | None = field(default=None)
    marks: list[int] | None = field(default=None, repr=False, compare=False)
    dropped: list[DroppedRecord] | None = field(default=None)  # errors="skip": the records dropped


@dataclass
class Reading:
    """A chunk between its two halves: positions sampled, records (being) read.

    ``marks`` are the chunk's first marks (start, end of sampling, end of reading);
    ``elements`` is None until the records are read.
    """

    positions: np.ndarray
    globals_: np.ndarray
    keys: np.ndarray
    key_list: list[int]
    marks: list[int]
    elements: list[Any] | None = None


def stage_labels(names: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Unique stage labels for operation names: a repeated name gets its index.

    Example:
        >>> from thresher.loader.chunk import stage_labels
        >>> stage_labels(["Map(decode)", "Map(f)", "Map(f)"])
        ('Map(decode)', 'Map(f) #1', 'Map(f) #2')
    """
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return tuple(n if counts[n] == 1 else f"{n} #{i}" for i, n in enumerate(names))


def _span(positions: np.ndarray) -> str:
    if positions.size == 0:
        return "[]"
    return f"[{int(positions[0])}, {int(positions[-1]) + 1})" if positions.size > 1 else f"[{int(positions[0])}]"


def _context(op: Operation, i: int, positions: np.ndarray, keys: np.ndarray, globals_: np.ndarray) -> str:
    return (f"operation {op.index} {op.name} failed on record key {int(keys[i])} at position "
            f"{int(positions[i])} (global position {int(globals_[i])})")


class ChunkProcessor:
    """Reads and transforms a range of positions; a pure function of the range.

    Example:
        >>> import thresher as th
        >>> from thresher.loader.chunk import ChunkProcessor
        >>> from thresher.transforms import plan_operations
        >>> proc = ChunkProcessor(th.sources.RangeDataSource(0, 10), th.IndexSampler(10),
        ...                       plan_operations([lambda x: x * 10]))
        >>> proc(2, 5).elements
        [20, 30, 40]
    """

    def __init__(self, source: Any, sampler: IndexSampler, plan: Plan, *, skip_errors: bool = False,
                 max_skipped: int | float | None = None, exclusions: Exclusions | None = None) -> None:
        #: Blocked records and positions consumed elsewhere: dropped before reading (thresher.loader.exclusions).
        self.exclusions = exclusions if exclusions else None
        #: errors="skip": a record whose read or operation fails is dropped (thresher.loader.bad_records).
        self.skip_errors = skip_errors
        self.max_skipped = max_skipped
        self.source = source
        self.sampler = sampler
        self.plan = plan
        self._rng: RecordRng | None = None
        labels = stage_labels([op.name for op in plan.record_ops + plan.batch_ops])
        #: The stages of a chunk, in the order of ``Chunk.marks``.
        self.stages: tuple[str, ...] = (SAMPLE, READ, *labels[:len(plan.record_ops)])
        #: The labels of the operations after the Batch (they run in the main process).
        self.batch_stages: tuple[str, ...] = labels[len(plan.record_ops):]

    def with_exclusions(self, exclusions: Exclusions) -> ChunkProcessor:
        """The same processor, leaving out ``exclusions`` (replacing any it had)."""
        return ChunkProcessor(self.source, self.sampler, self.plan, skip_errors=self.skip_errors,
                              max_skipped=self.max_skipped, exclusions=exclusions)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_rng"] = None
        return state

    def __call__(self, start: int, stop: int) -> Chunk:
        return self.process(np.arange(start, stop, dtype=np.int64), start, stop)

    def process(self, positions: np.ndarray, start: int = 0, stop: int = 0) -> Chunk:
        """Reads and transforms the given positions (any order, any gaps): also pure.

        ``start``/``stop`` only label the returned Chunk. Random-access views (the
        Dataset front-end) read arbitrary positions through this.
        """
        reading = self.sample(positions)
        if self.skip_errors:
            return self.transform(reading, start, stop)
        reading.elements = self.read(reading, reading.key_list)
        reading.marks.append(time.monotonic_ns())
        return self.transform(reading, start, stop)

    def sample(self, positions: np.ndarray) -> Reading:
        """The first half of ``process``: the record keys of ``positions`` (nothing read yet)."""
        started = time.monotonic_ns()
        globals_ = self.sampler.to_global(positions)
        keys = self.sampler.keys(globals_)
        if self.exclusions is not None:
            keep = self.exclusions.keep(globals_, keys)
            if keep is not None:
                positions, globals_, keys = positions[keep], globals_[keep], keys[keep]
        return Reading(positions, globals_, keys, keys.tolist(), [started, time.monotonic_ns()])

    def read(self, reading: Reading, keys: list[int]) -> list[Any]:
        """Reads ``keys`` (all or a contiguous slice of ``reading.key_list``) from the source.

        An exception gets a note naming the chunk's positions and the keys (any thread).
        """
        try:
            return read_many(self.source, keys)
        except Exception as e:
            note = (f"while reading positions {_span(reading.positions)} (record keys {keys[:8]}"
                    f"{'...' if len(keys) > 8 else ''}) of {self.source!r}")
            if hasattr(e, "add_note"):
                e.add_note(note)
            raise

    def transform(self, reading: Reading, start: int = 0, stop: int = 0) -> Chunk:
        """The second half of ``process``: the per-record operations on read records.

        Under ``errors="skip"`` the records are read here, one by one where a read fails
        (a read ahead would raise for the whole chunk): ``reading.elements`` is not used.
        """
        if self.skip_errors:
            return self._process_dropping(reading.positions, start, stop, reading.globals_, reading.keys,
                                          reading.key_list, reading.marks[:2])
        positions, keys, globals_, marks = reading.positions, reading.keys, reading.globals_, reading.marks
        elements = reading.elements
        assert elements is not None
        elements, alive = self._run_record_ops(elements, positions, keys, globals_, marks)
        kept = positions if alive is None else positions[alive]
        return Chunk(start, stop, kept, elements, marks=marks)

    def _run_record_ops(self, elements: list[Any], positions: np.ndarray, keys: np.ndarray,
                        globals_: np.ndarray, marks: list[int]) -> tuple[list[Any], np.ndarray | None]:
        """The record operations on a chunk's elements: the elements left and the indices into
        the chunk of those kept (None: all); one mark per operation is appended to ``marks``.

        The elements go through the operations part by part (see :func:`_in_parts`): what one
        operation makes for the next (a decoded image) lives for a part, not for the chunk.
        Same elements and seeds (per global position) either way; a mark is the read's mark
        plus the operations' summed times."""
        clock = time.monotonic_ns
        ops = self.plan.record_ops
        spent = [0] * len(ops)
        out: list[Any] = []
        alive_parts: list[np.ndarray] = []
        filtered = False

        def run_part(lo: int, hi: int) -> int:
            nonlocal filtered
            part = elements[lo:hi]
            ctx = _RecordContext(self, globals_[lo:hi])
            began = t = clock()
            for k, op in enumerate(ops):
                try:
                    part, kept_idx = op.apply_records(part, ctx)
                except ElementFailure as f:
                    where = np.arange(lo, hi) if ctx.alive is None else lo + ctx.alive
                    raise self._fail(op, f.index, where, positions, keys, globals_, f.error) from f.error
                if kept_idx is not None:
                    idx = np.asarray(kept_idx, dtype=np.int64)
                    ctx.alive = idx if ctx.alive is None else ctx.alive[idx]
                    filtered = True
                now = clock()
                spent[k] += now - t
                t = now
            out.extend(part)
            alive_parts.append(np.arange(lo, hi) if ctx.alive is None else lo + ctx.alive)
            return t - began

        _in_parts(len(elements), len(ops), run_part)
        _mark_summed(marks, spent)
        return out, (np.concatenate(alive_parts) if filtered else None)

    def _process_dropping(self, positions: np.ndarray, start: int, stop: int, globals_: np.ndarray,
                          keys: np.ndarray, key_list: list[int], marks: list[int]) -> Chunk:
        """``process`` under errors="skip": failing records are dropped and listed in the Chunk.

        The record operations run part by part as in :meth:`_run_record_ops`; an element an
        operation fails on is dropped and the operation runs again on the rest of its part."""
        clock = time.monotonic_ns
        dropped: list[DroppedRecord] = []
        elements, alive = read_dropping(self.source, key_list, positions, keys, globals_, dropped)
        marks.append(clock())
        ops = self.plan.record_ops
        of_chunk = np.arange(len(positions), dtype=np.int64) if alive is None else alive  # elements' indices
        spent = [0] * len(ops)
        out: list[Any] = []
        kept_parts: list[np.ndarray] = []

        def run_part(lo: int, hi: int) -> int:
            part, at = elements[lo:hi], of_chunk[lo:hi]
            part_positions, part_keys, part_globals = positions[at], keys[at], globals_[at]
            ctx = _RecordContext(self, part_globals)
            began = t = clock()
            for k, op in enumerate(ops):
                part = apply_dropping(op, part, ctx, self.source, part_positions, part_keys, part_globals, dropped)
                now = clock()
                spent[k] += now - t
                t = now
            out.extend(part)
            kept_parts.append(at if ctx.alive is None else at[ctx.alive])
            return t - began

        _in_parts(len(elements), len(ops), run_part)
        _mark_summed(marks, spent)
        kept = positions[np.concatenate(kept_parts)]
        dropped.sort(key=lambda d: d.position)
        return Chunk(start, stop, kept, out, marks=marks, dropped=dropped or None)

    @staticmethod
    def _fail(op: Operation, j: int, alive: np.ndarray | None, positions: np.ndarray, keys: np.ndarray,
              globals_: np.ndarray, e: Exception) -> TransformError:
        """The TransformError for element j of the current list (alive maps it to the chunk)."""
        i = j if alive is None else int(alive[j])
        return TransformError(f"{_context(op, i, positions, keys, globals_)}: {type(e).__name__}: {e}",
                              record_key=int(keys[i]), position=int(positions[i]))

    def record_rng(self) -> RecordRng:
        """The processor's reusable generator (made on first use; not pickled)."""
        if self._rng is None:
            self._rng = RecordRng()
        return self._rng


def _in_parts(n: int, ops: int, run_part: Callable[[int, int], int]) -> None:
    """Calls ``run_part(lo, hi)`` over elements ``[0, n)`` in order, part by part (it returns the
    nanoseconds the part took in the operations).

    With two operations or more and more than ``2 * SUBCHUNK`` elements, a first part of
    ``SUBCHUNK`` is measured: at ``HEAVY_NS`` a record or more, the rest follows in parts of
    ``SUBCHUNK``, else in one part. Otherwise the whole is one part (an empty one included).

    Example:
        >>> seen = []
        >>> _in_parts(40, 2, lambda lo, hi: seen.append((lo, hi)) or 0)  # light: the rest at once
        >>> seen
        [(0, 16), (16, 40)]
    """
    size = SUBCHUNK if ops >= 2 and n > 2 * SUBCHUNK else n
    lo = 0
    while True:
        hi = min(n, lo + size)
        took = run_part(lo, hi)
        if hi >= n:
            return
        if lo == 0 and took < HEAVY_NS * (hi - lo):
            size = n
        lo = hi


def _mark_summed(marks: list[int], spent: list[int]) -> None:
    """One mark per operation: the last mark plus the operations' times so far."""
    at = marks[-1]
    for d in spent:
        at += d
        marks.append(at)


class _RecordContext:
    """The OpContext of one chunk: per-record generators for the surviving elements."""

    __slots__ = ("_globals", "_processor", "_seeds", "alive")

    def __init__(self, processor: ChunkProcessor, globals_: np.ndarray) -> None:
        self._processor = processor
        self._globals = globals_
        self._seeds: np.ndarray | None = None
        self.alive: np.ndarray | None = None  # indices into the chunk of the surviving elements

    def record_rngs(self, salt: int) -> Iterator[np.random.Generator]:
        if self._seeds is None:
            self._seeds = self._processor.sampler.rng_seeds(self._globals)
        seeds = self._seeds if self.alive is None else self._seeds[self.alive]
        return self._processor.record_rng().seeded_many(seeds, salt)

    def batch_rng(self, salt: int) -> np.random.Generator:
        raise TypeError("a per-record operation has no batch generator")

    def global_positions(self) -> np.ndarray:
        return self._globals if self.alive is None else self._globals[self.alive]
