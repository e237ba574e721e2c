"""The steps of a run whose steps depend on the data, replayed from its ledgers.

With a Filter before the Batch (or ``errors="skip"``), or with ``Dataset.pack``, what
a step holds cannot be computed from the step number: it is what the run met. The
delivery ledger (thresher.loader.ledger) records it as the run goes; this module
replays the ledgers of a directory the way the run's restarts replayed the stream:

- a restore drops the lines its process wrote after the checkpoint it resumes from
  (a packed stream: the steps that end past the window and row it resumes at);
- a restart on another number of processes (``merge_states``) drops the lines every
  process of the ended segment wrote after the merged checkpoint, and numbers the
  new segment's steps from the checkpoint's step: the number of steps its processes
  had delivered (the most of them, when some stream had ended), as a training loop
  that takes one batch from every process per step counts them.

``process_steps(d, i)`` then gives, for every step t, the stream (its shard, what it
leaves out) and the line of process i's step t.

Example:
    >>> import tempfile, thresher as th
    >>> d = tempfile.mkdtemp()
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 20), th.IndexSampler(20),
    ...                        [th.FilterTransform(lambda x: x % 3 != 0), th.Batch(4)], ledger=d)
    >>> [b.tolist() for b in loader][:2]
    [[1, 2, 4, 5], [7, 8, 10, 11]]
    >>> steps = process_steps(d, 0)
    >>> stream, step = steps.locate(1)
    >>> step, stream.geometry.shard_count, len(steps)
    (LedgerStep(start=6, stop=12, delivered=4), 1, 4)
"""

from __future__ import annotations

import bisect
import glob
import itertools
import os
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from thresher._validate import is_int, user_path
from thresher.errors import ConfigError, IncompatibleStateError, InvalidStateError
from thresher.loader.exclusions import Consumed
from thresher.loader.ledger import LEDGER_SUFFIX, decode_ints, decode_line, ledger_path
from thresher.samplers.geometry import Geometry

__all__ = ["LedgerStep", "PackedStep", "PackedWindow", "ProcessSteps", "Stream", "check_fingerprint",
           "ledger_processes", "process_steps", "read_ledgers", "steps_at", "which_processes"]

_MAX = 2**62
_MAX_SHARDS = 2**16
_MAX_ROWS = 2**24  # rows of one packed window (thresher.dataset.packing numbers them below 2**24)
_MAX_WINDOW = 2**31


class LedgerStep(NamedTuple):
    """One step of one process: local positions [start, stop) consumed, ``delivered`` elements."""

    start: int
    stop: int
    delivered: int


class PackedStep(NamedTuple):
    """One step of a packed stream: ``parts`` is ``(window, first row, end row)`` per window it took."""

    parts: tuple[tuple[int, int, int], ...]

    @property
    def end(self) -> tuple[int, int]:
        """Where the stream stood after it: (window, rows of it taken)."""
        w, _, hi = self.parts[-1]
        return w, hi


@dataclass(frozen=True)
class PackedWindow:
    """The layout of one packed window (``PackedBlock.layout``): for each placed record, in stream
    order, its stream position, its length before truncation and its row."""

    positions: np.ndarray
    lengths: np.ndarray
    rows: np.ndarray


@dataclass
class Stream:
    """One shard of one run segment (a begin line and its resumptions), as the restarts left it."""

    path: str
    line: int
    geometry: Geometry
    fingerprint: str
    base: str
    first_at: int
    consumed: Consumed | None
    packed: bool
    steps: list[LedgerStep] = field(default_factory=list)
    packed_steps: list[PackedStep] = field(default_factory=list)
    windows: dict[int, PackedWindow] = field(default_factory=dict)
    parent: tuple[int, int, str] | None = None  # the (shards, block, base) of the segment a merged restart ended
    first_step: int | None = None  # the run's step number of its first step (None: unknown)

    @property
    def segment(self) -> tuple[int, int, str]:
        return self.geometry.shard_count, self.geometry.block_size, self.base

    def __len__(self) -> int:
        return len(self.packed_steps) if self.packed else len(self.steps)

    def resume(self, at: int, rows: int) -> None:
        """A restore at local position ``at`` (a packed stream: ``rows`` rows into window ``at``)."""
        self.steps = [s for s in self.steps if s.stop <= at]
        self.packed_steps = [s for s in self.packed_steps if s.end <= (at, rows)]


