"""Random-access views: a closed stage, or a slice of another view, as a data source.

When a chain cannot stay in one engine stage (a slice after a shuffle, a shuffle
after a random map, a batch of batches, the components of a mix), the part before
is closed into a ``StageView``: a virtual source whose key ``i`` is element (or
batch) ``i`` of that stage, computed by the engine's own ``ChunkProcessor``. The
next stage reads it like any other source, so the whole chain still runs through
one engine, in worker processes when there are any, and stays a pure function of
position.

Example:
    >>> import thresher as th
    >>> from thresher.dataset.views import SliceView, StageView
    >>> from thresher.loader.chunk import ChunkProcessor
    >>> from thresher.transforms import plan_operations
    >>> proc = ChunkProcessor(th.sources.RangeDataSource(0, 10), th.IndexSampler(10),
    ...                       plan_operations([lambda x: x * 10]))
    >>> view = StageView(proc)
    >>> len(view), view[3], SliceView(view, range(10)[::4]).__getitems__([0, 1, 2])
    (10, 30, [0, 40, 80])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from thresher.errors import RecordKeyError
from thresher.loader.chunk import ChunkProcessor
from thresher.loader.iterator import apply_batch_ops
from thresher.sources.protocol import check_key, read_many
from thresher.transforms.random_map import RecordRng

__all__ = ["ENDLESS", "HOLE", "SliceView", "StageView", "not_hole", "read_extended", "view_length"]

# The length an endless view reports, so that an engine sampler can read it; the
# Dataset knows it is endless and never reports it as a length.
ENDLESS = 2**62


def view_length(source: Any) -> int | None:
    """``len(source)``, or None for an endless view.

    Example:
        >>> from thresher.dataset.views import ENDLESS, view_length
        >>> view_length([1, 2]), view_length(range(ENDLESS))
        (2, None)
    """
    n = len(source)
    return None if n >= ENDLESS else n


class _Hole:
    """The element of a random-access view at a position a filter removed."""

    def __repr__(self) -> str:
        return "HOLE"

    def __reduce__(self) -> str:
        return "HOLE"


HOLE = _Hole()


def not_hole(element: Any) -> bool:
    """The filter that removes a view's holes (a module function, so it pickles by name)."""
    return element is not HOLE


def read_extended(source: Any, keys: Sequence[int]) -> list[Any]:
    """Reads *extended* keys ``e * len(source) + k``: key k as it is in repeat epoch e.

    A view whose elements change from one repeat epoch to the next (its stage
    shuffles or draws random numbers) says so with ``varies_by_epoch`` and reads
    them with ``read_extended``; any other source is the same in every epoch.

    Example:
        >>> from thresher.dataset.views import read_extended
        >>> read_extended(["a", "b", "c"], [1, 4, 8])
        ['b', 'b', 'c']
    """
    if getattr(source, "varies_by_epoch", False):
        return source.read_extended(keys)
    n = len(source)
    return read_many(source, [int(k) % n for k in keys])


