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

from typing import Any, Sequence

import numpy as np

from thresher.errors import RecordKeyError
from thresher.loader.chunk import ChunkProcessor
from thresher.loader.iterator import apply_batch_ops
from thresher.sources.protocol import check_key, read_many
from thresher.transforms.random_map import RecordRng

__all__ = ["ENDLESS", "SliceView", "StageView", "view_length"]

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


class StageView:
    """Element (or batch) ``i`` of a stage, by random access.

    Args:
        processor: the stage's engine processor (source, sampler, operations). It
            must have no Filter (random access needs one element per position).
        label: what to call the view in error messages.

    With a Batch, key ``i`` is the batch of positions ``[i*b, (i+1)*b)``, the very
    batch the engine's iterator forms (operations after the Batch included).
    """

    def __init__(self, processor: ChunkProcessor, label: str = "stage") -> None:
        self._processor = processor
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
        if self._plan.batch is None:
            chunk = self._processor.process(k)
            if len(chunk.elements) != len(k):  # cannot happen: views are built without filters
                raise RecordKeyError(f"{self._label}: a filter removed elements of a random-access view")
            return chunk.elements
        return self._batches(k)

    def _batches(self, keys: np.ndarray) -> list[Any]:
        b, n = self._batch_size, self._positions
        starts = keys * b
        stops = starts + b if n is None else np.minimum(starts + b, n)
        counts = (stops - starts).tolist()
        positions = np.concatenate([np.arange(s, e, dtype=np.int64) for s, e in zip(starts.tolist(),
                                                                                    stops.tolist())])
        chunk = self._processor.process(positions)
        plan, batch = self._plan, self._plan.batch
        assert batch is not None
        if self._rng is None:
            self._rng = RecordRng()
        out = []
        i = 0
        pos = chunk.positions.tolist()
        for c, first in zip(counts, starts.tolist()):
            stacked = batch.stack(chunk.elements[i:i + c], pos[i:i + c])
            i += c
            if plan.batch_ops:
                stacked, keep = apply_batch_ops(plan, self._processor.sampler, stacked, first, first + c, self._rng)
                if not keep:
                    raise RecordKeyError(f"{self._label}: a batch-level filter removed batch {first // b} of a "
                                         "random-access view")
            out.append(stacked)
        return out

    def __repr__(self) -> str:
        return f"StageView({self._label}, len={'endless' if self._len == ENDLESS else self._len})"


class SliceView:
    """Keys ``0..len(indices)-1`` of ``inner`` taken at ``indices`` (a range)."""

    def __init__(self, inner: Any, indices: range) -> None:
        self._inner = inner
        self._indices = indices

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