@dataclass(frozen=True)
class ProcessSteps:
    """The steps one process delivered, numbered as the run's steps (see ``locate``)."""

    process_index: int
    streams: tuple[Stream, ...]  # in step order, each with a known first_step

    def __len__(self) -> int:
        """One past the last step number the process delivered."""
        return max((s.first_step or 0) + len(s) for s in self.streams) if self.streams else 0

    def locate(self, step: int) -> tuple[Stream, Any]:
        """The stream of step ``step`` and its line (LedgerStep, or PackedStep for a packed stream).

        Raises ConfigError when the process delivered no step ``step``.
        """
        starts = [s.first_step or 0 for s in self.streams]
        k = bisect.bisect_right(starts, step) - 1
        while k >= 0:
            s = self.streams[k]
            i = step - (s.first_step or 0)
            if 0 <= i < len(s):
                return s, (s.packed_steps if s.packed else s.steps)[i]
            k -= 1
        where = self.streams[0].path if self.streams else "the ledger"
        raise ConfigError(f"{where} records {len(self)} steps of process {self.process_index}; it delivered no "
                          f"step {step} (not reached yet, past the end of its stream, or a step it had no batch for)")


def _int(rec: dict[str, Any], key: str, where: str, hi: int = _MAX, lo: int = 0) -> int:
    v = rec.get(key)
    if not isinstance(v, int) or not is_int(v, minimum=lo, maximum=hi):
        raise InvalidStateError(f"{where}: field {key!r} must be an int in [{lo}, {hi}], got {str(v)[:80]}")
    return int(v)


def _ints(rec: dict[str, Any], key: str, where: str, hi: int) -> list[int]:
    v = rec.get(key)
    if not isinstance(v, list) or not all(isinstance(x, int) and is_int(x, minimum=0, maximum=hi) for x in v):
        raise InvalidStateError(f"{where}: field {key!r} must be a list of ints in [0, {hi}], got {str(v)[:80]}")
    return v


def _window(rec: dict[str, Any], where: str) -> tuple[int, PackedWindow]:
    w, start = _int(rec, "w", where), _int(rec, "a", where)
    runs = _ints(rec, "o", where, _MAX_WINDOW)
    lengths, rows = decode_ints(rec.get("n"), _MAX), decode_ints(rec.get("r"), _MAX_ROWS)
    if lengths is None or rows is None:
        raise InvalidStateError(f"{where}: a malformed packed window: its lengths 'n' and rows 'r' must be ints "
                                "written by thresher.loader.ledger.encode_ints (lengths up to 2**62, rows below 2**24)")
    pairs = list(zip(runs[::2], runs[1::2], strict=False))
    ordered = all(a < e for a, e in pairs) and all(e <= a for (_, e), (a, _) in itertools.pairwise(pairs))
    if len(runs) % 2 or not ordered or sum(e - a for a, e in pairs) != len(lengths) or len(rows) != len(lengths):
        raise InvalidStateError(f"{where}: a malformed packed window (offsets {str(runs)[:80]} must be increasing "
                                f"runs naming one record per length and row; {len(lengths)} lengths, {len(rows)} rows)")
    offsets = np.concatenate([np.arange(a, e, dtype=np.int64) for a, e in pairs]) if pairs else np.zeros(0, np.int64)
    return w, PackedWindow(offsets + start, lengths, rows)


def _packed_step(rec: dict[str, Any], where: str) -> PackedStep:
    p = _ints(rec, "p", where, _MAX)
    parts = tuple((w, lo, hi) for w, lo, hi in zip(p[::3], p[1::3], p[2::3], strict=False))
    if not p or len(p) % 3 or not all(lo < hi <= _MAX_ROWS for _, lo, hi in parts):
        raise InvalidStateError(f"{where}: a malformed packed step {str(p)[:80]} (expected [window, first row, "
                                "end row, ...] with first row < end row)")
    return PackedStep(parts)


