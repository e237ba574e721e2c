"""The iterator state: a small JSON dict, checked before it is applied.

Two things are kept apart (docs/architecture.md, invariant 5): ``stream``, what defines the
global stream (source length, shuffle, seed, epochs, per-record operations), whose
digest is the ``fingerprint``; and ``geometry``, this process's part of it (shard
index and count, block size, batch size). A different fingerprint is always refused.
Another geometry is converted exactly where that is possible, refused otherwise.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Sequence

from thresher.errors import GeometryError, IncompatibleStateError, InvalidStateError

__all__ = ["STATE_VERSION", "make_state", "next_global_position", "restore_position", "slowest_state",
           "stream_identity", "geometry_of"]

STATE_VERSION = 1
_STREAM_FIELDS = ("num_records", "shuffle", "seed", "num_epochs", "operations")
_SLOWEST = "slowest_of"  # set by slowest_state: the number of states merged
_SLOWEST_GLOBAL = "slowest_global_position"
_MAX_POSITION = 2**62  # positions and record indices are 64-bit integers; leave room for arithmetic
_GEOMETRY_FIELDS = ("shard_index", "shard_count", "block_size", "batch_size", "drop_remainder", "aligned")


def stream_identity(stream_config: Mapping[str, Any], operations_digest: str,
                    operation_names: tuple[str, ...]) -> dict[str, Any]:
    """The ``stream`` part of a state (without the operation names, kept for messages)."""
    out = dict(stream_config)
    out["operations"] = operations_digest
    return out


def fingerprint(stream: Mapping[str, Any]) -> str:
    text = json.dumps({k: stream[k] for k in _STREAM_FIELDS}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def geometry_of(shard_index: int, shard_count: int, block_size: int, batch_size: int | None,
                drop_remainder: bool, aligned: bool) -> dict[str, Any]:
    """The ``geometry`` part of a state. ``aligned``: no Filter before the Batch, and
    blocks equal the batch size (or one shard), so a step boundary is a global one."""
    return {"shard_index": shard_index, "shard_count": shard_count, "block_size": block_size,
            "batch_size": batch_size, "drop_remainder": drop_remainder, "aligned": aligned}


def make_state(position: int, stream: Mapping[str, Any], geometry: Mapping[str, Any],
               operation_names: tuple[str, ...]) -> dict[str, Any]:
    """Builds the JSON-serialisable state dict.

    ``global_position`` is set when the geometry is aligned and ``position`` is at a
    step boundary: every process then stands at the same global position, and every
    global position before it has been handed out (by some process) and none after.
    """
    p, shards = position, geometry["shard_count"]
    global_position = None
    if geometry["aligned"]:
        if shards == 1:
            global_position = p  # one shard: local positions are global positions
        else:
            b = geometry["block_size"]  # == the batch size when aligned
            if p % b == 0:
                global_position = (p // b) * shards * b
    names = [n[:48] for n in operation_names[:6]]
    return {
        "version": STATE_VERSION,
        "position": int(position),
        "global_position": global_position,
        "fingerprint": fingerprint(stream),
        "stream": dict(stream),
        "geometry": dict(geometry),
        "operations": names,
    }


def next_global_position(state: Mapping[str, Any]) -> int:
    """The global position of the next element of the process that saved ``state``.

    Every global position of that process's shard before it has been handed out.

    Example:
        >>> from thresher.loader.state import next_global_position
        >>> g = {"shard_index": 1, "shard_count": 2, "block_size": 4}
        >>> next_global_position({"position": 5, "geometry": g})   # block 1 of shard 1 = global block 3
        13
    """
    geometry = state["geometry"]
    p, b = int(state["position"]), int(geometry["block_size"])
    block, offset = divmod(p, b)
    return (block * int(geometry["shard_count"]) + int(geometry["shard_index"])) * b + offset


def _require(state: Mapping[str, Any], key: str, types: tuple[type, ...], where: str = "state") -> Any:
    if key not in state:
        raise InvalidStateError(f"{where} has no {key!r} field; it is not a thresher iterator state "
                                f"(fields: {sorted(state)})")
    v = state[key]
    if isinstance(v, bool) and bool not in types:
        raise InvalidStateError(f"{where}[{key!r}] must be {'/'.join(t.__name__ for t in types)}, got {v!r}")
    if not isinstance(v, types):
        raise InvalidStateError(f"{where}[{key!r}] must be {'/'.join(t.__name__ for t in types)}, got {v!r}")
    return v


def _check_shape(state: Any) -> None:
    if not isinstance(state, Mapping):
        raise InvalidStateError(f"a state must be a dict as returned by get_state(), got {type(state).__name__}")
    version = _require(state, "version", (int,))
    if version != STATE_VERSION:
        raise InvalidStateError(f"state version {version} is not supported (this thresher reads version "
                                f"{STATE_VERSION})")
    position = _require(state, "position", (int,))
    if not 0 <= position < _MAX_POSITION:
        raise InvalidStateError(f"state['position'] must be >= 0 and < 2**62 (positions are 64-bit), "
                                f"got {position}")
    _require(state, "fingerprint", (str,))
    stream = _require(state, "stream", (dict,))
    geometry = _require(state, "geometry", (dict,))
    for k in _STREAM_FIELDS:
        if k not in stream:
            raise InvalidStateError(f"state['stream'] has no {k!r} field")
    for k in ("shard_index", "shard_count", "block_size"):
        v = _require(geometry, k, (int,), "state['geometry']")
        if v < (0 if k == "shard_index" else 1):
            raise InvalidStateError(f"state['geometry'][{k!r}] is out of range: {v}")
    if geometry["shard_index"] >= geometry["shard_count"]:
        raise InvalidStateError(f"state['geometry'] has shard_index {geometry['shard_index']} >= shard_count "
                                f"{geometry['shard_count']}")
    _require(geometry, "aligned", (bool,), "state['geometry']")
    if _SLOWEST in state:
        merged = _require(state, _SLOWEST, (int,))
        if merged != geometry["shard_count"]:
            raise InvalidStateError(f"state[{_SLOWEST!r}] is {merged} but the state has shard_count "
                                    f"{geometry['shard_count']}")
        g = _require(state, _SLOWEST_GLOBAL, (int,))
        if not 0 <= g < _MAX_POSITION:
            raise InvalidStateError(f"state[{_SLOWEST_GLOBAL!r}] must be >= 0 and < 2**62, got {g}")
    if fingerprint(stream) != state["fingerprint"]:
        raise InvalidStateError("state['fingerprint'] does not match state['stream']: the state was edited "
                                "or corrupted")


def _saved_global_position(state: Mapping[str, Any]) -> int | None:
    """The global position every process of the saving run stood at, when one state shows it."""
    saved = state["geometry"]
    p = int(state["position"])
    if saved["shard_count"] == 1:
        return p  # one shard: the local position is the global position, with or without filters
    if saved["aligned"] and p % saved["block_size"] == 0:
        return (p // saved["block_size"]) * saved["shard_count"] * saved["block_size"]
    return None


def restore_position(state: Any, stream: Mapping[str, Any], geometry: Mapping[str, Any],
                     operation_names: tuple[str, ...] = (), *, allow_approximate: bool = False) -> int:
    """Checks ``state`` against this loader and returns the local position to resume at.

    Exact restores (docs/architecture.md, invariant 5):

    - the saved geometry (same shard count, shard index and block size): the saved
      position, whatever the operations;
    - another geometry, when the state shows the global position G every saving
      process stood at (an aligned state at a step boundary, or one shard) and the
      new shards can all start at G: with one new shard always, with P' shards when
      G is a whole number of new rounds of blocks (P' x block size, the new global
      batch when aligned). Every new shard then starts at G / P'.

    Otherwise GeometryError, unless ``allow_approximate``: the restore then starts
    every new shard at G' = G rounded down to a whole number of new rounds, where G
    is the saved global position (aligned states) or, for a state merged by
    :func:`slowest_state`, the slowest saving process's next global position. No
    element of the global stream is skipped; the elements in [G', G) (and, for a
    merged state, those the faster processes had already taken) are served again.

    Raises InvalidStateError (malformed), IncompatibleStateError (another global
    stream, naming what differs) or GeometryError (as above).
    """
    _check_shape(state)
    saved_stream = state["stream"]
    if fingerprint(saved_stream) != fingerprint(stream):
        diffs = []
        for k in _STREAM_FIELDS:
            if saved_stream.get(k) != stream.get(k):
                if k == "operations":
                    diffs.append(f"the per-record operations (saved {state.get('operations')}, "
                                 f"this loader {[n[:48] for n in operation_names[:6]]})")
                else:
                    diffs.append(f"{k} (saved {saved_stream.get(k)!r}, this loader {stream.get(k)!r})")
        raise IncompatibleStateError(
            "this state was saved by a loader with a different global stream: "
            + "; ".join(diffs or ["fingerprint"])
            + ". Restore it with the same source, sampler (shuffle, seed, num_epochs) and operations"
        )
    saved = state["geometry"]
    p = int(state["position"])
    P, s, b = saved["shard_count"], saved["shard_index"], saved["block_size"]
    P2, s2, b2 = geometry["shard_count"], geometry["shard_index"], geometry["block_size"]
    where = (f"a state saved as shard {s} of {P} (block size {b}, batch size {saved.get('batch_size')}) "
             f"into shard {s2} of {P2} (block size {b2}, batch size {geometry.get('batch_size')})")
    unit = P2 * b2  # one round of new blocks: the new global batch when aligned
    if _SLOWEST in state:
        if not allow_approximate:
            raise GeometryError(
                f"cannot restore {where} exactly: this state was merged from the states of {P} processes by "
                "slowest_state() for an approximate restart. Pass allow_approximate=True to set_state"
            )
        slowest = int(state[_SLOWEST_GLOBAL])
        return slowest if P2 == 1 else (slowest // unit) * unit // P2  # one new shard can start anywhere
    if (P, s, b) == (P2, s2, b2):
        return p
    g = _saved_global_position(state)
    if g is not None and (P2 == 1 or g % unit == 0):
        return g // P2
    if g is None:
        why = ("a Filter comes before the Batch or after it (or blocks do not match batches), so the "
               "processes' positions differ and no global position describes them all"
               if not saved["aligned"] else f"the saved position {p} is not at a step boundary (block size {b})")
        fix = ("To restart anyway, merge the states of all saving processes with "
               "thresher.loader.slowest_state(states) and pass allow_approximate=True (some elements are "
               "then served twice, none skipped); or restore with the saved shard geometry")
    else:
        why = (f"the saved global position {g} is not a whole number of new global batches "
               f"({P2} shards x {b2})")
        if allow_approximate:
            return (g // unit) * unit // P2
        fix = (f"Choose a geometry whose global batch divides {g}, pass allow_approximate=True to restart at "
               f"global position {(g // unit) * unit} (serving {g % unit} elements again), or restore with "
               "the saved shard geometry")
    raise GeometryError(f"cannot restore {where}: {why}. {fix}")


def slowest_state(states: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Merges the states of all processes of one run for an approximate restart.

    Takes one state per shard (all shards of one run, in any order) and returns the
    state of the process that was furthest behind in the global stream, marked for
    ``set_state(..., allow_approximate=True)``: every global position before its next
    one had been handed out by some process, so restarting there skips nothing. This
    is the restart for runs whose positions no single state describes (a Filter
    before the Batch, where processes advance at different speeds).

    Raises InvalidStateError if the states are not one run's complete set.

    Example:
        >>> import thresher as th
        >>> from thresher.loader.state import slowest_state
        >>> class Keep(th.FilterTransform):      # a Filter before the Batch: processes drift
        ...     def filter(self, x): return x % 4 != 1
        >>> def loader(i, n):
        ...     sampler = th.IndexSampler(40, shard_options=th.ShardOptions(i, n))
        ...     return th.DataLoader(th.sources.RangeDataSource(0, 40), sampler, [Keep(), th.Batch(2)])
        >>> its = [iter(loader(i, 2)) for i in range(2)]
        >>> [next(its[0]).tolist() for _ in range(3)], [next(its[1]).tolist() for _ in range(2)]
        ([[0, 2], [4, 6], [8, 10]], [[3, 7], [11, 15]])
        >>> merged = slowest_state([it.get_state() for it in its])
        >>> merged["slowest_global_position"]       # shard 0 is behind: its next one is 12
        12
        >>> it = iter(loader(0, 4))                  # restart on 4 processes
        >>> it.set_state(merged, allow_approximate=True)
        >>> next(it).tolist()
        [12, 16]
    """
    if isinstance(states, Mapping) or not states:
        raise InvalidStateError("slowest_state needs a non-empty list of states, one per process")
    for st in states:
        _check_shape(st)
        if _SLOWEST in st:
            raise InvalidStateError("slowest_state got a state that is already merged")
    first = states[0]
    shape = {k: v for k, v in first["geometry"].items() if k != "shard_index"}
    P = first["geometry"]["shard_count"]
    seen: dict[int, Mapping[str, Any]] = {}
    for st in states:
        if st["fingerprint"] != first["fingerprint"]:
            raise InvalidStateError("slowest_state got states of different global streams (fingerprints "
                                    f"{first['fingerprint']} and {st['fingerprint']})")
        other = {k: v for k, v in st["geometry"].items() if k != "shard_index"}
        if other != shape:
            raise InvalidStateError(f"slowest_state got states of different geometries: {shape} and {other}")
        i = st["geometry"]["shard_index"]
        if i in seen:
            raise InvalidStateError(f"slowest_state got two states of shard {i}")
        seen[i] = st
    missing = sorted(set(range(P)) - set(seen))
    if missing:
        raise InvalidStateError(f"slowest_state needs the states of all {P} shards; shards {missing[:8]} are "
                                "missing. A restart from a subset could skip elements")
    slowest = min(seen.values(), key=next_global_position)
    out = dict(slowest)
    out[_SLOWEST] = P
    out[_SLOWEST_GLOBAL] = next_global_position(slowest)
    return out
