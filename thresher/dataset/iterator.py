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

from types import TracebackType
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from thresher._compat import as_state
from thresher.dataset.compile import Compiled
from thresher.dataset.mix import MixSchedule
from thresher.dataset.packing import PackedBlock, PackingStats
from thresher.errors import GeometryError, IncompatibleStateError, InvalidStateError, TransformError
from thresher.loader.iterator import DataLoaderIterator
from thresher.loader.state import fingerprint, make_state, restore_position

if TYPE_CHECKING:
    from thresher.dataset.dataset import Dataset

__all__ = ["DatasetIterator", "PackIterator"]

DATASET_KEY = "dataset"


def _mix_state(state: Mapping[str, Any]) -> dict[str, Any] | None:
    extra = state.get(DATASET_KEY)
    if not isinstance(extra, dict):
        return None
    mix = extra.get("mix")
    if mix is None:
        return None
    if not (isinstance(mix, dict) and isinstance(mix.get("weights"), list) and isinstance(mix.get("origin"), int)
            and isinstance(mix.get("offsets"), list) and all(isinstance(x, int) for x in mix["offsets"])):
        raise InvalidStateError(f"state['dataset']['mix'] is malformed: {mix!r}")
    return mix


class DatasetIterator:
    """Iterates a compiled Dataset; ``get_state``/``set_state`` resume exactly.

    Created by ``iter(dataset)``; also a context manager (closing stops workers).
    """

    def __init__(self, dataset: "Dataset", compiled: Compiled) -> None:
        self._dataset = dataset
        self._compiled = compiled
        self._it: DataLoaderIterator = iter(compiled.loader)

    # -- iteration ------------------------------------------------------------------------
    def __iter__(self) -> "DatasetIterator":
        return self

    def __next__(self) -> Any:
        return next(self._it)

    def close(self) -> None:
        """Stops the engine's iterator (and its workers)."""
        self._it.close()

    def __enter__(self) -> "DatasetIterator":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- state ------------------------------------------------------------------------------
    def _extra(self) -> dict[str, Any]:
        mix = self._compiled.mix
        if mix is None:
            return {}
        return {"mix": {"weights": list(mix.schedule.weights), "origin": mix.origin, "offsets": list(mix.offsets)}}

    def get_state(self) -> dict[str, Any]:
        """A small JSON-serialisable dict (see the module docstring)."""
        state = self._it.get_state()
        extra = self._extra()
        if extra:
            state[DATASET_KEY] = extra
        return state

    def set_state(self, state: dict[str, Any], *, reweight: bool = False) -> None:
        """Continues exactly where ``state`` was taken.

        For a mixture saved under other weights, ``reweight=True`` continues each
        component where it stopped and applies this dataset's weights from the
        saved position on (the rest of the chain must be the same). Without it a
        change of weights is refused like any other change of the pipeline.
        """
        state = as_state(state, "set_state")  # Grain-style bytes of JSON too
        mix = self._compiled.mix
        saved = _mix_state(state) if isinstance(state, Mapping) else None
        if mix is None or saved is None:
            if mix is not None:
                raise InvalidStateError("this dataset is a mixture but the state has no state['dataset']['mix']; "
                                        "it was not saved by a mixture")
            self._it.set_state(state)
            return
        current = [float(w) for w in mix.schedule.weights]
        if [float(w) for w in saved["weights"]] == current:
            segment = (saved["origin"], saved["offsets"])
            if segment != (mix.origin, mix.offsets):
                self._recompile(segment)
            self._it.set_state(state)
            return
        if not reweight:
            raise IncompatibleStateError(
                f"this state was saved with mixture weights {saved['weights']}, this dataset has {current}. To "
                "continue each component where it stopped and use the new weights from here on, call "
                "set_state(state, reweight=True)")
        self._reweight(state, saved)

    def _recompile(self, segment: tuple[int, list[int]]) -> None:
        self._it.close()
        self._compiled = self._dataset.compile(mix_segment=segment)
        self._it = iter(self._compiled.loader)

    def _reweight(self, state: dict[str, Any], saved: dict[str, Any]) -> None:
        old = self._dataset.with_mix_weights(saved["weights"])
        stream = state.get("stream")
        if not isinstance(stream, dict) or stream.get("operations") != old.fingerprint():
            raise IncompatibleStateError("set_state(reweight=True): the state was saved by a pipeline that differs "
                                         "in more than the mixture weights; restore it with the same chain")
        geometry = state.get("geometry")
        if not isinstance(geometry, dict):
            raise InvalidStateError("state has no 'geometry'")
        if geometry.get("shard_count") == 1:
            g = state.get("position")
        else:
            g = state.get("global_position")
        if not isinstance(g, int):
            raise GeometryError("set_state(reweight=True) needs the global mixture position of the state, and "
                                "this sharded state has none (a filter before the batch, or not at a step "
                                "boundary); reweight at a step boundary of a pipeline without filters")
        mix = self._compiled.mix
        assert mix is not None
        schedule = MixSchedule(saved["weights"], mix.schedule.period, mix.schedule.seed)
        counts = schedule.counts(g - saved["origin"])
        offsets = [o + c for o, c in zip(saved["offsets"], counts)]
        self._recompile((g, offsets))
        loader = self._compiled.loader
        patched = dict(state, stream=loader.stream, fingerprint=fingerprint(loader.stream))
        position = restore_position(patched, loader.stream, loader.geometry, loader.plan.descriptions)
        self._it.close()
        self._it = DataLoaderIterator(loader, position)

    @property
    def compiled(self) -> Compiled:
        return self._compiled


