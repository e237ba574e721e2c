"""DataLoaderIterator: batches in order, with a small state and O(1) restore."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np

from thresher._validate import user_path
from thresher.errors import TransformError
from thresher.loader.autotune import AutotuneReport
from thresher.loader.bad_records import BadRecords, DroppedRecord
from thresher.loader.batcher import Batcher
from thresher.loader.engine import Engine
from thresher.loader.exclusions import Consumed, Exclusions, RecordKeys, record_blocklist
from thresher.loader.ledger import LedgerWriter
from thresher.loader.producers.base import Producer
from thresher.loader.profiling.stats import LoaderStats, StatsRecorder
from thresher.loader.skips import SkipPlan, SkipRanges
from thresher.loader.state import continued_stream
from thresher.loader.state_input import as_state
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
        self._base_engine = engine  # without the exclusions a restored state adds
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
        self._ledger: LedgerWriter | None = None  # the delivery ledger (thresher.loader.ledger), if any
        self._ledger_dir: str | None = engine.ledger
        self._ledger_begun = False  # its begin line is written by the first next() or restore
        self._merged_from: Consumed | None = None  # the merged state's exclusions, when restored from one
        #: Fields a wrapper adds to the ledger's begin lines (a packed Dataset: the rows it resumes at).
        self.ledger_fields: dict[str, Any] = {}
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
        self._ledger_from = position  # the ledger's next step starts here (jumps consume nothing)
        self._batcher = self._new_batcher()
        self._exhausted = False
        self._closed = False
        # The producer (and its workers) starts with the first next(): a set_state right after
        # iter() (a restore) then starts the workers once, at the restored position.

    def _new_batcher(self) -> Batcher:
        # With exclusions and no Filter before the Batch, a batch stays its step's positions (one
        # short of each record left out) so that every other batch is unchanged.
        by_range = self._engine.processor.exclusions is not None and not self._plan.filter_before_batch
        return Batcher(self._plan.batch, self._stats, by_range=by_range)

    def _on_decision(self, report: AutotuneReport) -> None:
        self._decision = report
        if self._decided is not None:
            self._decided(report)

    def close(self) -> None:
        """Stops the producer (and its workers); further ``next`` raises StopIteration.

        Batches computed ahead and not yet returned are dropped (their memory freed).
        """
        self._stop()
        if self._ledger is not None:
            ledger, self._ledger = self._ledger, None
            ledger.close()

    def _stop(self) -> None:
        """Stops the producer; the ledger stays open (a packed Dataset notes its last steps after the end)."""
        self._closed = True
        if self._batcher.pending:
            self._batcher = self._new_batcher()
        if self._producer is not None:
            producer, self._producer = self._producer, None
            producer.close()

    def __enter__(self) -> DataLoaderIterator:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:
        # Not contextlib.suppress: at interpreter exit this may run after the module's
        # globals are cleared (contextlib is None then); builtins stay.
        try:  # noqa: SIM105
            self.close()
        except Exception:
            pass

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
        if self._ledger_dir is not None and not self._ledger_begun:
            self._begin_ledger()
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
                    if self._ledger is not None:
                        self._ledger.step(self._ledger_from, end, count)
                        self._ledger_from = end
                    return out
                continue
            if self._exhausted:
                if self._ledger is not None:
                    stop = self._engine.processor.sampler.local_length
                    self._ledger.end(self._ledger_from, self._ledger_from if stop is None else stop)
                self._stop()
                raise StopIteration
            try:
                if self._producer is None:
                    self._producer = self._engine.producer(self._state_position, self._stats, self._decision,
                                                           self._on_decision)
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
        self.sync_ledger()
        state = self._engine.state_at(self._state_position)
        ex = self._engine.processor.exclusions
        if self._skips or ex is not None:
            records, consumed = (ex.records, ex.consumed) if ex is not None else (SkipRanges(), None)
            state = replace(state, extensions=replace(state.extensions, skips=self._skips, skip_records=records,
                                                      consumed=consumed))
        return state.to_json()

    def state_at(self, position: int) -> LoaderState:
        """The state of this iterator's stream at ``position`` (a front end adds its extensions to it).

        It is the loader's, unless a restore with ``operations_changed=True`` made this iterator
        continue a stream under other operations: its states record that.
        """
        return self._engine.state_at(position)

    def set_state(self, state: dict[str, Any], *, allow_approximate: bool = False,
                  skip_steps: range | None = None, skip_records: RecordKeys | None = None,
                  operations_changed: bool = False) -> None:
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

        ``skip_records``: record keys (or the path of a file of keys, one per line) that
        are never delivered, added to those of the state and of the DataLoader. Where
        no Filter comes before the Batch, the batch of a step holding such a record is
        formed from the step's other elements, and every other batch is unchanged; with
        a Filter before the Batch, the record is left out as the Filter leaves elements out.

        A state merged by ``thresher.merge_states`` restores exactly on any number of
        processes: every element not delivered before it is delivered once (docs/forensics.md).

        ``operations_changed=True``: the state was saved by this pipeline with other per-record
        operations (an augmentation added, a decode function fixed), which is otherwise refused.
        The positions and the sampler are kept and this loader's operations apply from the next
        record on; the states saved from now on record the change (``stream.replaced_operations``,
        part of the fingerprint) and restore into this loader without the flag. See docs/state.md.
        """
        self.restore(LoaderState.from_json(as_state(state, "set_state")),  # Grain-style bytes too
                     allow_approximate=allow_approximate, skip_steps=skip_steps, skip_records=skip_records,
                     operations_changed=operations_changed)

    def restore(self, state: LoaderState, *, allow_approximate: bool = False,
                skip_steps: range | None = None, skip_records: RecordKeys | None = None,
                operations_changed: bool = False) -> None:
        """``set_state`` for a parsed state (``LoaderState.from_json``)."""
        from thresher.loader.steps import skip_plan, steps_as_skips

        base = self._base_engine
        own = base.processor.exclusions
        records = (own.records if own is not None else SkipRanges()).union(state.extensions.skip_records)
        if skip_records is not None:
            records = records.union(record_blocklist(skip_records, base.processor.sampler.num_records))
        consumed = state.extensions.consumed
        engine = base.with_exclusions(Exclusions(records, None if consumed is None else consumed.unmerged()))
        stream = continued_stream(state, base.stream, operations_changed)
        if stream != engine.stream:  # the operations changed (now or before this state): keep the record
            engine, state = replace(engine, stream=stream), state.adopted_by(stream)
        position = engine.resume_position(state, allow_approximate=allow_approximate)
        if self._producer is not None:
            self._producer.close()
            self._producer = None
        self._engine = engine
        self._merged_from = consumed if consumed is not None and consumed.merged else None
        skips = state.extensions.skips
        if skip_steps is not None:
            skips = skips.union(steps_as_skips(self._engine.processor, skip_steps))
        self._skip_plan = skip_plan(self._engine.processor, skips)
        self._skips, self._skip_at = skips, None
        self._reset(position)
        if self._ledger_dir is not None:
            self._begin_ledger()

    def ledger(self, directory: str | os.PathLike[str]) -> None:
        """Appends this process's deliveries to ``directory/process-<i>.ledger`` from now on.

        One line per step (the positions it consumed), a line at each start and
        restore, synced to disk by ``get_state``; ``thresher audit DIR`` (or
        ``thresher.forensics.audit``) then checks that every record was delivered exactly
        once across restarts and host changes (see thresher.loader.ledger).

        Example:
            >>> import tempfile, thresher as th
            >>> d = tempfile.mkdtemp()
            >>> it = iter(th.DataLoader(th.sources.RangeDataSource(0, 8), th.IndexSampler(8), [th.Batch(4)]))
            >>> it.ledger(d)
            >>> _ = list(it)
            >>> th.forensics.audit(d).ok
            True
        """
        if self._ledger is not None:  # another directory from now on
            ledger, self._ledger = self._ledger, None
            ledger.close()
        self._ledger_dir = user_path(directory)
        self._ledger_begun = False

    def _begin_ledger(self) -> None:
        """Opens the ledger if needed and writes a begin line: where this iterator (re)starts, and how."""
        assert self._ledger_dir is not None
        if self._ledger is None:
            self._ledger = LedgerWriter(self._ledger_dir, self._engine.geometry.shard_index)
        self._ledger_begun = True
        self._ledger_from = self._state_position  # a ledger started mid-run covers what follows only
        engine = self._engine
        ex = engine.processor.exclusions
        consumed = ex.consumed if ex is not None else None
        merged = self._merged_from
        geometry = engine.geometry
        self._ledger.begin({
            "stream": engine.stream.to_json(), "fingerprint": engine.stream.fingerprint,
            "shards": geometry.shard_count, "block": geometry.block_size, "index": geometry.shard_index,
            "at": self._state_position, "base": Consumed.digest(consumed),
            "consumed": consumed.to_json() if consumed is not None else None,
            "skips": self._skips.to_json(), "blocked": ex.records.to_json() if ex is not None else [],
            "merged": None if merged is None else {"parent": merged.parent, "layer": merged.layers[-1].to_json()},
            **self.ledger_fields,
        })

    def sync_ledger(self) -> None:
        """A checkpoint: the ledger's lines so far are made durable (its begin line written if not yet)."""
        if self._ledger_dir is not None and not self._ledger_begun:
            self._begin_ledger()
        if self._ledger is not None:
            self._ledger.sync()

    @property
    def ledger_writer(self) -> LedgerWriter | None:
        """The open delivery ledger (None before the first step or without one)."""
        return self._ledger

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
