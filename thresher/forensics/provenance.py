"""``StepProvenance``: where every element of one step comes from (what ``explain`` returns).

Example:
    >>> import numpy as np, thresher as th
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10, shuffle=True, seed=1),
    ...                        [th.Batch(2)])
    >>> p = provenance(loader.engine.processor, 0, False, [(0, np.arange(2), np.arange(2))], SkipRanges())
    >>> p.positions.tolist(), len(p.record_keys)
    ([0, 1], 2)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from thresher.loader.skips import SkipRanges
from thresher.sources.protocol import record_locations

__all__ = ["PackedSegments", "StepProvenance", "provenance"]

_COLUMNS = ("process_indices", "positions", "global_positions", "epochs", "record_keys", "rng_seeds", "blocked")
_NAMES = ("process_index", "position", "global_position", "epoch", "record_key", "rng_seed", "blocked")


@dataclass(frozen=True)
class StepProvenance:
    """Where every element of one step comes from, in batch order, process after process.

    Attributes:
        step: the step number (counted as in the run without skips).
        skipped: the step is skipped (``set_state(..., skip_steps=...)``): it is never produced.
        process_indices, positions: the process and its local position of each element.
        global_positions, epochs, record_keys: int64 arrays.
        rng_seeds: uint64, each record's seed; the generator a RandomMap gets is
            ``thresher.transforms.random_map.RecordRng().seeded(seed, salt)``.
        random_maps: ``(name, salt)`` of each per-record RandomMap.
        locations: ``(file, index in file)`` of each record, or None if the source cannot tell.
        blocked: bool, the record is in the blocklist (``skip_records``): it is never delivered.
        delivered: for a step read from a ledger (a pipeline with a Filter), how many of its
            positions became elements; None when every position is an element.
        segments: for a packed Dataset (``pack``), where each record went in the step's rows
            (``PackedSegments``); the elements are then the step's segments, row after row.

    Example:
        >>> import thresher as th
        >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10), [th.Batch(2)])
        >>> p = th.explain(loader, 2)
        >>> len(p), p.record_keys.tolist(), p.records()[0]["position"], p.skipped
        (2, [4, 5], 4, False)
    """

    step: int
    skipped: bool
    process_indices: np.ndarray
    positions: np.ndarray
    global_positions: np.ndarray
    epochs: np.ndarray
    record_keys: np.ndarray
    rng_seeds: np.ndarray
    random_maps: tuple[tuple[str, int], ...]
    locations: tuple[tuple[str, int], ...] | None
    blocked: np.ndarray
    delivered: int | None = None
    segments: PackedSegments | None = None

    def __len__(self) -> int:
        return len(self.positions)

    def records(self) -> list[dict[str, Any]]:
        """One dict per element (JSON-serialisable)."""
        cols = [getattr(self, c).tolist() for c in _COLUMNS]
        out = [dict(zip(_NAMES, row, strict=False)) for row in zip(*cols, strict=False)]
        if self.locations is not None:
            for d, (f, i) in zip(out, self.locations, strict=False):
                d["file"], d["index_in_file"] = f, i
        if self.segments is not None:
            for d, seg in zip(out, self.segments.records(), strict=False):
                d.update(seg)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "skipped": self.skipped, "delivered": self.delivered,
                "random_maps": [{"operation": n, "salt": s} for n, s in self.random_maps],
                "elements": self.records()}

    def __str__(self) -> str:
        head = f"step {self.step}{' (skipped: never produced)' if self.skipped else ''}: {len(self)} elements"
        if self.delivered is not None:
            head = (f"step {self.step}: {len(self)} positions consumed, {self.delivered} delivered "
                    "(the others were dropped by a Filter or errors='skip')")
        packed = self.segments is not None
        if self.segments is not None:
            head = (f"step {self.step}: {len(self)} segments in {self.segments.num_rows} packed rows "
                    "(row, segment id, tokens [start, start+length) of the row = the record's first length tokens)")
        rows = [head, "process  position  global_position  epoch  record_key  rng_seed            file:index"
                + ("  row  segment  start  length  record_length" if packed else "")]
        for d in self.records():
            where = f"{d['file']}:{d['index_in_file']}" if "file" in d else "-"
            rows.append(f"{d['process_index']:>7}  {d['position']:>8}  {d['global_position']:>15}  "
                        f"{d['epoch']:>5}  {d['record_key']:>10}  {d['rng_seed']:#018x}  {where}"
                        + (f"  {d['row']:>3}  {d['segment_id']:>7}  {d['start']:>5}  {d['length']:>6}  "
                           f"{d['record_length']:>13}" if packed else "")
                        + ("  (blocked: never delivered)" if d["blocked"] else ""))
        return "\n".join(rows)


@dataclass(frozen=True)
class PackedSegments:
    """Where the records of a packed step went: one entry per segment, row after row.

    Attributes (int64 arrays, one entry per element of the StepProvenance):
        rows: the row of the step's batch (0-based; 0 for a step without a batch).
        segment_ids: the segment's id in its row (1, 2, ...: the row's ``segment_ids`` value).
        starts: the segment's first column in the row.
        lengths: its tokens: the record's first ``length`` tokens (after the maps before pack).
        record_lengths: the record's length; more than ``length`` when ``truncate=True`` cut it.
        seq_len: the rows' length.
        num_rows: the rows of the step.

    Example:
        >>> import numpy as np
        >>> s = PackedSegments(*(np.array(x) for x in ([0, 0], [1, 2], [0, 3], [3, 1], [3, 1])), 4, 1)
        >>> s.records()[1]
        {'row': 0, 'segment_id': 2, 'start': 3, 'length': 1, 'record_length': 1}
    """

    rows: np.ndarray
    segment_ids: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    record_lengths: np.ndarray
    seq_len: int
    num_rows: int

    def records(self) -> list[dict[str, int]]:
        """One dict per segment."""
        cols = [x.tolist() for x in (self.rows, self.segment_ids, self.starts, self.lengths, self.record_lengths)]
        names = ("row", "segment_id", "start", "length", "record_length")
        return [dict(zip(names, row, strict=True)) for row in zip(*cols, strict=True)]


def provenance(processor: Any, step: int, skipped: bool, pieces: list[tuple[int, np.ndarray, np.ndarray]],
                blocked: SkipRanges, delivered: int | None = None,
                segments: PackedSegments | None = None) -> StepProvenance:
    """The provenance of ``pieces``: (process, local positions, global positions) of one step of the
    records read by ``processor`` (its sampler names them, its source locates them)."""
    sampler = processor.sampler
    procs_col = np.concatenate([np.full(len(p[1]), p[0], dtype=np.int64) for p in pieces])
    local = np.concatenate([p[1] for p in pieces])
    glob = np.concatenate([p[2] for p in pieces])
    keys, epochs = sampler.record_keys(glob)
    seeds = sampler.rng_seeds(glob)
    locs = record_locations(processor.source, keys.tolist())
    randoms = tuple((op.name, int(op.salt)) for op in processor.plan.record_ops if op.random)
    return StepProvenance(step, skipped, procs_col, local, glob, epochs.astype(np.int64), keys.astype(np.int64),
                          seeds, randoms, None if locs is None else tuple(locs), blocked.contains(keys), delivered,
                          segments)
