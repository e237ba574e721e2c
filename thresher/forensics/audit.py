"""``audit``: did every record of every epoch arrive exactly once? Read from the ledgers.

The ledgers (thresher.loader.ledger) say which local positions each process consumed
in each run segment. The audit replays them:

1. Each process's file is read in order. A ``begin`` line starts (or resumes) a
   *stream*: one shard (index, count, block) leaving out one set of positions consumed
   before (its ``base``). A stream resumed at position p drops its own lines past p:
   they were delivered after the checkpoint it resumed from, and the training state
   that consumed them was lost with the preemption.
2. A ``begin`` after ``merge_states`` names the segment the checkpoint ended (its
   ``parent`` base and every shard's next position): those streams' lines past the
   checkpoint are dropped too.
3. Each kept line's positions, less those its stream left out as consumed before,
   are mapped to global positions and counted. Every global position below the
   *frontier* (the least next position of the streams still running, or the end of
   the stream once they all ended) must be consumed exactly once, unless a skipped
   step left it out. Consumed means delivered, or dropped by a Filter, by
   ``errors="skip"`` or by the blocklist: all pure functions of the record, so a
   position consumed once is a record delivered once if it passes them.

Positions are named by epoch and record key with the run's own sampler (its
configuration is in the ledger). The cost is linear in the positions audited.

Example:
    >>> import tempfile, thresher as th
    >>> d = tempfile.mkdtemp()
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10, num_epochs=2),
    ...                        [th.Batch(4)], ledger=d)
    >>> _ = list(loader)
    >>> report = th.forensics.audit(d)
    >>> report.ok, report.frontier, report.consumed
    (True, 20, 20)
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from thresher._validate import is_int, user_path
from thresher.errors import InvalidStateError
from thresher.loader.exclusions import Consumed
from thresher.loader.ledger import LEDGER_SUFFIX, decode_line
from thresher.loader.skips import SkipRanges
from thresher.samplers.geometry import Geometry
from thresher.samplers.index_sampler import IndexSampler

__all__ = ["AuditReport", "audit"]

_Key = tuple[int, int, int, str]  # shard count, block size, shard index, base
_MAX_LISTED = 20


@dataclass(frozen=True)
class AuditReport:
    """What ``audit`` found.

    Attributes:
        ok: every position below the frontier consumed exactly once (none missed, none repeated).
        frontier: the global position up to which the stream was checked.
        consumed: global positions consumed (delivered, or left out by a Filter, errors="skip"
            or the blocklist).
        repeated: ``{"epoch", "record_key", "global_position", "times"}`` per position consumed twice or more.
        missed: ``{"epoch", "record_key", "global_position"}`` per position below the frontier never consumed.
        skipped: positions left out by skipped steps; blocked: positions whose record is blocked.
        before_ledger: positions consumed before the ledgers began (a ledger turned on mid-run, or
            after a restart whose earlier segments kept none), as the begin lines say.
        segments: begin lines read; torn_lines: lines cut short or corrupt (skipped); files: ledgers read.
    """

    ok: bool
    frontier: int
    consumed: int
    repeated: list[dict[str, int]] = field(default_factory=list)
    missed: list[dict[str, int]] = field(default_factory=list)
    skipped: int = 0
    blocked: int = 0
    before_ledger: int = 0
    segments: int = 0
    torn_lines: int = 0
    files: int = 0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def __str__(self) -> str:
        head = (f"{'OK' if self.ok else 'FAILED'}: {self.consumed} positions consumed below frontier "
                f"{self.frontier} ({self.files} ledgers, {self.segments} segments); {len(self.repeated)} repeated, "
                f"{len(self.missed)} missed, {self.skipped} in skipped steps, {self.blocked} blocked, "
                f"{self.before_ledger} before the ledger, {self.torn_lines} torn lines")
        rows = [head]
        for what, items in (("repeated", self.repeated), ("missed", self.missed)):
            for d in items[:_MAX_LISTED]:
                times = f" x{d['times']}" if "times" in d else ""
                rows.append(f"  {what}: epoch {d['epoch']} record key {d['record_key']} "
                            f"(global position {d['global_position']}){times}")
            if len(items) > _MAX_LISTED:
                rows.append(f"  ... and {len(items) - _MAX_LISTED} more {what}")
        return "\n".join(rows)


@dataclass
class _Stream:
    begin: dict[str, Any]
    ranges: list[tuple[int, int]] = field(default_factory=list)
    ended: bool = False
    skips: SkipRanges = field(default_factory=SkipRanges)  # of all its begin lines
    blocked: SkipRanges = field(default_factory=SkipRanges)
    first_at: int | None = None  # where its first begin line started it
    parent: str | None = None  # the base of the segment its merged checkpoint ended

    def before(self, key: _Key, g: np.ndarray, bases: set[str]) -> np.ndarray:
        """Which global positions ``g`` this stream says were consumed before any ledger began:
        for a stream of the run's first segment that began past position 0 (a ledger turned on
        mid-run), its shard's positions before that; after a merged restart whose earlier
        segment kept no ledger (its base is not in ``bases``), what its base leaves out."""
        consumed = self.begin.get("consumed")
        if consumed is not None:
            if self.parent in bases:  # the earlier segments' own lines account for them
                return np.zeros(g.shape, dtype=bool)
            return Consumed.from_json(consumed).contains(g)
        P, b, s, _ = key
        start = Geometry(s, P, b).to_global(self.first_at or 0)
        return ((g // b) % P == s) & (g < start)

    def resume(self, begin: dict[str, Any], where: str) -> None:
        """A begin line of this stream: its lines past the position it resumes at are dropped."""
        at = _int(begin, "at", where)
        if self.first_at is None:
            self.first_at = at
        self.truncate(at)
        self.skips = self.skips.union(SkipRanges.from_json(begin.get("skips") or [], f"{where}: skips"))
        self.blocked = self.blocked.union(
            SkipRanges.from_json(begin.get("blocked") or [], f"{where}: blocked", "record key"))

    def truncate(self, at: int) -> None:
        self.ranges = [(a, min(e, at)) for a, e in self.ranges if a < at]
        self.ended = False


def _int(d: dict[str, Any], k: str, where: str) -> int:
    v = d.get(k)
    if not isinstance(v, int) or not is_int(v, minimum=0, maximum=2**62):
        raise InvalidStateError(f"{where}: field {k!r} must be an int in [0, 2**62], got {v!r}")
    return int(v)


def _key(begin: dict[str, Any], where: str) -> _Key:
    base = begin.get("base")
    if not isinstance(base, str):
        raise InvalidStateError(f"{where}: a begin line without a base")
    return (_int(begin, "shards", where), _int(begin, "block", where), _int(begin, "index", where), base)


def _read(path: str, streams: dict[_Key, _Stream], ends: dict[_Key, int]) -> tuple[int, int]:
    """Replays one ledger into ``streams``; notes the merged checkpoints' ends; (begins, torn lines)."""
    begins = torn = 0
    current: _Stream | None = None
    with open(path, newline="\n") as f:
        for n, line in enumerate(f, 1):
            rec = decode_line(line)
            where = f"{path}, line {n}"
            if rec is None:
                torn += 1
                continue
            kind = rec.get("k")
            if kind == "begin":
                begins += 1
                key = _key(rec, where)
                current = streams.setdefault(key, _Stream(rec))
                current.resume(rec, where)
                merged = rec.get("merged")
                if isinstance(merged, dict):
                    layer, parent = merged.get("layer"), merged.get("parent")
                    if not isinstance(layer, dict) or not isinstance(parent, str):
                        raise InvalidStateError(f"{where}: a malformed merged checkpoint: {merged!r}")
                    current.parent = parent
                    P, b = _int(layer, "shards", where), _int(layer, "block", where)
                    for s, g in enumerate(layer.get("next") or []):
                        ends[(P, b, s, parent)] = Geometry(s, P, b).first_at_or_after(int(g))
            elif kind in ("s", "end"):
                if current is None:
                    raise InvalidStateError(f"{where}: a step before any begin line; this is not a thresher ledger")
                current.ranges.append((_int(rec, "a", where), _int(rec, "e", where)))
                current.ended = kind == "end"
            elif kind not in ("pw", "pk"):  # a packed Dataset's windows and steps: explain reads them
                raise InvalidStateError(f"{where}: unknown line kind {str(kind)[:40]!r}")
    return begins, torn


