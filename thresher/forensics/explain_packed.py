"""``explain`` for a packed Dataset (``pack(seq_len)``, then ``batch``): which records, cut how, made step t.

A packed step is rows of packed windows, and which rows a window has depends on the
lengths of its records: the ledger of the run (``it.ledger(DIR)``) records, per window,
where each record went (its offset in the window, its length, its row) and, per
step, the windows and rows it took. From those this module names every segment of
the step: the record (by the records' stage: position, epoch, record key, file and
index, random-map seeds) and where it lies (row, segment id, first column, length).
Nothing is read: the answer comes from the ledger and the pipeline's arithmetic.

Example:
    >>> import tempfile, numpy as np, thresher as th
    >>> d = tempfile.mkdtemp()
    >>> ds = th.Dataset.source([np.arange(n) for n in (3, 1, 2, 4)]).pack(4).batch(2)
    >>> it = iter(ds)
    >>> it.ledger(d)
    >>> batches = list(it)
    >>> p = th.explain(ds, 0, ledger=d)
    >>> p.record_keys.tolist(), p.segments.rows.tolist(), p.segments.starts.tolist()
    ([0, 1, 2], [0, 0, 1], [0, 3, 0])
    >>> batches[0]["segment_ids"].tolist()
    [[1, 1, 1, 2], [1, 1, 0, 0]]
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from thresher.errors import ConfigError, InvalidStateError
from thresher.forensics.ledger_steps import PackedStep, Stream, steps_at
from thresher.forensics.provenance import PackedSegments, StepProvenance, provenance
from thresher.loader.skips import SkipRanges

__all__ = ["explain_packed"]


def _segments(stream: Stream, step: PackedStep, seq_len: int, row_base: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """The positions of the records of ``step`` in row order, and (rows, ids, starts, lengths, record lengths)."""
    positions, cols = [], []
    for w, lo, hi in step.parts:
        window = stream.windows.get(w)
        if window is None:
            raise InvalidStateError(f"{stream.path}: a packed step takes rows of window {w}, which has no window "
                                    "line before it; the ledger is damaged")
        if window.rows.size and hi > int(window.rows.max()) + 1:
            raise InvalidStateError(f"{stream.path}: a packed step takes rows [{lo}, {hi}) of window {w}, which "
                                    f"has {int(window.rows.max()) + 1} rows; the ledger is damaged")
        idx = np.nonzero((window.rows >= lo) & (window.rows < hi))[0]  # stream order
        idx = idx[np.argsort(window.rows[idx], kind="stable")]  # row after row, stream order inside a row
        rows = window.rows[idx]
        lengths = window.lengths[idx]
        taken = np.minimum(lengths, seq_len)
        first = np.ones(len(idx), dtype=bool)
        first[1:] = rows[1:] != rows[:-1]
        run_start = np.maximum.accumulate(np.where(first, np.arange(len(idx)), 0)) if len(idx) else idx
        ids = np.arange(len(idx)) - run_start + 1
        ends = np.cumsum(taken)
        starts = ends - taken - (ends - taken)[run_start] if len(idx) else taken
        positions.append(window.positions[idx])
        cols.append(np.stack([rows - lo + row_base, ids, starts, taken, lengths]) if len(idx)
                    else np.zeros((5, 0), dtype=np.int64))
        row_base += hi - lo
    return np.concatenate(positions), [np.concatenate([c[k] for c in cols]) for k in range(5)]


def explain_packed(compiled: Any, step: int, process_index: int | None,
                   directory: str | os.PathLike[str] | None) -> StepProvenance:
    """The provenance of step ``step`` of a packed Dataset (``compiled``: its ``Dataset.compile()``)."""
    if directory is None:
        raise ConfigError("the rows of a packed Dataset depend on the lengths of its records, so the records of a "
                          "step cannot be computed from the step number: write a ledger as the run goes "
                          "(it = iter(ds); it.ledger(DIR)) and pass it: explain(ds, step, ledger=DIR) or "
                          "thresher explain --ledger DIR")
    view = compiled.loader.engine.processor.source
    inner = view.processor
    if type(inner.source).__module__.startswith("thresher.dataset"):
        raise ConfigError(f"this Dataset packs the records of a {type(inner.source).__name__} (a slice, mixture, "
                          "interleave, repeat or cache of other datasets), whose keys are positions in that view, not "
                          "records of a source; explain names the records of a Dataset that packs a source directly")
    pieces: list[tuple[int, np.ndarray, np.ndarray]] = []
    cols: list[list[np.ndarray]] = []
    rows = 0
    for i, stream, line in steps_at(directory, step, process_index, compiled.loader.engine, packed=True):
        positions, seg = _segments(stream, line, view.seq_len, 0)  # rows of each process's batch
        rows += sum(hi - lo for _, lo, hi in line.parts)
        pieces.append((i, positions, positions))  # the records' stage is not sharded: local = global
        cols.append(seg)
    rows_of, ids, starts, lengths, record_lengths = (np.concatenate([c[k] for c in cols]).astype(np.int64)
                                                     for k in range(5))
    segments = PackedSegments(rows_of, ids, starts, lengths, record_lengths, int(view.seq_len), rows)
    return provenance(inner, step, False, pieces, SkipRanges(), None, segments)
