"""Iterating a Dataset: the engine's iterator, plus what a mixture or packing adds to the state.

The state is the engine's (``position``, the fingerprint of the chain as written,
the shard geometry) with, under ``"dataset"``:

- ``"mix"``: ``{"weights", "origin", "offsets"}`` when the last stage reads a
  mixture in order: the weights it was saved under and the segment it is in (see
  ``thresher.dataset.mix``). That is what lets ``set_state(state, reweight=True)``
  continue every component where it stopped under new weights.
- ``"pack"``: ``{"rows": r}``: ``position`` is then the window being emitted and
  ``r`` how many of its rows were emitted; restoring re-packs that one window.

Example:
    >>> import thresher as th
    >>> ds = th.Dataset.range(10).shuffle(seed=3).batch(4)
    >>> it = iter(ds)
    >>> first = next(it).tolist()
    >>> state = it.get_state()
    >>> it2 = iter(ds)
    >>> it2.set_state(state)
    >>> next(it2).tolist() == next(it).tolist()
    True
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, Protocol

import numpy as np

from thresher._validate import user_path
from thresher.dataset.compile import Compiled
from thresher.dataset.hand_over import HandOver
from thresher.dataset.mix import MixSchedule, MixSegment
from thresher.dataset.packing import PackedBlock, PackingStats, PackRows
from thresher.dataset.rebatch import run_batch_maps
from thresher.errors import ConfigError, GeometryError, IncompatibleStateError, InvalidStateError
from thresher.loader.iterator import DataLoaderIterator
from thresher.loader.profiling.stats import LoaderStats
from thresher.loader.state_input import as_state
from thresher.loader.state_types import Extensions, LoaderState

__all__ = ["CompilableChain", "DatasetIterator", "PackIterator"]


class CompilableChain(Protocol):
    """What an iterator asks of the chain it iterates (``thresher.Dataset`` is one)."""

    def compile(self, *, mix_segment: tuple[int, list[int]] | None = None) -> Compiled: ...

    def with_mix_weights(self, weights: Sequence[float]) -> CompilableChain: ...

    def fingerprint(self) -> str: ...

_HAND_OVER_DEPTH = 2  # batches a packed iterator with workers keeps ready


class DatasetIterator:
    """Iterates a compiled Dataset; ``get_state``/``set_state`` resume exactly.

    Created by ``iter(dataset)``; also a context manager (closing stops workers).
    The engine's iterator is made when first needed, so that ``set_state`` can pick
    the pipeline (a mixture's segment) and the position before it exists.
    """

    def __init__(self, dataset: CompilableChain, compiled: Compiled) -> None:
        self._dataset = dataset
        self._compiled = compiled
        self._engine_it: DataLoaderIterator | None = None
        self._ledger_dir: str | None = None
        self._ledger_fields: dict[str, Any] = {}  # added to the ledger's begin lines (shared with the engine's)

    @property
    def _it(self) -> DataLoaderIterator:
        """The engine's iterator (at position 0 when made here)."""
        if self._engine_it is None:
            self._engine_it = self._adopt(self._compiled.loader.iterator_at(0))
        return self._engine_it

    def _adopt(self, it: DataLoaderIterator) -> DataLoaderIterator:
        """A new engine iterator, writing this iterator's ledger (if any) from its first step."""
        it.ledger_fields = self._ledger_fields
        if self._ledger_dir is not None:
            it.ledger(self._ledger_dir)
        return it

    def _start(self, state: LoaderState, *, allow_approximate: bool = False, operations_changed: bool = False) -> None:
        """Points the engine's iterator at ``state`` (made there, when there is none yet)."""
        if self._engine_it is None and (operations_changed or state.stream.replaced_operations):
            # the engine's iterator continues a stream under changed operations and records it in its states
            self._engine_it = self._adopt(self._compiled.loader.iterator_at(0))
        if self._engine_it is None:
            loader = self._compiled.loader
            position = loader.resume_position(state, allow_approximate=allow_approximate)
            self._engine_it = self._adopt(loader.iterator_at(position))
        else:
            self._engine_it.restore(state, allow_approximate=allow_approximate, operations_changed=operations_changed)

    def ledger(self, directory: str | os.PathLike[str]) -> None:
        """Appends this process's deliveries to ``directory/process-<i>.ledger`` from now on.

        The delivery ledger of ``DataLoader(..., ledger=DIR)`` (thresher.loader.ledger),
        for a Dataset: ``thresher audit DIR`` checks it, and ``th.explain(ds, step,
        ledger=DIR)`` reads it where the records of a step depend on the data (a filter
        before the batch, or ``pack``). Call it before the first step (or right after
        ``set_state``) so that the ledger covers the run from its start.

        Example:
            >>> import tempfile, thresher as th
            >>> d = tempfile.mkdtemp()
            >>> ds = th.Dataset.range(12).shuffle(seed=2).filter(lambda x: x % 3).batch(3)
            >>> it = iter(ds)
            >>> it.ledger(d)
            >>> first = next(it).tolist()
            >>> [k for k in th.explain(ds, 0, ledger=d).record_keys.tolist() if k % 3] == first
            True
        """
        self._ledger_dir = user_path(directory)
        if self._engine_it is not None:
            self._engine_it.ledger(self._ledger_dir)

    # -- iteration ------------------------------------------------------------------------
    def __iter__(self) -> DatasetIterator:
        return self

    def __next__(self) -> Any:
        return next(self._it)

    def close(self) -> None:
        """Stops the engine's iterator (and its workers)."""
        if self._engine_it is not None:
            self._engine_it.close()

    def __enter__(self) -> DatasetIterator:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def stats(self, reset: bool = False) -> LoaderStats:
        """Where the time went (the engine iterator's ``stats()``, see DataLoaderIterator)."""
        return self._it.stats(reset)

    # -- state ------------------------------------------------------------------------------
    def _extensions(self) -> Extensions:
        mix = self._compiled.mix
        if mix is None:
            return Extensions()
        return Extensions().with_(
            MixSegment(tuple(mix.schedule.weights), mix.origin, tuple(mix.offsets))
        )

    def _sync_ledger(self) -> None:
        """A checkpoint: the ledger's lines so far are made durable."""
        if self._ledger_dir is not None:
            self._it.sync_ledger()

    def get_state(self) -> dict[str, Any]:
        """A small JSON-serialisable dict (see the module docstring)."""
        self._sync_ledger()
        state = self._it.state_at(self._it.position)
        return replace(state, extensions=self._extensions()).to_json()

    def set_state(self, state: dict[str, Any], *, reweight: bool = False, operations_changed: bool = False) -> None:
        """Continues exactly where ``state`` was taken.

        For a mixture saved under other weights, ``reweight=True`` continues each
        component where it stopped and applies this dataset's weights from the
        saved position on (the rest of the chain must be the same). Without it a
        change of weights is refused like any other change of the pipeline.

        ``operations_changed=True``: the state was saved by this chain with other per-record
        operations (a map added or fixed); positions and the sampler are kept and this chain's
        operations apply from the next record on, as ``DataLoaderIterator.set_state`` does
        (docs/state.md).
        """
        saved = LoaderState.from_json(as_state(state, "set_state"))
        mix = self._compiled.mix
        segment = saved.extensions.get(MixSegment)
        if mix is None or segment is None:
            if mix is not None:
                raise InvalidStateError(
                    "this dataset is a mixture but the state has no state['dataset']['mix']; "
                    "it was not saved by a mixture"
                )
            self._start(saved, operations_changed=operations_changed)
            return
        _check_segment(saved, segment)
        current = [float(w) for w in mix.schedule.weights]
        if [float(w) for w in segment.weights] == current:
            self._use_segment((segment.origin, list(segment.offsets)))
            self._start(saved, operations_changed=operations_changed)
            return
        if not reweight:
            raise IncompatibleStateError(
                f"this state was saved with mixture weights {list(segment.weights)}, this dataset "
                f"has {current}. To continue each component where it stopped and use the new "
                "weights from here on, call "
                "set_state(state, reweight=True)"
            )
        self._reweight(saved, segment)

    def _use_segment(self, segment: tuple[int, list[int]]) -> None:
        """Compiles the mixture for ``segment`` unless it is the current one (before restoring)."""
        mix = self._compiled.mix
        assert mix is not None
        if segment == (mix.origin, list(mix.offsets)):
            return
        self.close()
        self._engine_it = None
        try:
            self._compiled = self._dataset.compile(mix_segment=segment)
        except ConfigError as e:
            raise InvalidStateError(f"the state's mixture segment (state['dataset']['mix']: origin {segment[0]}, "
                                    f"offsets {segment[1]}) does not fit this mixture: {e}") from e

    def _reweight(self, saved: LoaderState, segment: MixSegment) -> None:
        weights = list(segment.weights)
        old = self._dataset.with_mix_weights(weights)
        if saved.stream.operations != old.fingerprint():
            raise IncompatibleStateError(
                "set_state(reweight=True): the state was saved by a pipeline that differs "
                "in more than the mixture weights; restore it with the same chain"
            )
        g = saved.position if saved.geometry.shard_count == 1 else saved.global_position
        if g is None:
            raise GeometryError(
                "set_state(reweight=True) needs the global mixture position of the state, and "
                "this sharded state has none (a filter before the batch, or not at a step "
                "boundary); reweight at a step boundary of a pipeline without filters"
            )
        mix = self._compiled.mix
        assert mix is not None
        schedule = MixSchedule(weights, mix.schedule.period, mix.schedule.seed)
        counts = schedule.counts(g - segment.origin)
        offsets = [o + c for o, c in zip(segment.offsets, counts, strict=False)]
        self._use_segment((g, offsets))
        self.close()
        self._engine_it = None
        self._start(saved.adopted_by(self._compiled.loader.stream_id))

    @property
    def compiled(self) -> Compiled:
        return self._compiled


def _check_segment(saved: LoaderState, segment: MixSegment) -> None:
    """Refuses a mixture segment no run makes (InvalidStateError), before it is compiled.

    A segment starts where a restore under new weights stood (``reweight=True``), so at or
    before every position of a state saved in it; a segment starting at 0 is a fresh
    mixture's, whose components all start at 0. (The digest refuses an edited state first;
    this guards states re-signed by ``thresher.upgrade_state``.)
    """
    g = saved.next_global_position
    if segment.origin > g:
        raise InvalidStateError(
            f"state['dataset']['mix'] starts its segment at mixture position {segment.origin}, after the state's "
            f"own position {g}: no run saves that (a segment starts where the mixture was reweighted, before "
            "the positions saved in it); the state was edited")
    if segment.origin == 0 and any(segment.offsets):
        raise InvalidStateError(
            f"state['dataset']['mix'] starts at mixture position 0 with component offsets {list(segment.offsets)}: "
            "a mixture that starts at 0 starts every component at 0; the state was edited")


class PackIterator(DatasetIterator):
    """Packed rows (or batches of them) from the engine's stream of packed windows."""

    def __init__(self, dataset: CompilableChain, compiled: Compiled) -> None:
        super().__init__(dataset, compiled)
        assert compiled.front is not None
        self._front = compiled.front
        self._block: PackedBlock | None = None
        self._block_position = 0  # the engine position of the current block
        self._row = 0  # rows of the current block already emitted
        self._done = False
        self._stats = PackingStats()
        self._ledger_fields["pack"] = {"rows": 0}
        self._taken: list[int] = []  # [window, first row, end row, ...] of the step being taken, for the ledger
        # With workers, batches are assembled ahead on a thread (hand_over); ``_handed`` is then
        # the cursor and stats after the last batch handed over (the fields above run ahead).
        workers = compiled.loader.worker_count
        self._ahead_depth = _HAND_OVER_DEPTH if workers == "auto" or workers > 0 else 0
        self._ahead: HandOver[PackIterator, tuple[Any, list[int], tuple[int, int], PackingStats]] | None = None
        self._handed: tuple[tuple[int, int], PackingStats] | None = None
        self._resync = False

    def packing_stats(self) -> PackingStats:
        """Rows, tokens and padding emitted by this iterator so far."""
        if self._handed is not None:
            return PackingStats(**vars(self._handed[1]))
        return PackingStats(**vars(self._stats))

    def _load(self) -> bool:
        """Makes ``_block`` a block with rows left; False at the end of the stream."""
        while self._block is None or self._row >= self._block.num_rows:
            if self._done:
                return False
            position = self._it.position
            try:
                block = next(self._it)
            except StopIteration:
                self._done = True
                self._block = None
                return False
            self._block, self._block_position, self._row = block, position, 0
            writer = self._it.ledger_writer
            if writer is not None:
                view = self._compiled.loader.engine.processor.source
                writer.window(position, view.window * self._it.engine.geometry.to_global(position), block.layout)
            self._stats.records += block.records
            self._stats.truncated_tokens += block.truncated_tokens
        return True

    def _take(self, k: int) -> list[tuple[PackedBlock, int, int]]:
        parts = []
        self._taken = []
        while k > 0 and self._load():
            block = self._block
            assert block is not None
            lo = self._row
            hi = min(block.num_rows, lo + k)
            parts.append((block, lo, hi))
            self._taken += [self._block_position, lo, hi]
            self._row = hi
            k -= hi - lo
            tokens = int(block.row_tokens[lo:hi].sum())
            self._stats.rows += hi - lo
            self._stats.tokens += tokens
            self._stats.padding_tokens += (hi - lo) * self._front.seq_len - tokens
        return parts

    def _assemble(self) -> Any:
        """The next row or batch of rows, before the batch maps (StopIteration at the end)."""
        batch = self._front.batch
        if batch is None:
            parts = self._take(1)
            if not parts:
                raise StopIteration
            block, lo, _ = parts[0]
            return {name: rows[lo] for name, rows in block.rows.items()}
        parts = self._take(batch.batch_size)
        got = sum(hi - lo for _, lo, hi in parts)
        if got == 0 or (got < batch.batch_size and batch.drop_remainder):
            raise StopIteration
        names = list(parts[0][0].rows)
        if len(parts) == 1:
            block, lo, hi = parts[0]
            return {name: block.rows[name][lo:hi] for name in names}
        return {name: np.concatenate([b.rows[name][lo:hi] for b, lo, hi in parts]) for name in names}

    def _assemble_ahead(self) -> tuple[Any, list[int], tuple[int, int], PackingStats]:
        """What the hand-over thread makes: a batch, the rows it took (for the ledger), the cursor after
        it and the stats then."""
        out = self._assemble()
        return out, self._taken, self._cursor(), PackingStats(**vars(self._stats))

    def __next__(self) -> Any:
        if self._ahead_depth:
            if self._resync:  # an interrupted next(): the fields ran ahead of the batches handed over
                self._resync = False
                self.set_state(self.get_state())
            elif self._ahead is None and self._handed is not None:
                raise StopIteration  # closed: what was assembled ahead is not handed over
            if self._ahead is None:
                self._handed = (self._cursor(), PackingStats(**vars(self._stats)))  # makes self._it here
                self._ahead = HandOver(self, PackIterator._assemble_ahead, self._ahead_depth)
            ahead = self._ahead
            try:
                out, taken, cursor, stats = ahead.get()
            except BaseException:
                self._ahead = None
                if ahead.finished:  # the stream's end or error: the fields are where the batches are
                    self._handed = None
                else:  # interrupted (KeyboardInterrupt) while waiting
                    ahead.stop()
                    self._resync = True
                raise
            self._handed = (cursor, stats)
        else:
            out = self._assemble()
            taken = self._taken
        out = run_batch_maps(self._front.batch_fns, out, "map on packed batches")
        self._delivered(taken)
        return out

    def ledger(self, directory: str | os.PathLike[str]) -> None:
        """``DatasetIterator.ledger``; mid-window, the ledger begins where the window began (the window
        is re-packed once, so that the ledger has its layout)."""
        if self._engine_it is None:
            super().ledger(directory)
            return
        state, stats = self.get_state(), self.packing_stats()
        super().ledger(directory)
        self.set_state(state)
        self._stats = stats

    def _delivered(self, taken: list[int]) -> None:
        """Notes the step just handed over (``taken``: its rows) in the ledger (if any)."""
        writer = self._engine_it.ledger_writer if self._engine_it is not None else None
        if writer is not None:
            writer.packed(taken)

    def _cursor(self) -> tuple[int, int]:
        """(engine position, rows of its window already emitted) after the rows taken so far."""
        if self._block is not None and self._row < self._block.num_rows:
            return self._block_position, self._row
        return self._it.position, 0

    def _stop_ahead(self) -> None:
        if self._ahead is not None:
            self._ahead.stop()
            self._ahead = None

    def close(self) -> None:
        """Stops the hand-over thread, then the engine's iterator (and its workers)."""
        if self._ahead is not None:
            self._ahead.stop_soon()
            self._ahead = None  # ``_handed`` stays: the state of the last batch handed over
        super().close()

    def get_state(self) -> dict[str, Any]:
        self._sync_ledger()
        position, rows = self._cursor() if self._handed is None else self._handed[0]
        state = self._it.state_at(position)
        return replace(state, extensions=Extensions().with_(PackRows(rows))).to_json()

    def set_state(self, state: dict[str, Any], *, reweight: bool = False, operations_changed: bool = False) -> None:
        saved = LoaderState.from_json(as_state(state, "set_state"))
        packed = saved.extensions.get(PackRows)
        rows = None if packed is None else packed.rows
        if rows is None:
            raise InvalidStateError(
                "a packed dataset's state needs state['dataset']['pack']['rows'] (an int >= 0); "
                "this state was not saved by a packed dataset"
            )
        self._stop_ahead()
        self._handed, self._resync = None, False
        self._ledger_fields["pack"] = {"rows": rows}
        self._start(saved, operations_changed=operations_changed)
        self._block, self._row, self._done = None, 0, False
        if rows:
            if not self._load():
                raise InvalidStateError("the state points past the end of the packed stream")
            assert self._block is not None
            if rows > self._block.num_rows:
                raise InvalidStateError(
                    f"the state skips {rows} rows of a window that has {self._block.num_rows}"
                )
            self._row = rows