class StageView:
    """Element (or batch) ``i`` of a stage, by random access.

    Args:
        processor: the stage's engine processor (source, sampler, operations).
        label: what to call the view in error messages.
        epochs_processor: the same stage without an end, when the stage changes from
            one repeat epoch to the next (a shuffle, a random map, or a source that
            changes): epoch e of the view is positions ``[e*L, (e+1)*L)`` of it.
        holes: the stage has a Filter; a removed element reads as ``HOLE`` (the
            next stage filters holes out, as Grain's MapDataset does).

    With a Batch, key ``i`` is the batch of positions ``[i*b, (i+1)*b)``, the very
    batch the engine's iterator forms (operations after the Batch included).
    """

    def __init__(self, processor: ChunkProcessor, label: str = "stage", *,
                 epochs_processor: ChunkProcessor | None = None, holes: bool = False) -> None:
        self._processor = processor
        self._epochs_processor = epochs_processor
        self._holes = holes
        self._plan = processor.plan
        self._label = label
        self._positions = processor.sampler.local_length
        batch = self._plan.batch
        self._batch_size = batch.batch_size if batch is not None else 1
        n = self._positions
        if n is None:
            self._len = ENDLESS
        elif batch is None:
            self._len = n
        else:
            self._len = n // batch.batch_size if batch.drop_remainder else -(-n // batch.batch_size)
        self._rng: RecordRng | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_rng"] = None
        return state

    @property
    def processor(self) -> ChunkProcessor:
        return self._processor

    @property
    def varies_by_epoch(self) -> bool:
        """Whether a repeat epoch other than the first has other elements."""
        return self._epochs_processor is not None

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, key: int) -> Any:
        return self.__getitems__([key])[0]

    def __getitems__(self, keys: Sequence[int]) -> list[Any]:
        if not len(keys):
            return []
        k = np.asarray(keys, dtype=np.int64)
        lo, hi = int(k.min()), int(k.max())
        if lo < 0 or hi >= self._len:
            check_key(lo if lo < 0 else hi, self._len, self._label)
        return self._read(self._processor, k, np.zeros_like(k))

    def read_extended(self, keys: Sequence[int]) -> list[Any]:
        """Reads keys ``e * len(self) + k``: key k in repeat epoch e (see ``read_extended``)."""
        if not len(keys):
            return []
        epochs, k = np.divmod(np.asarray(keys, dtype=np.int64), self._len)
        proc = self._epochs_processor
        if proc is None or not bool(epochs.any()):
            return self._read(self._processor, k, np.zeros_like(k))
        assert self._positions is not None  # an endless view has one epoch
        return self._read(proc, k, epochs * self._positions)

    def _read(self, proc: ChunkProcessor, keys: np.ndarray, offsets: np.ndarray) -> list[Any]:
        if self._plan.batch is None:
            positions = keys + offsets
            chunk = proc.process(positions)
            if len(chunk.elements) == len(positions):
                return chunk.elements
            if not self._holes:  # cannot happen: views without holes are built without filters
                raise RecordKeyError(f"{self._label}: a filter removed elements of a random-access view")
            return _with_holes(positions, chunk.positions, chunk.elements)
        return self._batches(proc, keys, offsets)

    def _batches(self, proc: ChunkProcessor, keys: np.ndarray, offsets: np.ndarray) -> list[Any]:
        b, n = self._batch_size, self._positions
        starts = keys * b
        stops = starts + b if n is None else np.minimum(starts + b, n)
        counts = (stops - starts).tolist()
        starts = starts + offsets
        positions = np.concatenate([np.arange(s, s + c, dtype=np.int64)
                                    for s, c in zip(starts.tolist(), counts, strict=False)])
        chunk = proc.process(positions)
        plan, batch = self._plan, self._plan.batch
        assert batch is not None
        if self._rng is None:
            self._rng = RecordRng()
        out = []
        i = 0
        pos = chunk.positions.tolist()
        for c, first in zip(counts, starts.tolist(), strict=False):
            stacked = batch.stack(chunk.elements[i:i + c], pos[i:i + c])
            i += c
            if plan.batch_ops:
                stacked, keep = apply_batch_ops(plan, proc.sampler, stacked, first, first + c, self._rng)
                if not keep:
                    raise RecordKeyError(f"{self._label}: a batch-level filter removed batch {first // b} of a "
                                         "random-access view")
            out.append(stacked)
        return out

    def __repr__(self) -> str:
        return f"StageView({self._label}, len={'endless' if self._len == ENDLESS else self._len})"


def _with_holes(positions: np.ndarray, kept: np.ndarray, elements: list[Any]) -> list[Any]:
    """The elements of ``positions`` with HOLE where a filter removed one (``kept`` is in order)."""
    out: list[Any] = []
    j, kept_list = 0, kept.tolist()
    for p in positions.tolist():
        # A position asked for twice is kept or removed both times: the filter is pure.
        if j < len(kept_list) and kept_list[j] == p:
            out.append(elements[j])
            j += 1
        else:
            out.append(HOLE)
    return out


class SliceView:
    """Keys ``0..len(indices)-1`` of ``inner`` taken at ``indices`` (a range)."""

    def __init__(self, inner: Any, indices: range) -> None:
        self._inner = inner
        self._indices = indices

    @property
    def varies_by_epoch(self) -> bool:
        return bool(getattr(self._inner, "varies_by_epoch", False))

    def read_extended(self, keys: Sequence[int]) -> list[Any]:
        """Reads keys ``e * len(self) + k``: key k in repeat epoch e (see ``read_extended``)."""
        r, n, m = self._indices, len(self._indices), len(self._inner)
        mapped = []
        for x in keys:
            e, k = divmod(int(x), n)
            mapped.append(e * m + r.start + k * r.step)
        return read_extended(self._inner, mapped)

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, key: int) -> Any:
        return self._inner[self._indices[check_key(key, len(self._indices), repr(self))]]

    def __getitems__(self, keys: Sequence[int]) -> list[Any]:
        r, n = self._indices, len(self._indices)
        mapped = []
        for k in keys:
            if not 0 <= k < n:
                check_key(k, n, repr(self))
            mapped.append(r.start + k * r.step)
        return read_many(self._inner, mapped)

    def __repr__(self) -> str:
        r = self._indices
        return f"SliceView({r.start}:{r.stop}:{r.step} of {self._inner!r})"
