"""The iterator state: a small JSON dict, checked before it is applied.

Two things are kept apart (DESIGN.md, invariant 5): ``stream``, what defines the
global stream (source length, shuffle, seed, epochs, per-record operations), whose
digest is the ``fingerprint``; and ``geometry``, this process's part of it (shard
index and count, block size, batch size). A different fingerprint is always refused.
Another geometry is converted exactly where that is possible, refused otherwise.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from thresher.errors import GeometryError, IncompatibleStateError, InvalidStateError

__all__ = ["STATE_VERSION", "make_state", "restore_position", "stream_identity", "geometry_of"]

STATE_VERSION = 1
_STREAM_FIELDS = ("num_records", "shuffle", "seed", "num_epochs", "operations")
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
    """Builds the JSON-serialisable state dict."""
    p, b, shards = position, geometry["block_size"], geometry["shard_count"]
    global_position = None
    if geometry["aligned"] and p % b == 0:
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
    if position < 0:
        raise InvalidStateError(f"state['position'] must be >= 0, got {position}")
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
    _require(geometry, "aligned", (bool,), "state['geometry']")
    if fingerprint(stream) != state["fingerprint"]:
        raise InvalidStateError("state['fingerprint'] does not match state['stream']: the state was edited "
                                "or corrupted")


def restore_position(state: Any, stream: Mapping[str, Any], geometry: Mapping[str, Any],
                     operation_names: tuple[str, ...] = ()) -> int:
    """Checks ``state`` against this loader and returns the local position to resume at.

    Raises InvalidStateError (malformed), IncompatibleStateError (another global
    stream, naming what differs) or GeometryError (another geometry that cannot be
    converted exactly).
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
    if P == P2 == 1:
        return p  # one shard: local positions are global positions, whatever the batch size
    if (P, s, b) == (P2, s2, b2):
        return p
    why = None
    if not (saved["aligned"] and geometry["aligned"]):
        why = ("a Filter comes before the Batch (or blocks do not match batches), so the processes' "
               "positions differ and no global position describes them all")
    elif p % b:
        why = f"the saved position {p} is not at a step boundary (block size {b})"
    else:
        g = (p // b) * P * b
        if g % (P2 * b2):
            why = (f"the saved global position {g} is not a whole number of new global batches "
                   f"({P2} shards x {b2})")
        else:
            return g // P2
    raise GeometryError(
        f"cannot restore a state saved as shard {s} of {P} (block size {b}, batch size {saved.get('batch_size')}) "
        f"into shard {s2} of {P2} (block size {b2}, batch size {geometry.get('batch_size')}): {why}. "
        "Restore with the saved shard geometry"
    )
