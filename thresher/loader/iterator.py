"""DataLoaderIterator: batches in order, with a small state and O(1) restore."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np

from thresher._compat import as_state
from thresher.errors import TransformError
from thresher.loader.autotune import AutotuneReport
from thresher.loader.bad_records import BadRecords, DroppedRecord
from thresher.loader.batcher import Batcher
from thresher.loader.engine import Engine
from thresher.loader.producer import Producer
from thresher.loader.profiling.stats import LoaderStats, StatsRecorder
from thresher.loader.skips import SkipPlan, SkipRanges
from thresher.loader.state_types import LoaderState
from thresher.randomness.record_rng import RecordRng
from thresher.randomness.seeds import DOMAIN_BATCH, derive_seed
from thresher.transforms.operations import Plan

if TYPE_CHECKING:
    from thresher.samplers.index_sampler import IndexSampler

__all__ = ["DataLoaderIterator", "apply_batch_ops"]


def apply_batch_ops(plan: Plan, sampler: IndexSampler, batch: Any, first: int, end: int,
                    rng: RecordRng, timed: Callable[[int, int, int], None] | None = None) -> tuple[Any, bool]:
    """Runs the operations after the Batch on the batch of positions [first, end).

    Returns ``(batch, keep)``; ``keep`` is False when a batch-level Filter dropped it.
    A batch-level RandomMap is seeded from the global position of the batch's first
    element, so it too is a pure function of position. ``timed(i, started, ended)``,
    when given, is called with ``time.monotonic_ns()`` readings around operation i.
    """
    clock = time.monotonic_ns
    ctx = _BatchContext(sampler, first, rng)
    for i, op in enumerate(plan.batch_ops):
        started = clock() if timed is not None else 0
        try:
            batch, keep = op.apply_batch(batch, ctx)
        except Exception as e:
            raise TransformError(
                f"operation {op.index} {op.name} failed on the batch of positions [{first}, {end}): "
                f"{type(e).__name__}: {e}"
            ) from e
        if timed is not None:
            timed(i, started, clock())
        if not keep:
            return batch, False
    return batch, True


class _BatchContext:
    """The OpContext of one batch: its generator is seeded from its first global position."""

    __slots__ = ("_first", "_rng", "_sampler")

    def __init__(self, sampler: IndexSampler, first: int, rng: RecordRng) -> None:
        self._sampler, self._first, self._rng = sampler, first, rng

    def record_rngs(self, salt: int) -> Iterator[np.random.Generator]:
        raise TypeError("an operation after the Batch has no per-record generators")

    def global_positions(self) -> np.ndarray:
        raise TypeError("an operation after the Batch has no per-record positions")

    def batch_rng(self, salt: int) -> np.random.Generator:
        g = int(self._sampler.to_global(np.array([self._first]))[0])
        return self._rng.seeded(derive_seed(self._sampler.seed or 0, DOMAIN_BATCH, g), salt)


class DataLoaderIterator:
    """Iterates over a DataLoader's batches; ``get_state``/``set_state`` resume exactly.

    Created by ``iter(loader)``. Also a context manager: leaving the ``with`` block
    closes it (and stops any worker processes). ``stats()`` tells where the time
    went (see thresher.loader.profiling.stats).

    Example:
        >>> import thresher as th
        >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 6), th.IndexSampler(6), [th.Batch(2)])
        >>> it = iter(loader)
        >>> next(it).tolist()
        [0, 1]
        >>> state = it.get_state()
        >>> it2 = iter(loader)
        >>> it2.set_state(state)
        >>> next(it2).tolist()
        [2, 3]
    """

    def __init__(self, engine: Engine, position: int = 0, *, decision: AutotuneReport | None = None,
                 decided: Callable[[AutotuneReport], None] | None = None) -> None:
        self._engine = engine
        self._plan = engine.processor.plan
        self._decision = decision  # what worker_count="auto" chose, once known
        self._decided = decided
        self._producer: Producer | None = None
        self._rng: RecordRng | None = None
        self._closed = False
        self._stats = StatsRecorder(engine.worker_count if isinstance(engine.worker_count, int) else 0,
                                    engine.stage_order)
        self._batch_stages = engine.processor.batch_stages
        self._skips = SkipRanges()  # steps never produced (set_state(..., skip_steps=...))
        self._skip_plan: SkipPlan | None = None
        self._skip_at: int | None = None  # the position where the next skipped step starts
        processor = engine.processor
        self._bad = BadRecords(processor.max_skipped) if processor.skip_errors else None
        self._reset(position)

    # -- life cycle ---------------------------------------------------------------------
    def _reset(self, position: int) -> None:
        if self._producer is not None:
            self._producer.close()
            self._producer = None
        if self._skip_plan is not None:
            position = self._skip_plan.resume_at(position)
            end = self._engine.processor.sampler.local_length
            if end is not None:
                position = min(position, end)  # skips past the end of a finite stream end it
            self._skip_at = self._skip_plan.next_start(position)
        self._state_position = position
        self._batcher = Batcher(self._plan.batch, self._stats)
        self._exhausted = False
        self._closed = False
        self._producer = self._engine.producer(position, self._stats, self._decision, self._on_decision)

    def _on_decision(self, report: AutotuneReport) -> None:
        self._decision = report
        if self._decided is not None:
            self._decided(report)

    def close(self) -> None:
        """Stops the producer (and its workers); further ``next`` raises StopIteration.

        Batches computed ahead and not yet returned are dropped (their memory freed).
        """
        self._closed = True
        if self._batcher.pending:
            self._batcher = Batcher(self._plan.batch, self._stats)
        if self._producer is not None:
            producer, self._producer = self._producer, None
            producer.close()

    def __enter__(self) -> DataLoaderIterator:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # -- iteration --------------------------------------------------------------------------
    def __iter__(self) -> DataLoaderIterator:
        return self

    def __next__(self) -> Any:
        stats = self._stats
        start = stats.enter()
        try:
            return self._next()
        finally:
            stats.exit(start)

    def _next(self) -> Any:
        if self._closed:
            raise StopIteration
        if self._skip_at is not None and self._state_position >= self._skip_at:
            self._reset(self._state_position)  # jump over skipped steps: none of their records is read
        batcher = self._batcher
        while True:
            item = batcher.pop(final=self._exhausted)
            if item is not None:
                out, end, first, count = item
                keep = True
                if self._plan.batch_ops:
                    out, keep = self._apply_batch_ops(out, first, end)
                self._state_position = end
                if keep:
                    stats = self._stats
                    stats.batches += 1
                    stats.records += count
                    return out
                continue
            if self._exhausted:
                self.close()
                raise StopIteration
            assert self._producer is not None
            try:
                chunk = self._producer.next_chunk()
            except BaseException:
                self.close()
                raise
            if chunk is None:
                self._exhausted = True
            else:
                if self._bad is not None:
                    self._stats.skipped_records += self._bad.add(chunk.start, chunk.stop, chunk.dropped)
                batcher.add(chunk)

    def _apply_batch_ops(self, batch: Any, first: int, end: int) -> tuple[Any, bool]:
        if self._rng is None:
            self._rng = RecordRng()
        stats, labels = self._stats, self._batch_stages
        return apply_batch_ops(self._plan, self._engine.processor.sampler, batch, first, end, self._rng,
                               lambda i, started, ended: stats.stage(labels[i], started, ended))

    def stats(self, reset: bool = False) -> LoaderStats:
        """Where the time went since the iterator was created (or since the last reset).

        Per-stage seconds (read, each operation, batch, transfer from workers, waiting),
        the time the training loop spent inside ``next()`` and outside it, records/s
        and a bottleneck hint; ``print(it.stats())`` shows a table. ``reset=True``
        starts a new measurement (e.g. after warm-up) once this one is taken.

        Example:
            >>> import thresher as th
            >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 64), th.IndexSampler(64),
            ...                        [th.Batch(8)])
            >>> it = iter(loader)
            >>> _ = [next(it) for _ in range(4)]
            >>> s = it.stats()
            >>> s.batches, s.records, s.hint.split(":")[0] in ("input-bound", "balanced", "compute-bound")
            (4, 32, True)
        """
        out = self._stats.snapshot()
        if reset:
            self._stats.reset()
        return out

    # -- state ------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """A small JSON-serialisable dict: where the next batch starts, and what stream it is.

        ``position`` is the first position of this process's stream not yet in an
        emitted batch. Nothing else is needed to resume: restore cost is O(1).
        """
        state = self._engine.state_at(self._state_position)
        if self._skips:
            state = replace(state, extensions=replace(state.extensions, skips=self._skips))
        return state.to_json()

    def set_state(self, state: dict[str, Any], *, allow_approximate: bool = False,
                  skip_steps: range | None = None) -> None:
        """Continues with exactly the batch that followed when ``state`` was taken.

        Raises InvalidStateError for a malformed state, IncompatibleStateError for a
        state of another stream (naming what differs), GeometryError for a state of
        another shard geometry that cannot be converted exactly. A state from any
        worker count restores under any other.

        ``allow_approximate=True`` opts into a documented approximate restart where
        an exact one is impossible (see ``thresher.loader.state.restore_position`` and
        ``slowest_state``): no element is skipped, some are served again.

        ``skip_steps=range(a, b)``: steps a..b-1 (counted as in the run without skips)
        are never produced; every other step is the batch the run without skips makes.
        The skips are kept in the state (see docs/forensics.md).
        """
        self.restore(LoaderState.from_json(as_state(state, "set_state")),  # Grain-style bytes too
                     allow_approximate=allow_approximate, skip_steps=skip_steps)

    def restore(self, state: LoaderState, *, allow_approximate: bool = False,
                skip_steps: range | None = None) -> None:
        """``set_state`` for a parsed state (``LoaderState.from_json``)."""
        from thresher.forensics.steps import skip_plan, steps_as_skips

        position = self._engine.resume_position(state, allow_approximate=allow_approximate)
        skips = state.extensions.skips
        if skip_steps is not None:
            skips = skips.union(steps_as_skips(self._engine.processor, skip_steps))
        self._skip_plan = skip_plan(self._engine.processor, skips)
        self._skips, self._skip_at = skips, None
        self._reset(position)

    @property
    def engine(self) -> Engine:
        """The engine this iterator runs (shared with its DataLoader)."""
        return self._engine

    @property
    def skipped_records(self) -> list[DroppedRecord]:
        """The records dropped by ``errors="skip"`` so far, in stream order (empty otherwise)."""
        return list(self._bad.dropped) if self._bad is not None else []

    @property
    def skips(self) -> SkipRanges:
        """The global positions of the steps this iterator skips (empty: none)."""
        return self._skips

    @property
    def position(self) -> int:
        """The state position (see ``get_state``)."""
        return self._state_position
