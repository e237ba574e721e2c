"""Sequence packing: variable-length token records -> fixed-length rows, by windows.

The stream of records is cut into *windows* of ``window`` consecutive positions
(window w = positions ``[w*window, (w+1)*window)``). Each window is packed on its
own, best-fit decreasing: records longest first, each into the row with the least
room that still fits it (a new row when none does); inside a row, segments keep
their stream order. A window's rows are thus a pure function of the window's
positions: windows are computed by the engine, in worker processes when there are
any, and a checkpoint is (the window being emitted, rows of it already emitted):
restoring re-packs that one window and nothing else.

Each row carries ``segment_ids`` (1, 2, ... per record in the row, 0 on padding)
and ``positions`` (0, 1, ... inside each record, 0 on padding), as
Grain/T5X-style packed inputs do.

Example:
    >>> import numpy as np
    >>> from thresher.dataset.packing import pack_window
    >>> block = pack_window([np.array([1, 2, 3]), np.array([4, 5]), np.array([6, 7, 8, 9])], seq_len=5)
    >>> block.rows["tokens"].tolist()
    [[1, 2, 3, 4, 5], [6, 7, 8, 9, 0]]
    >>> block.rows["segment_ids"].tolist(), block.rows["positions"].tolist()
    ([[1, 1, 1, 2, 2], [1, 1, 1, 1, 0]], [[0, 1, 2, 0, 1], [0, 1, 2, 3, 0]])
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from thresher._validate import is_int
from thresher.dataset.views import ENDLESS
from thresher.errors import ConfigError, TransformError
from thresher.loader.chunk import ChunkProcessor
from thresher.loader.state_types import register_extension
from thresher.sources.protocol import check_key

__all__ = ["PackRows", "PackView", "PackedBlock", "PackingStats", "pack_window"]

_MAX_ROWS = 2**62  # as the state's positions

TOKENS, SEGMENT_IDS, POSITIONS = "tokens", "segment_ids", "positions"
_ROW_BITS = 24  # rows of one window are numbered below 2**24


@dataclass
class PackedBlock:
    """The rows of one window: ``rows[name]`` is a (num_rows, seq_len) array.

    ``layout`` says where each placed record went, in stream order: a (3, k) int64
    array of its stream position, its length before truncation and its row (its
    segment starts where the row's earlier segments end). Records without tokens
    are not placed. The delivery ledger records it (thresher.forensics explains
    packed steps from it).
    """

    rows: dict[str, np.ndarray]
    row_tokens: np.ndarray  # int64, the real (non-padding) tokens of each row
    records: int
    truncated_tokens: int
    layout: np.ndarray

    @property
    def num_rows(self) -> int:
        return int(self.row_tokens.shape[0])


@dataclass
class PackingStats:
    """What an iterator over packed rows has emitted so far.

    ``padding_fraction`` is the share of emitted row slots that are padding.

    Example:
        >>> import numpy as np, thresher as th
        >>> it = iter(th.Dataset.source([np.arange(1, 4), np.arange(1, 4)]).pack(4))
        >>> rows = list(it)
        >>> stats = it.packing_stats()
        >>> stats.rows, stats.tokens, stats.padding_tokens, f"{stats.padding_fraction:.0%}"
        (2, 6, 2, '25%')
    """

    rows: int = 0
    tokens: int = 0
    padding_tokens: int = 0
    records: int = 0
    truncated_tokens: int = 0

    @property
    def padding_fraction(self) -> float:
        total = self.tokens + self.padding_tokens
        return self.padding_tokens / total if total else 0.0

    @property
    def efficiency(self) -> float:
        """1 - padding_fraction: the share of row slots holding real tokens."""
        return 1.0 - self.padding_fraction

    def __str__(self) -> str:
        return (f"{self.rows} rows, {self.tokens} tokens, {100 * self.padding_fraction:.2f}% padding, "
                f"{self.records} records ({self.truncated_tokens} tokens truncated)")


def _features(element: Any, where: str) -> dict[str, np.ndarray]:
    if type(element) is np.ndarray and element.ndim == 1:
        return {TOKENS: element}
    if isinstance(element, dict):
        feats = {k: np.asarray(v) for k, v in element.items()}
        if not feats:
            raise TransformError(f"pack: {where} is an empty dict")
        if SEGMENT_IDS in feats or POSITIONS in feats:
            raise TransformError(f"pack: {where} already has {SEGMENT_IDS!r}/{POSITIONS!r}; pack adds them")
    else:
        feats = {TOKENS: np.asarray(element)}
    n = None
    for k, v in feats.items():
        if v.ndim != 1:
            raise TransformError(f"pack: feature {k!r} of {where} has shape {v.shape}; pack takes 1-D token arrays")
        if n is None:
            n = v.shape[0]
        elif v.shape[0] != n:
            raise TransformError(f"pack: the features of {where} have different lengths "
                                 f"({ {k: int(x.shape[0]) for k, x in feats.items()} }); pack needs one length")
    return feats


def _place(lengths: list[int], seq_len: int) -> tuple[list[int], int]:
    """Best-fit decreasing: the row of each record, and the number of rows."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    free: list[int] = []  # sorted keys: room << _ROW_BITS | row
    rows = [0] * len(lengths)
    num_rows = 0
    mask = (1 << _ROW_BITS) - 1
    for i in order:
        n = lengths[i]
        j = bisect.bisect_left(free, n << _ROW_BITS)
        if j == len(free):
            row, room = num_rows, seq_len
            num_rows += 1
        else:
            key = free.pop(j)
            row, room = key & mask, key >> _ROW_BITS
        rows[i] = row
        if room - n > 0:
            bisect.insort(free, ((room - n) << _ROW_BITS) | row)
    return rows, num_rows


def pack_window(elements: Sequence[Any], seq_len: int, *, truncate: bool = False,
                positions: Sequence[int] | None = None) -> PackedBlock:
    """Packs one window of records into rows of ``seq_len`` (see the module docstring).

    Records longer than ``seq_len`` are truncated with ``truncate=True`` (the
    dropped tokens are counted), otherwise they raise TransformError naming the
    position.
    """
    feats = [_features(e, f"the record at position {positions[i]}" if positions is not None else f"record {i}")
             for i, e in enumerate(elements)]
    names = list(feats[0]) if feats else [TOKENS]
    for i, f in enumerate(feats):
        if list(f) != names:
            raise TransformError(f"pack: record {i} has features {list(f)}, the first has {names}")
    lengths = [int(next(iter(f.values())).shape[0]) for f in feats]
    raw = list(lengths)
    truncated = 0
    for i, n in enumerate(lengths):
        if n > seq_len:
            if not truncate:
                where = f"position {positions[i]}" if positions is not None else f"record {i}"
                raise TransformError(f"pack: the record at {where} has {n} tokens, more than seq_len={seq_len}; "
                                     "pass truncate=True or split long records in a map before pack")
            truncated += n - seq_len
            lengths[i] = seq_len
    kept = [i for i, n in enumerate(lengths) if n > 0]
    placed, num_rows = _place([lengths[i] for i in kept], seq_len)
    # Rows are numbered in the order their first record comes in the stream.
    renumber: dict[int, int] = {}
    row_of = [renumber.setdefault(r, len(renumber)) for r in placed]
    dtypes = {name: (feats[0][name].dtype if feats else np.dtype(np.int32)) for name in names}
    rows = {name: np.zeros((num_rows, seq_len), dtype=dtypes[name]) for name in names}
    seg = np.zeros((num_rows, seq_len), dtype=np.int32)
    pos = np.zeros((num_rows, seq_len), dtype=np.int32)
    ramp = np.arange(seq_len, dtype=np.int32)
    fill = [0] * num_rows
    count = [0] * num_rows
    flat_seg, flat_pos = seg.reshape(-1), pos.reshape(-1)
    columns = [(rows[name].reshape(-1), name) for name in names]
    single = columns[0] if len(columns) == 1 else None
    for i, r in zip(kept, row_of, strict=False):  # stream order: segments keep it inside each row
        n, o = lengths[i], fill[r]
        a = r * seq_len + o
        b = a + n
        f = feats[i]
        if single is not None:
            single[0][a:b] = f[single[1]][:n]
        else:
            for out, name in columns:
                out[a:b] = f[name][:n]
        count[r] += 1
        flat_seg[a:b] = count[r]
        flat_pos[a:b] = ramp[:n]
        fill[r] = o + n
    row_tokens = np.asarray(fill, dtype=np.int64)
    rows[SEGMENT_IDS] = seg
    rows[POSITIONS] = pos
    at = list(positions) if positions is not None else list(range(len(elements)))
    layout = np.array([[at[i] for i in kept], [raw[i] for i in kept], row_of], dtype=np.int64).reshape(3, -1)
    return PackedBlock(rows, row_tokens, len(elements), truncated, layout)


class PackView:
    """Key w is the PackedBlock of window w of a stage (a virtual source of windows).

    Args:
        processor: the engine processor of the records' stage (filters allowed: a
            window packs whatever of its positions survive).
        seq_len, window, truncate: see ``Dataset.pack``.

    Example:
        >>> import numpy as np, thresher as th
        >>> from thresher.dataset.packing import PackView
        >>> from thresher.loader.chunk import ChunkProcessor
        >>> from thresher.transforms import plan_operations
        >>> proc = ChunkProcessor(th.sources.RangeDataSource(1, 6), th.IndexSampler(5),
        ...                       plan_operations([lambda n: np.arange(n)]))
        >>> view = PackView(proc, seq_len=6, window=3, truncate=False)
        >>> len(view), view[0].rows["segment_ids"].tolist()
        (2, [[1, 2, 2, 3, 3, 3]])
    """

    def __init__(self, processor: ChunkProcessor, seq_len: int, window: int, truncate: bool) -> None:
        if processor.plan.batch is not None:
            raise ConfigError("pack takes records, not batches: put pack before batch")
        self._processor = processor
        self.seq_len, self.window, self.truncate = seq_len, window, truncate
        n = processor.sampler.local_length
        self._positions = n
        self._len = ENDLESS if n is None else -(-n // window)

    @property
    def processor(self) -> ChunkProcessor:
        """The engine processor of the records' stage (what ``explain`` names records with)."""
        return self._processor

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, key: int) -> PackedBlock:
        return self.__getitems__([key])[0]

    def __getitems__(self, keys: Sequence[int]) -> list[PackedBlock]:
        out = []
        for w in keys:
            check_key(w, self._len, "the windows of a pack")
            start = int(w) * self.window
            stop = start + self.window if self._positions is None else min(start + self.window, self._positions)
            chunk = self._processor(start, stop)
            out.append(pack_window(chunk.elements, self.seq_len, truncate=self.truncate,
                                   positions=chunk.positions.tolist()))
        return out

    def __repr__(self) -> str:
        return f"PackView(seq_len={self.seq_len}, window={self.window}, windows={self._len})"


@register_extension("pack")
@dataclass(frozen=True)
class PackRows:
    """The rows of the current packed window already emitted, saved in a packing iterator's state
    (``state['dataset']['pack']``)."""

    rows: int

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows}

    @classmethod
    def from_json(cls, pack: Any) -> PackRows | None:
        rows = pack.get("rows") if isinstance(pack, dict) else None
        return cls(int(rows)) if isinstance(rows, int) and is_int(rows, minimum=0, maximum=_MAX_ROWS) else None
