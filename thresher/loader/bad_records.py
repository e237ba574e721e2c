"""The bad-record policy: ``DataLoader(..., errors="skip", max_skipped=...)``.

With ``errors="skip"`` a record whose read or per-record operation raises is dropped
from the stream, like an element a Filter removes. Whether a record fails depends
only on the record (reads and operations are pure functions of it), so the same
records are dropped for every worker count and on every resume. Each drop is a
:class:`DroppedRecord` carried with its chunk to the iterator, which logs it (logger
``thresher``, with key, file, position and the error), counts it in
``it.stats().skipped_records``, lists it in ``it.skipped_records`` and raises once
more than ``max_skipped`` were dropped: a count, or a fraction f of the positions
the iterator has consumed (checked after each chunk; at least one record is allowed
while fewer than 1/f positions were read). The default, ``errors="raise"``, stops at the first failure.

Example:
    >>> import thresher as th
    >>> def parse(x):
    ...     if x % 5 == 3:
    ...         raise ValueError(f"bad record {x}")
    ...     return x
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 12), th.IndexSampler(12), [parse, th.Batch(4)],
    ...                        errors="skip", max_skipped=2)
    >>> it = iter(loader)
    >>> [b.tolist() for b in it]
    [[0, 1, 2, 4], [5, 6, 7, 9], [10, 11]]
    >>> [(d.record_key, d.error) for d in it.skipped_records], it.stats().skipped_records
    ([(3, 'ValueError: bad record 3'), (8, 'ValueError: bad record 8')], 2)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from thresher._validate import check_count, is_int
from thresher.errors import ConfigError, TransformError
from thresher.sources.protocol import read_many, record_locations
from thresher.transforms.kinds import ElementFailure, Operation

__all__ = ["BadRecords", "DroppedRecord", "MaxSkipped", "apply_dropping", "check_policy", "read_dropping"]

_log = logging.getLogger("thresher")

MaxSkipped = int | float | None


def check_policy(errors: str, max_skipped: MaxSkipped) -> None:
    """Raises ConfigError for an unknown policy or a bad ``max_skipped``."""
    if errors not in ("raise", "skip"):
        raise ConfigError(f"errors must be 'raise' (stop at the first failing record) or 'skip' (drop it), "
                          f"got {errors!r}")
    if max_skipped is None:
        return
    count = is_int(max_skipped, numpy=False)
    if not count and (isinstance(max_skipped, bool) or not isinstance(max_skipped, float)):
        raise ConfigError(f"max_skipped must be a count (int >= 0), a fraction (float in [0, 1)) or None, "
                          f"got {max_skipped!r}")
    if count:
        check_count(max_skipped, "max_skipped as a count", minimum=0)
    if isinstance(max_skipped, float) and not 0.0 <= max_skipped < 1.0:
        raise ConfigError(f"max_skipped as a fraction must be in [0, 1), got {max_skipped}")
    if errors != "skip":
        raise ConfigError("max_skipped needs errors='skip'")


@dataclass(frozen=True)
class DroppedRecord:
    """A record dropped by ``errors="skip"``: where it is, and what failed.

    Example:
        >>> print(DroppedRecord(5, 9, 42, "read", "OSError: bad checksum"))
        record key 42 at position 5 (global position 9) dropped: read failed: OSError: bad checksum
    """

    position: int
    global_position: int
    record_key: int
    stage: str  # "read" or the operation's name
    error: str
    file: str | None = None
    index_in_file: int | None = None

    def __str__(self) -> str:
        where = f" ({self.file} record {self.index_in_file})" if self.file is not None else ""
        return (f"record key {self.record_key}{where} at position {self.position} (global position "
                f"{self.global_position}) dropped: {self.stage} failed: {self.error}")


def _dropped(source: Any, i: int, positions: np.ndarray, keys: np.ndarray, globals_: np.ndarray, stage: str,
             error: BaseException) -> DroppedRecord:
    key = int(keys[i])
    try:
        loc = record_locations(source, [key])
    except Exception:
        loc = None
    file, index = loc[0] if loc else (None, None)
    return DroppedRecord(int(positions[i]), int(globals_[i]), key, stage, f"{type(error).__name__}: {error}",
                         file, index)


def read_dropping(source: Any, key_list: list[int], positions: np.ndarray, keys: np.ndarray,
                  globals_: np.ndarray, dropped: list[DroppedRecord]) -> tuple[list[Any], np.ndarray | None]:
    """Reads the keys; a batched read that fails is retried key by key and the failing keys dropped.

    Returns the elements read and the indices (into the chunk) they belong to (None: all).
    """
    try:
        return read_many(source, key_list), None
    except Exception:
        pass
    elements: list[Any] = []
    alive: list[int] = []
    for i, key in enumerate(key_list):
        try:
            elements.append(read_many(source, [key])[0])
            alive.append(i)
        except Exception as e:
            dropped.append(_dropped(source, i, positions, keys, globals_, "read", e))
    return elements, np.asarray(alive, dtype=np.int64)


def apply_dropping(op: Operation, elements: list[Any], ctx: Any, source: Any, positions: np.ndarray,
                   keys: np.ndarray, globals_: np.ndarray, dropped: list[DroppedRecord]) -> list[Any]:
    """Runs ``op`` on the elements; an element it fails on is dropped and ``op`` runs again on the rest.

    ``ctx.alive`` (indices into the chunk of the current elements) is kept up to date,
    so the per-record generators of the survivors are theirs.
    """
    while True:
        try:
            out, kept_idx = op.apply_records(elements, ctx)
        except ElementFailure as f:
            j = f.index
            alive = np.arange(len(elements), dtype=np.int64) if ctx.alive is None else ctx.alive
            dropped.append(_dropped(source, int(alive[j]), positions, keys, globals_, op.name, f.error))
            ctx.alive = np.delete(alive, j)
            elements = elements[:j] + elements[j + 1:]
            continue
        if kept_idx is not None:
            idx = np.asarray(kept_idx, dtype=np.int64)
            ctx.alive = idx if ctx.alive is None else ctx.alive[idx]
        return out


class BadRecords:
    """The iterator's side: logs and counts the drops of each chunk, in order, and enforces the limit.

    Example:
        >>> bad = BadRecords(max_skipped=1)
        >>> bad.add(0, 8, [DroppedRecord(3, 3, 3, "read", "OSError: x")])
        1
        >>> bad.add(8, 16, None), len(bad.dropped)
        (0, 1)
    """

    def __init__(self, max_skipped: MaxSkipped) -> None:
        self.max_skipped = max_skipped
        self.dropped: list[DroppedRecord] = []
        self.positions = 0  # positions consumed since the iterator started (for a fraction)

    def add(self, start: int, stop: int, dropped: list[DroppedRecord] | None) -> int:
        """Notes a chunk of positions [start, stop) and its drops; returns how many it dropped."""
        self.positions += stop - start
        if not dropped:
            return 0
        for d in dropped:
            _log.warning("thresher: errors='skip': %s", d)
        self.dropped.extend(dropped)
        limit = self.max_skipped
        if isinstance(limit, float):
            allowed = max(1, int(limit * self.positions)) if limit > 0 else 0
            what = f"{limit:.2%} of the {self.positions} positions read so far"
        else:
            allowed = limit if limit is not None else -1
            what = f"max_skipped={limit}"
        if allowed >= 0 and len(self.dropped) > allowed:
            last = self.dropped[-1]
            raise TransformError(
                f"errors='skip' dropped {len(self.dropped)} records, more than {what}; the last: {last}. "
                "Fix or remove the bad records, or raise max_skipped",
                record_key=last.record_key, position=last.position)
        return len(dropped)
