"""The positions of a step of a run whose steps depend on the data, read from its ledger.

With a Filter before the Batch (or ``errors="skip"``) the positions a step consumed
cannot be computed from the step number: they are what the run met. The delivery
ledger (``DataLoader(..., ledger=DIR)``, see thresher.loader.ledger) records them as
it goes, a range a step; this module replays one process's ledger the way a restart
replays it (a restore drops the lines written after the checkpoint it resumes from)
and gives the range of step t.

Example:
    >>> import tempfile, thresher as th
    >>> d = tempfile.mkdtemp()
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 20), th.IndexSampler(20),
    ...                        [th.FilterTransform(lambda x: x % 3 != 0), th.Batch(4)], ledger=d)
    >>> [b.tolist() for b in loader][:2]
    [[1, 2, 4, 5], [7, 8, 10, 11]]
    >>> steps = ledger_steps(d, 0)
    >>> steps.ranges[1], steps.geometry.shard_count
    (LedgerStep(start=6, stop=12, delivered=4), 1)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, NamedTuple

from thresher.errors import ConfigError, IncompatibleStateError, InvalidStateError
from thresher.loader.ledger import decode_line, ledger_path
from thresher.samplers.geometry import ShardGeometry

__all__ = ["LedgerStep", "LedgerSteps", "ledger_steps"]


class LedgerStep(NamedTuple):
    """One step of one process: local positions [start, stop) consumed, ``delivered`` elements."""

    start: int
    stop: int
    delivered: int


@dataclass(frozen=True)
class LedgerSteps:
    """The steps one process delivered, in order, as the run's restarts left them."""

    path: str
    geometry: ShardGeometry
    fingerprint: str
    ranges: tuple[LedgerStep, ...]


def _int(rec: dict[str, Any], key: str, where: str) -> int:
    v = rec.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 2**62:
        raise InvalidStateError(f"{where}: field {key!r} must be an int in [0, 2**62], got {v!r}")
    return v


def ledger_steps(directory: str | os.PathLike[str], process_index: int) -> LedgerSteps:
    """Replays ``directory/process-<process_index>.ledger`` into the process's steps.

    Raises ConfigError when there is no such ledger, when it began after the run's start
    (the steps before it are unknown), or when the run changed its number of processes
    (``merge_states``: steps there are not one process's ranges; not supported yet);
    InvalidStateError when a line is not a ledger line.
    """
    path = ledger_path(os.fspath(directory), process_index)
    if not os.path.exists(path):
        raise ConfigError(f"{path} does not exist: explain reads the ledger the run wrote with "
                          "DataLoader(..., ledger=DIR) (one file a process)")
    geometry: ShardGeometry | None = None
    fingerprint = ""
    steps: list[LedgerStep] = []
    with open(path, newline="\n") as f:
        for n, line in enumerate(f, 1):
            rec = decode_line(line)
            where = f"{path}, line {n}"
            if rec is None:  # a torn last line (a kill): its step was never checkpointed
                continue
            kind = rec.get("k")
            if kind == "begin":
                if rec.get("merged") is not None or rec.get("consumed") is not None:
                    raise ConfigError(f"{where}: the run restarted here on another number of processes "
                                      "(merge_states); explain from the ledger does not follow such restarts yet")
                g = ShardGeometry(_int(rec, "index", where), _int(rec, "shards", where), _int(rec, "block", where))
                if geometry is not None and g != geometry:
                    raise ConfigError(f"{where}: the run restarted with another geometry ({g} after {geometry}); "
                                      "explain from the ledger needs one geometry for the whole run")
                at = _int(rec, "at", where)
                if geometry is None and at != 0:
                    raise ConfigError(f"{where}: this ledger began at position {at}, after the run's start, so "
                                      "the steps before it are unknown; turn the ledger on from the first step")
                geometry, fingerprint = g, str(rec.get("fingerprint"))
                steps = [s for s in steps if s.stop <= at]  # a restore from a checkpoint at position `at`
            elif kind == "s":
                if geometry is None:
                    raise InvalidStateError(f"{where}: a step before any begin line; this is not a thresher ledger")
                steps.append(LedgerStep(_int(rec, "a", where), _int(rec, "e", where), _int(rec, "n", where)))
            elif kind != "end":
                raise InvalidStateError(f"{where}: unknown line kind {kind!r}")
    if geometry is None:
        raise ConfigError(f"{path} holds no begin line: it is empty or not a thresher ledger")
    return LedgerSteps(path, geometry, fingerprint, tuple(steps))


def check_fingerprint(steps: LedgerSteps, engine: Any) -> None:
    """IncompatibleStateError when the ledger was written by another global stream than ``engine``'s."""
    if engine is not None and steps.fingerprint != engine.stream.fingerprint:
        raise IncompatibleStateError(
            f"{steps.path} was written by another global stream (fingerprint {steps.fingerprint}) than the "
            f"pipeline's ({engine.stream.fingerprint}): explain it with the pipeline that wrote it")