def _begin(rec: dict[str, Any], where: str, path: str, line: int, streams: dict[tuple[int, int, int, str], Stream],
           ends: dict[tuple[int, int, int, str], int]) -> Stream:
    g = Geometry(_int(rec, "index", where, _MAX_SHARDS), _int(rec, "shards", where, _MAX_SHARDS, 1),
                 _int(rec, "block", where, _MAX_WINDOW, 1))
    if g.shard_index >= g.shard_count:
        raise InvalidStateError(f"{where}: shard index {g.shard_index} is not below the shard count {g.shard_count}")
    base = rec.get("base")
    if not isinstance(base, str) or len(base) > 32:
        raise InvalidStateError(f"{where}: a begin line without a base (a short digest)")
    at = _int(rec, "at", where)
    pack = rec.get("pack")
    if pack is not None and not isinstance(pack, dict):
        raise InvalidStateError(f"{where}: field 'pack' must be {{'rows': int}}, got {str(pack)[:80]}")
    rows = _int(pack, "rows", where, _MAX_ROWS) if pack is not None else 0
    consumed = rec.get("consumed")
    try:
        excluded = Consumed.from_json(consumed) if consumed is not None else None
    except InvalidStateError as e:
        raise InvalidStateError(f"{where}: {e}") from None
    key = (g.shard_count, g.block_size, g.shard_index, base)
    stream = streams.get(key)
    if stream is None:
        stream = streams[key] = Stream(path, line, g, str(rec.get("fingerprint")), base, at, excluded, pack is not None)
    stream.resume(at, rows)
    merged = rec.get("merged")
    if merged is not None:
        layer, parent = (merged.get("layer"), merged.get("parent")) if isinstance(merged, dict) else (None, None)
        if not isinstance(layer, dict) or not isinstance(parent, str) or len(parent) > 32:
            raise InvalidStateError(f"{where}: a malformed merged checkpoint: {str(merged)[:120]}")
        P, b = _int(layer, "shards", where, _MAX_SHARDS, 1), _int(layer, "block", where, _MAX_WINDOW, 1)
        nexts = _ints(layer, "next", where, _MAX)
        if len(nexts) != P:
            raise InvalidStateError(f"{where}: a merged checkpoint names {len(nexts)} positions for {P} shards")
        stream.parent = (P, b, parent)
        for s, nxt in enumerate(nexts):
            ends[(P, b, s, parent)] = Geometry(s, P, b).first_at_or_after(nxt)
    return stream


def _read(path: str, streams: dict[tuple[int, int, int, str], Stream],
          ends: dict[tuple[int, int, int, str], int]) -> None:
    """Replays one ledger file into ``streams`` and notes where merged checkpoints ended the others."""
    current: Stream | None = None
    torn: int | None = None  # the line number of a torn line, which only a begin line (or the end) may follow
    with open(path, newline="\n") as f:
        for n, line in enumerate(f, 1):
            rec = decode_line(line)
            where = f"{path}, line {n}"
            if rec is None:
                torn = torn or n
                continue
            kind = rec.get("k")
            if torn is not None and kind != "begin":
                raise InvalidStateError(f"{path}, line {torn}: not a ledger line (corrupt, or torn and not followed "
                                        "by a restart); this file is not a thresher ledger or was damaged")
            torn = None
            if kind == "begin":
                current = _begin(rec, where, path, n, streams, ends)
                continue
            if current is None:
                raise InvalidStateError(f"{where}: a step before any begin line; this is not a thresher ledger")
            if kind == "s":
                a, e = _int(rec, "a", where), _int(rec, "e", where)
                if e < a:
                    raise InvalidStateError(f"{where}: a step ends at {e}, before it starts at {a}")
                current.steps.append(LedgerStep(a, e, _int(rec, "n", where)))
            elif kind == "pw":
                w, window = _window(rec, where)
                current.windows[w] = window
            elif kind == "pk":
                current.packed_steps.append(_packed_step(rec, where))
            elif kind != "end":
                raise InvalidStateError(f"{where}: unknown line kind {str(kind)[:40]!r}")


def read_ledgers(directory: str | os.PathLike[str]) -> list[Stream]:
    """Every stream of the ledgers in ``directory``, replayed, with its first step number where it is known."""
    files = sorted(glob.glob(os.path.join(user_path(directory), "*" + LEDGER_SUFFIX)))
    streams: dict[tuple[int, int, int, str], Stream] = {}
    ends: dict[tuple[int, int, int, str], int] = {}
    for path in files:
        _read(path, streams, ends)
    for key, at in ends.items():
        if key in streams:
            streams[key].steps = [s for s in streams[key].steps if s.stop <= at]
    by_segment: dict[tuple[int, int, str], list[Stream]] = {}
    for s in streams.values():
        by_segment.setdefault(s.segment, []).append(s)

    def first_step(s: Stream, depth: int = 0) -> int | None:
        if s.first_step is not None or depth > len(streams):
            return s.first_step
        if s.parent is None:
            return 0 if s.base == "fresh" and s.first_at == 0 and s.consumed is None else None
        before = [(first_step(x, depth + 1), len(x)) for x in by_segment.get(s.parent, [])]
        if not before or any(f is None for f, _ in before):
            return None
        return max((f or 0) + n for f, n in before)

    for s in streams.values():
        s.first_step = first_step(s)
    return list(streams.values())