def _positions(key: _Key, stream: _Stream) -> np.ndarray:
    P, b, s, _ = key
    geometry = Geometry(s, P, b)
    parts = [geometry.to_global_array(np.arange(a, e, dtype=np.int64)) for a, e in stream.ranges if e > a]
    g = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    consumed = stream.begin.get("consumed")
    if consumed is not None and g.size:
        g = g[~Consumed.from_json(consumed).contains(g)]
    return g


def audit(directory: str | os.PathLike[str]) -> AuditReport:
    """Checks the ledgers in ``directory``: each record of each epoch delivered exactly once.

    Raises InvalidStateError when there is no ledger, when ledgers of different
    streams are mixed, or when a line is not a ledger line. See the module docstring
    for what is checked.
    """
    files = sorted(glob.glob(os.path.join(user_path(directory), "*" + LEDGER_SUFFIX)))
    if not files:
        raise InvalidStateError(f"{user_path(directory)} holds no ledger (process-<i>{LEDGER_SUFFIX}); write them "
                                "with DataLoader(..., ledger=DIR) or it.ledger(DIR)")
    streams: dict[_Key, _Stream] = {}
    ends: dict[_Key, int] = {}
    begins = torn = 0
    for path in files:
        b, t = _read(path, streams, ends)
        begins, torn = begins + b, torn + t
    if not streams:
        raise InvalidStateError(f"{user_path(directory)}: the ledgers hold no begin line")
    prints = {s.begin.get("fingerprint") for s in streams.values()}
    if len(prints) > 1:
        raise InvalidStateError(f"{user_path(directory)} mixes the ledgers of different streams "
                                f"(fingerprints {sorted(map(str, prints))}); audit one run per directory")
    for key, at in ends.items():
        if key in streams:
            streams[key].truncate(at)
    skips, blocked = SkipRanges(), SkipRanges()
    frontier: int | None = None
    parts = []
    for key, stream in streams.items():
        parts.append(_positions(key, stream))
        skips, blocked = skips.union(stream.skips), blocked.union(stream.blocked)
        if key not in ends:  # still running at the end of the ledgers
            last = stream.ranges[-1][1] if stream.ranges else _int(stream.begin, "at", "begin")
            reached = Geometry(key[2], key[0], key[1]).to_global(last)
            frontier = reached if frontier is None else min(frontier, reached)
    info: Any = next(iter(streams.values())).begin.get("stream")
    try:
        sampler = IndexSampler(info["num_records"], shuffle=info["shuffle"], seed=info["seed"],
                               num_epochs=info["num_epochs"])
    except (TypeError, KeyError) as e:
        raise InvalidStateError(f"{user_path(directory)}: a begin line has a malformed stream {info!r}") from e
    g = np.concatenate(parts)
    frontier = frontier or 0
    counts = np.bincount(g, minlength=frontier) if g.size else np.zeros(frontier, dtype=np.int64)
    wanted = np.arange(frontier, dtype=np.int64)
    earlier = np.zeros(frontier, dtype=bool)  # consumed before the ledgers began, as their begin lines say
    bases = {key[3] for key in streams}
    for key, stream in streams.items():
        earlier |= stream.before(key, wanted, bases)
    unseen = (counts[:frontier] == 0) & ~skips.contains(wanted)
    missed_at = wanted[unseen & ~earlier]
    repeated_at = np.nonzero(counts > 1)[0].astype(np.int64)

    def named(at: np.ndarray) -> list[dict[str, int]]:
        keys, epochs = sampler.record_keys(at)
        return [{"epoch": int(e), "record_key": int(k), "global_position": int(p)}
                for p, k, e in zip(at.tolist(), keys.tolist(), epochs.tolist(), strict=True)]

    repeated = named(repeated_at)
    for d in repeated:
        d["times"] = int(counts[d["global_position"]])
    keys, _ = sampler.record_keys(wanted)
    return AuditReport(not repeated and not missed_at.size, frontier, int((counts > 0).sum()), repeated,
                       named(missed_at), int(skips.contains(wanted).sum()),
                       int((blocked.contains(keys) & (counts[:frontier] > 0)).sum()), int((unseen & earlier).sum()),
                       begins, torn, len(files))