class PackIterator(DatasetIterator):
    """Packed rows (or batches of them) from the engine's stream of packed windows."""

    def __init__(self, dataset: "Dataset", compiled: Compiled) -> None:
        super().__init__(dataset, compiled)
        assert compiled.front is not None
        self._front = compiled.front
        self._block: PackedBlock | None = None
        self._block_position = 0  # the engine position of the current block
        self._row = 0  # rows of the current block already emitted
        self._done = False
        self._stats = PackingStats()

    def packing_stats(self) -> PackingStats:
        """Rows, tokens and padding emitted by this iterator so far."""
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
            self._stats.records += block.records
            self._stats.truncated_tokens += block.truncated_tokens
        return True

    def _take(self, k: int) -> list[tuple[PackedBlock, int, int]]:
        parts = []
        while k > 0 and self._load():
            block = self._block
            assert block is not None
            lo = self._row
            hi = min(block.num_rows, lo + k)
            parts.append((block, lo, hi))
            self._row = hi
            k -= hi - lo
            tokens = int(block.row_tokens[lo:hi].sum())
            self._stats.rows += hi - lo
            self._stats.tokens += tokens
            self._stats.padding_tokens += (hi - lo) * self._front.seq_len - tokens
        return parts

    def __next__(self) -> Any:
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
            out: Any = {name: block.rows[name][lo:hi] for name in names}
        else:
            out = {name: np.concatenate([b.rows[name][lo:hi] for b, lo, hi in parts]) for name in names}
        for fn in self._front.batch_fns:
            try:
                out = fn(out)
            except Exception as e:
                raise TransformError(f"map on packed batches ({getattr(fn, '__qualname__', fn)!r}) failed: "
                                     f"{type(e).__name__}: {e}") from e
        return out

    def get_state(self) -> dict[str, Any]:
        if self._block is not None and self._row < self._block.num_rows:
            position, rows = self._block_position, self._row
        else:
            position, rows = self._it.position, 0
        loader = self._compiled.loader
        state = make_state(position, loader.stream, loader.geometry, loader.plan.descriptions)
        state[DATASET_KEY] = {"pack": {"rows": rows}}
        return state

    def set_state(self, state: dict[str, Any], *, reweight: bool = False) -> None:
        state = as_state(state, "set_state")
        extra = state.get(DATASET_KEY) if isinstance(state, Mapping) else None
        pack = extra.get("pack") if isinstance(extra, dict) else None
        if not (isinstance(pack, dict) and isinstance(pack.get("rows"), int) and pack["rows"] >= 0):
            raise InvalidStateError("a packed dataset's state needs state['dataset']['pack']['rows'] (an int >= 0); "
                                    "this state was not saved by a packed dataset")
        self._it.set_state(state)
        self._block, self._row, self._done = None, 0, False
        if pack["rows"]:
            if not self._load():
                raise InvalidStateError("the state points past the end of the packed stream")
            assert self._block is not None
            if pack["rows"] > self._block.num_rows:
                raise InvalidStateError(f"the state skips {pack['rows']} rows of a window that has "
                                        f"{self._block.num_rows}")
            self._row = pack["rows"]