def ledger_processes(directory: str | os.PathLike[str]) -> list[int]:
    """The process indices of the ledger files in ``directory``, in order."""
    out = []
    for path in glob.glob(os.path.join(user_path(directory), "process-*" + LEDGER_SUFFIX)):
        name = os.path.basename(path)[len("process-"):-len(LEDGER_SUFFIX)]
        if name.isdigit() and len(name) <= 6:
            out.append(int(name))
    return sorted(out)


def which_processes(directory: str | os.PathLike[str], process_index: int | None) -> list[int]:
    """The processes to explain: ``process_index``, or every process with a ledger in ``directory``."""
    if process_index is not None:
        if not is_int(process_index, minimum=0, maximum=2**16 - 1):
            raise ConfigError(f"process_index must be an int in [0, 2**16), got {process_index!r}")
        return [int(process_index)]
    procs = ledger_processes(directory)
    if not procs:
        raise ConfigError(f"{os.path.join(user_path(directory), 'process-<i>.ledger')} does not exist for any i: "
                          "explain reads the ledger the run wrote with DataLoader(..., ledger=DIR) or it.ledger(DIR)")
    return procs


def process_steps(directory: str | os.PathLike[str], process_index: int,
                  streams: list[Stream] | None = None) -> ProcessSteps:
    """The steps process ``process_index`` delivered, replayed from the ledgers in ``directory``.

    ``streams``: ``read_ledgers(directory)``, when already read. Raises ConfigError
    when the process has no ledger, or when its steps cannot be
    numbered (its ledger began after the run's start, or after a restart whose earlier
    segment kept no ledger); InvalidStateError when a line is not a ledger line.
    """
    path = ledger_path(user_path(directory), process_index)
    if not os.path.exists(path):
        raise ConfigError(f"{path} does not exist: explain reads the ledger the run wrote with "
                          "DataLoader(..., ledger=DIR) or it.ledger(DIR) (one file a process)")
    everything = read_ledgers(directory) if streams is None else streams
    own = [s for s in everything if s.geometry.shard_index == process_index]
    if not own:
        raise ConfigError(f"{path} holds no begin line: it is empty or not a thresher ledger")
    unknown = [s for s in own if s.first_step is None]
    if unknown:
        s = unknown[0]
        raise ConfigError(f"{s.path}, line {s.line}: this ledger began at position {s.first_at}, after the run's "
                          "start (or after a restart whose earlier segment kept no ledger), so the steps before it "
                          "are unknown; turn the ledger on from the first step")
    return ProcessSteps(process_index, tuple(sorted(own, key=lambda s: (s.first_step or 0, s.line))))


def steps_at(directory: str | os.PathLike[str], step: int, process_index: int | None, engine: Any,
             packed: bool) -> list[tuple[int, Stream, Any]]:
    """``(process, stream, line)`` of step ``step`` of ``process_index`` (None: of every process that has it).

    Raises IncompatibleStateError when a ledger is of another stream than ``engine``'s,
    ConfigError when no process has the step, or when the ledger is of a packed Dataset
    and ``packed`` is False (or the reverse).
    """
    streams = read_ledgers(directory)
    out = []
    missing: ConfigError | None = None
    for i in which_processes(directory, process_index):
        steps = process_steps(directory, i, streams)
        check_fingerprint(steps, engine)
        try:
            stream, line = steps.locate(step)
        except ConfigError as e:
            if process_index is not None:
                raise
            missing = missing or e
            continue
        if stream.packed and stream.parent is not None:
            raise ConfigError(f"{stream.path}, line {stream.line}: this packed run restarted on another number of "
                              "processes (merge_states); explain does not follow packed runs across such restarts")
        if stream.packed != packed:
            raise ConfigError(f"{stream.path}, line {stream.line}: this ledger was written by "
                              f"{'a packed Dataset' if stream.packed else 'a pipeline that does not pack'}; "
                              "explain it with the pipeline that wrote it")
        out.append((i, stream, line))
    if not out:
        assert missing is not None
        raise missing
    return out


def check_fingerprint(steps: ProcessSteps, engine: Any) -> None:
    """IncompatibleStateError when the ledger was written by another global stream than ``engine``'s."""
    for s in steps.streams:
        if engine is not None and s.fingerprint != engine.stream.fingerprint:
            raise IncompatibleStateError(
                f"{s.path}, line {s.line} was written by another global stream (fingerprint {s.fingerprint}) than "
                f"the pipeline's ({engine.stream.fingerprint}): explain it with the pipeline that wrote it")
