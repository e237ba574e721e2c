"""The iterator state: a small JSON dict, checked before it is applied.

Two things are kept apart (docs/architecture.md, invariant 5): ``stream``, what defines the
global stream (source length, shuffle, seed, epochs, per-record operations), whose
digest is the ``fingerprint``; and ``geometry``, this process's part of it (shard
index and count, block size, batch size). A different fingerprint is always refused.
Another geometry is converted exactly where that is possible, refused otherwise.

The state's types, and all reading and checking of its JSON, are in
``thresher.loader.state_types``; this module decides what a state means for a
loader (where to resume) and merges the states of a run.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from thresher.errors import GeometryError, IncompatibleStateError, InvalidStateError
from thresher.loader.state_digest import DIGEST, state_digest
from thresher.loader.state_input import as_state
from thresher.loader.state_types import LEGACY_VERSION, STATE_VERSION, Geometry, LoaderState, Slowest, StreamId

__all__ = [
    "STATE_VERSION",
    "check_run",
    "check_stream",
    "continued_stream",
    "geometry_of",
    "make_state",
    "next_global_position",
    "restore_position",
    "slowest_state",
    "stream_identity",
    "upgrade_state",
]


def stream_identity(
    stream_config: Mapping[str, Any], operations_digest: str, operation_names: tuple[str, ...]
) -> dict[str, Any]:
    """The ``stream`` part of a state (without the operation names, kept for messages)."""
    return StreamId.of(stream_config, operations_digest).to_json()


def fingerprint(stream: Mapping[str, Any]) -> str:
    return StreamId.from_json(stream).fingerprint


def geometry_of(
    shard_index: int,
    shard_count: int,
    block_size: int,
    batch_size: int | None,
    drop_remainder: bool,
    aligned: bool,
) -> dict[str, Any]:
    """The ``geometry`` part of a state. ``aligned``: no Filter before the Batch, and
    blocks equal the batch size (or one shard), so a step boundary is a global one."""
    return Geometry(
        shard_index, shard_count, block_size, batch_size, drop_remainder, aligned
    ).to_json()


def _stream(stream: Mapping[str, Any] | StreamId) -> StreamId:
    return stream if isinstance(stream, StreamId) else StreamId.from_json(stream)


def _geometry(geometry: Mapping[str, Any] | Geometry) -> Geometry:
    return geometry if isinstance(geometry, Geometry) else Geometry.from_json(geometry)


def make_state(
    position: int,
    stream: Mapping[str, Any] | StreamId,
    geometry: Mapping[str, Any] | Geometry,
    operation_names: tuple[str, ...],
) -> dict[str, Any]:
    """Builds the JSON-serialisable state dict (see ``LoaderState.at``)."""
    return LoaderState.at(position, _stream(stream), _geometry(geometry), operation_names).to_json()


def next_global_position(state: Mapping[str, Any]) -> int:
    """The global position of the next element of the process that saved ``state``.

    Every global position of that process's shard before it has been handed out.

    Example:
        >>> from thresher.loader.state import next_global_position
        >>> g = {"shard_index": 1, "shard_count": 2, "block_size": 4}
        >>> next_global_position({"position": 5, "geometry": g})  # shard 1, block 1: global 3
        13
    """
    g = state["geometry"]
    shard = Geometry(int(g["shard_index"]), int(g["shard_count"]), int(g["block_size"]))
    return shard.to_global(int(state["position"]))


def restore_position(
    state: Any,
    stream: Mapping[str, Any] | StreamId,
    geometry: Mapping[str, Any] | Geometry,
    operation_names: tuple[str, ...] = (),
    *,
    allow_approximate: bool = False,
) -> int:
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
    saved = state if isinstance(state, LoaderState) else LoaderState.from_json(state)
    return resume_position(
        saved,
        _stream(stream),
        _geometry(geometry),
        operation_names,
        allow_approximate=allow_approximate,
    )


def resume_position(
    state: LoaderState,
    stream: StreamId,
    geometry: Geometry,
    operation_names: tuple[str, ...] = (),
    *,
    allow_approximate: bool = False,
) -> int:
    """``restore_position`` for a parsed state and this loader's typed stream and geometry."""
    check_stream(state, stream, operation_names)
    saved, p = state.geometry, state.position
    P, s, b = saved.shard_count, saved.shard_index, saved.block_size
    P2, s2, b2 = geometry.shard_count, geometry.shard_index, geometry.block_size
    where = (
        f"a state saved as shard {s} of {P} (block size {b}, batch size {saved.batch_size}) "
        f"into shard {s2} of {P2} (block size {b2}, batch size {geometry.batch_size})"
    )
    unit = geometry.round_size  # one round of new blocks: the new global batch when aligned
    if state.slowest is not None:
        if not allow_approximate:
            raise GeometryError(
                f"cannot restore {where} exactly: this state was merged from the states of {P} "
                "processes by slowest_state() for an approximate restart. Pass "
                "allow_approximate=True to set_state"
            )
        slowest = state.slowest.global_position
        return (
            slowest if P2 == 1 else (slowest // unit) * unit // P2
        )  # one new shard can start anywhere
    if (P, s, b) == (P2, s2, b2):
        return p
    # The global position every saving process stood at, when one state shows it. One shard:
    # the local position is the global position, with or without filters.
    g = p if P == 1 else saved.global_position(p)
    if g is not None and (P2 == 1 or g % unit == 0):
        return g // P2
    if g is None:
        why = (
            "a Filter comes before the Batch or after it (or blocks do not match batches), so the "
            "processes' positions differ and no global position describes them all"
            if not saved.aligned
            else f"the saved position {p} is not at a step boundary (block size {b})"
        )
        fix = (
            "To restart anyway, merge the states of all saving processes with "
            "thresher.loader.slowest_state(states) and pass allow_approximate=True (some elements "
            "are "
            "then served twice, none skipped); or restore with the saved shard geometry"
        )
    else:
        why = (
            f"the saved global position {g} is not a whole number of new global batches "
            f"({P2} shards x {b2})"
        )
        if allow_approximate:
            return (g // unit) * unit // P2
        fix = (
            f"Choose a geometry whose global batch divides {g}, pass allow_approximate=True to "
            f"restart at global position {(g // unit) * unit} (serving {g % unit} elements "
            "again), or restore with "
            "the saved shard geometry"
        )
    raise GeometryError(f"cannot restore {where}: {why}. {fix}")


def continued_stream(state: LoaderState, stream: StreamId, operations_changed: bool = False) -> StreamId:
    """The stream an iterator of ``stream`` continues after restoring ``state``.

    ``stream`` itself, unless the state's stream is this one under other operations: with
    ``operations_changed=True`` (the user changed the per-record operations on purpose), the
    state's stream with this loader's operations, the old digest recorded in
    ``replaced_operations`` (and so in the fingerprint); a state saved after such a change
    restores into the changed loader without the flag. Anything else is left to
    :func:`check_stream` to refuse.

    Example:
        >>> from thresher.loader.state_types import Geometry
        >>> old, new = StreamId(8, True, 1, None, "ops-a"), StreamId(8, True, 1, None, "ops-b")
        >>> saved = LoaderState.at(4, old, Geometry(0, 1, 1, 2, False, True))
        >>> continued_stream(saved, new, operations_changed=True).to_json()["replaced_operations"]
        ['ops-a']
        >>> continued_stream(saved, new) == new   # check_stream then refuses it
        True
    """
    saved = state.stream
    if saved.fingerprint == stream.fingerprint:
        return stream
    same_but_operations = saved.differences(stream) in ([], ["operations"])
    if not same_but_operations or stream.replaced_operations:
        return stream
    if saved.operations == stream.operations:  # saved after a change: continue its record
        return saved
    return saved.with_operations_of(stream) if operations_changed else stream


def check_stream(state: LoaderState, stream: StreamId, operation_names: tuple[str, ...] = ()) -> None:
    """Raises IncompatibleStateError, naming what differs, unless ``state`` is of ``stream``."""
    if state.stream.fingerprint != stream.fingerprint:
        diffs = []
        for k in state.stream.differences(stream):
            if k == "operations":
                diffs.append(
                    f"the per-record operations (saved {list(state.operations)}, "
                    f"this loader {[n[:48] for n in operation_names[:6]]})"
                )
            else:
                diffs.append(
                    f"{k} (saved {getattr(state.stream, k)!r}, this loader {getattr(stream, k)!r})"
                )
        changed_operations = state.stream.differences(stream) == ["operations"]
        raise IncompatibleStateError(
            "this state was saved by a loader with a different global stream: "
            + "; ".join(diffs or ["fingerprint"])
            + (". If you changed the operations on purpose (a new augmentation, a fixed decode "
               "function), restore with set_state(state, operations_changed=True): the positions and "
               "the sampler are kept and the new operations apply from the next record on "
               "(docs/state.md, 'Changing the operations')" if changed_operations else
               ". Restore it with the same source, sampler (shuffle, seed, num_epochs) and operations")
        )


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
        ...     source = th.sources.RangeDataSource(0, 40)
        ...     return th.DataLoader(source, sampler, [Keep(), th.Batch(2)])
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
    seen = check_run(states, "slowest_state")
    slowest = min(seen.values(), key=lambda st: st.next_global_position)
    merged = LoaderState(
        slowest.position,
        slowest.stream,
        slowest.geometry,
        slowest.operations,
        slowest.global_position,
        Slowest(len(seen), slowest.next_global_position),
        slowest.extensions,
    )
    return merged.to_json()


def check_run(states: Sequence[Mapping[str, Any]], who: str) -> dict[int, LoaderState]:
    """Parses the states of all processes of one run: shard index -> state.

    Raises InvalidStateError unless they are one state per shard of one stream and geometry.
    """
    if isinstance(states, Mapping) or not states:
        raise InvalidStateError(f"{who} needs a non-empty list of states, one per process")
    parsed = [LoaderState.from_json(st) for st in states]
    if any(st.slowest is not None for st in parsed):
        raise InvalidStateError(f"{who} got a state that is already merged")
    first = parsed[0]
    shape, P = first.geometry.shape(), first.geometry.shard_count
    seen: dict[int, LoaderState] = {}
    for st in parsed:
        if st.fingerprint != first.fingerprint:
            raise InvalidStateError(
                f"{who} got states of different global streams (fingerprints "
                f"{first.fingerprint} and {st.fingerprint})"
            )
        if st.geometry.shape() != shape:
            raise InvalidStateError(
                f"{who} got states of different geometries: "
                f"{_without_index(shape)} and {_without_index(st.geometry)}"
            )
        i = st.geometry.shard_index
        if i in seen:
            raise InvalidStateError(f"{who} got two states of shard {i}")
        seen[i] = st
    missing = sorted(set(range(P)) - set(seen))
    if missing:
        raise InvalidStateError(
            f"{who} needs the states of all {P} shards; shards {missing[:8]} are "
            "missing. A restart from a subset could skip elements"
        )
    return seen


def _without_index(geometry: Geometry) -> dict[str, Any]:
    return {k: v for k, v in geometry.to_json().items() if k != "shard_index"}


def upgrade_state(state: Any) -> dict[str, Any]:
    """A state saved by thresher before states carried a digest (version 1), as this version saves it.

    ``set_state`` refuses a version-1 state: it carries no digest, so nothing shows
    whether it was edited after it was saved. Pass it through this function to
    restore it: every field is checked as ``set_state`` checks it (types, ranges, the
    fingerprint), and the state comes back as version 2 with its digest. The one thing
    that cannot be checked is that the state was not edited: upgrade only states you
    saved and did not change. A version-2 state is checked and returned unchanged.

    Example:
        >>> import thresher as th
        >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 8), th.IndexSampler(8), [th.Batch(2)])
        >>> it = iter(loader)
        >>> _ = next(it)
        >>> old = {k: v for k, v in it.get_state().items() if k != "digest"}
        >>> old["version"] = 1                     # what thresher saved before digests
        >>> it2 = iter(loader)
        >>> it2.set_state(th.upgrade_state(old))
        >>> next(it2).tolist()
        [2, 3]
    """
    d = as_state(state, "upgrade_state")  # Grain-style bytes of JSON too
    if not isinstance(d, Mapping):
        raise InvalidStateError(f"upgrade_state needs a state dict as get_state() returned it, got "
                                f"{type(d).__name__}")
    version = d.get("version")
    if version == STATE_VERSION:
        LoaderState.from_json(d)
        return copy.deepcopy(dict(d))
    if version != LEGACY_VERSION or DIGEST in d:
        raise InvalidStateError(f"upgrade_state reads states of version {LEGACY_VERSION} (saved without a "
                                f"digest); this one has version {version!r}"
                                + (" and a digest" if DIGEST in d else ""))
    upgraded = {**copy.deepcopy(dict(d)), "version": STATE_VERSION}
    upgraded[DIGEST] = state_digest(upgraded)
    LoaderState.from_json(upgraded)  # every other check
    return upgraded
