"""The iterator state as types: what ``get_state()`` returns, parsed and checked in one place.

``LoaderState.from_json`` is the only reader of a saved state's keys and does all the
checking (raising InvalidStateError); ``to_json`` writes the JSON format that users
save (version 2: version 1 plus ``digest``). Its parts:

- ``StreamId``: what defines the global stream; its digest is the ``fingerprint``.
- ``Geometry``: this process's part of it (shard, block, batch): the sampler's own
  type (``thresher.samplers.geometry``), re-exported here.
- ``Extensions``: what a layer above the engine adds (a mixture's segment, packing's
  rows), typed, under the ``"dataset"`` key.
- ``digest``: a keyed BLAKE2b of the canonical JSON of all the other fields
  (thresher.loader.state_digest). ``to_json`` adds it, ``from_json`` refuses a state whose
  fields do not match it: any edit after saving (docs/state.md).
  ``upgrade_state`` (thresher.loader.state) gives a version-1 state, saved before
  digests, its digest, on the user's word that it was not edited.

Example:
    >>> stream, geometry = StreamId(10, False, None, 1, "ops"), Geometry(0, 1, 1, 2, False, True)
    >>> s = LoaderState.at(4, stream, geometry)
    >>> d = s.to_json()
    >>> d["global_position"], LoaderState.from_json(d) == s
    (4, True)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from thresher._validate import is_int, require_key
from thresher.errors import InvalidStateError
from thresher.loader.exclusions import Consumed
from thresher.loader.skips import SkipRanges
from thresher.loader.state_digest import DIGEST, check_digest, state_digest
from thresher.samplers.geometry import Geometry

__all__ = [
    "STATE_VERSION",
    "Extensions",
    "Geometry",
    "LoaderState",
    "Slowest",
    "StateExtension",
    "StreamId",
    "register_extension",
]

STATE_VERSION = 2
LEGACY_VERSION = 1  # saved before digests: read only through upgrade_state (thresher.loader.state)
_STREAM_FIELDS = ("num_records", "shuffle", "seed", "num_epochs", "operations")
_SLOWEST = "slowest_of"  # set by slowest_state: the number of states merged
_SLOWEST_GLOBAL = "slowest_global_position"
_MAX_POSITION = 2**62  # positions and record indices are 64-bit integers; leave room for arithmetic
_DATASET = "dataset"
_REPLACED = "replaced_operations"  # StreamId: the operations digests before set_state(operations_changed=True)


def _require(
    state: Mapping[str, Any], key: str, types: tuple[type, ...], where: str = "state"
) -> Any:
    return require_key(state, key, types, where, error=InvalidStateError)


@dataclass(frozen=True)
class StreamId:
    """What defines the global stream: source length, shuffle, seed, epochs, operations digest.

    ``replaced_operations``: the digests of the operations this stream ran with before a
    restore with ``set_state(state, operations_changed=True)``, oldest first (empty for a
    stream whose operations never changed; then absent from the JSON, so the fingerprint of
    such a stream is what it always was).
    """

    num_records: Any
    shuffle: Any
    seed: Any
    num_epochs: Any
    operations: Any
    replaced_operations: tuple[str, ...] = ()

    @classmethod
    def of(cls, stream_config: Mapping[str, Any], operations_digest: str) -> StreamId:
        """From a sampler's ``stream_config()`` and the digest of the per-record operations."""
        return cls(
            stream_config["num_records"],
            stream_config["shuffle"],
            stream_config["seed"],
            stream_config["num_epochs"],
            operations_digest,
        )

    def to_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in _STREAM_FIELDS}
        if self.replaced_operations:
            out[_REPLACED] = list(self.replaced_operations)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> StreamId:
        for k in _STREAM_FIELDS:
            if k not in d:
                raise InvalidStateError(f"state['stream'] has no {k!r} field")
        replaced = d.get(_REPLACED, [])
        if not isinstance(replaced, list) or not all(isinstance(r, str) for r in replaced):
            raise InvalidStateError(f"state['stream'][{_REPLACED!r}] must be a list of digests, got {replaced!r}")
        num_records, shuffle, seed, num_epochs, operations = (d[k] for k in _STREAM_FIELDS)
        return cls(num_records, shuffle, seed, num_epochs, operations, tuple(replaced))

    def with_operations_of(self, other: StreamId) -> StreamId:
        """This stream, continued under ``other``'s operations: the change is recorded in it."""
        if other.operations == self.operations:
            return self
        return replace(self, operations=other.operations,
                       replaced_operations=(*self.replaced_operations, self.operations))

    @property
    def fingerprint(self) -> str:
        text = json.dumps(self.to_json(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def differences(self, other: StreamId) -> list[str]:
        """The names of the fields that differ from ``other``'s."""
        return [k for k in _STREAM_FIELDS if getattr(self, k) != getattr(other, k)]


class StateExtension(Protocol):
    """What a layer above the engine saves in a state (a frozen dataclass), registered under a key
    of ``state['dataset']`` with :func:`register_extension`. The loader never names one."""

    def to_json(self) -> Any: ...


_E = TypeVar("_E", bound=StateExtension)
#: Registered extensions: key of ``state['dataset']`` -> (class, parser). A deliberate process-wide
#: registry, filled when the modules that own the extensions are imported (``import thresher`` imports
#: them all). A parser returns None for a value that means "absent".
_REGISTRY: dict[str, tuple[type, Callable[[Any], Any]]] = {}


def register_extension(key: str) -> Callable[[type[_E]], type[_E]]:
    """Registers a state extension class under ``key`` of ``state['dataset']``; the class has
    ``to_json()`` and a ``from_json(value)`` classmethod (raising InvalidStateError, or returning None).

    Example:
        >>> from dataclasses import dataclass
        >>> from thresher.loader.state_types import Extensions, register_extension
        >>> @register_extension("example_rows")
        ... @dataclass(frozen=True)
        ... class Rows:
        ...     rows: int
        ...     def to_json(self): return {"rows": self.rows}
        ...     @classmethod
        ...     def from_json(cls, v): return cls(v["rows"])
        >>> Extensions.from_json(Extensions().with_(Rows(2)).to_json()).get(Rows)
        Rows(rows=2)
    """
    if key in _RESERVED:
        raise ValueError(f"state['dataset'][{key!r}] is the loader's own")

    def register(cls: type[_E]) -> type[_E]:
        known = _REGISTRY.get(key)
        if known is not None and known[0].__qualname__ != cls.__qualname__:
            raise ValueError(f"state['dataset'][{key!r}] is already registered by {known[0].__qualname__}")
        _REGISTRY[key] = (cls, cls.from_json)  # type: ignore[attr-defined]
        return cls

    return register


def _key_of(cls: type) -> str:
    for key, (known, _) in _REGISTRY.items():
        if known is cls:
            return key
    raise KeyError(f"{cls.__qualname__} is not a registered state extension (use @register_extension)")


_RESERVED = ("skips", "skip_records", "consumed")


@dataclass(frozen=True)
class Extensions:
    """What the layers above the engine add to a state (``state['dataset']``).

    The loader's own: ``skips``: the global positions of the steps skipped by
    ``set_state(..., skip_steps=...)`` (thresher.loader.skips); ``skip_records``: the record
    keys never delivered (key ranges); ``consumed``: the positions consumed under an earlier
    number of processes (thresher.loader.exclusions). Everything else is a registered
    :class:`StateExtension` of a layer above (a mixture's segment, packing's rows), kept by key
    in ``layers``: ``get(cls)`` reads one, ``with_(ext)`` sets one.
    """

    skips: SkipRanges = field(default_factory=SkipRanges)
    skip_records: SkipRanges = field(default_factory=SkipRanges)
    consumed: Consumed | None = None
    layers: tuple[tuple[str, Any], ...] = ()

    def get(self, cls: type[_E]) -> _E | None:
        """The extension of class ``cls``, or None."""
        key = _key_of(cls)
        return next((ext for k, ext in self.layers if k == key), None)

    def with_(self, ext: StateExtension) -> Extensions:
        """These extensions with ``ext`` set (replacing one of its class)."""
        key = _key_of(type(ext))
        layers = tuple(sorted([(k, e) for k, e in self.layers if k != key] + [(key, ext)], key=lambda kv: kv[0]))
        return replace(self, layers=layers)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {key: ext.to_json() for key, ext in self.layers}
        if self.skips:
            out["skips"] = self.skips.to_json()
        if self.skip_records:
            out["skip_records"] = self.skip_records.to_json()
        if self.consumed is not None:
            out["consumed"] = self.consumed.to_json()
        return out

    @classmethod
    def from_json(cls, extra: Any) -> Extensions:
        if not isinstance(extra, dict):
            return cls()
        skips = SkipRanges.from_json(extra["skips"]) if "skips" in extra else SkipRanges()
        blocked = (SkipRanges.from_json(extra["skip_records"], "state['dataset']['skip_records']", "record key")
                   if "skip_records" in extra else SkipRanges())
        consumed = Consumed.from_json(extra["consumed"]) if "consumed" in extra else None
        layers = []
        for key in sorted(k for k in extra if k not in _RESERVED):
            if key not in _REGISTRY:
                raise InvalidStateError(f"state['dataset'][{key!r}] is not known to this thresher (known: "
                                        f"{sorted(_REGISTRY) + list(_RESERVED)}); restore it with the thresher "
                                        "and the pipeline that saved it")
            ext = _REGISTRY[key][1](extra[key])
            if ext is not None:
                layers.append((key, ext))
        return cls(skips, blocked, consumed, tuple(layers))


@dataclass(frozen=True)
class Slowest:
    """Set on a state merged by ``slowest_state``.

    ``merged``: the number of shards merged; ``global_position``: the slowest one's next.
    """

    merged: int
    global_position: int


@dataclass(frozen=True)
class LoaderState:
    """An iterator state: the position to resume at, the stream, the geometry, the extensions."""

    position: int
    stream: StreamId
    geometry: Geometry
    operations: tuple[str, ...] = ()
    global_position: int | None = None
    slowest: Slowest | None = None
    extensions: Extensions = field(default_factory=Extensions)

    @classmethod
    def at(
        cls,
        position: int,
        stream: StreamId,
        geometry: Geometry,
        operations: tuple[str, ...] = (),
        extensions: Extensions | None = None,
    ) -> LoaderState:
        """The state of an iterator at ``position``, with the global position when one is known.

        ``global_position`` is set when the geometry is aligned and ``position`` is at
        a step boundary: every process then stands at the same global position, and
        every global position before it has been handed out (by some process) and none after.
        """
        return cls(
            position,
            stream,
            geometry,
            operations,
            geometry.global_position(position),
            None,
            extensions or Extensions(),
        )

    @property
    def fingerprint(self) -> str:
        return self.stream.fingerprint

    def adopted_by(self, stream: StreamId) -> LoaderState:
        """This state, claimed by another stream whose owner has checked it continues this one.

        The sanctioned way for a layer above the engine to restore a state across a
        change it understands (a mixture under new weights, which continues each
        component where it stopped): the engine then checks only the geometry.
        """
        return replace(self, stream=stream)

    @property
    def next_global_position(self) -> int:
        """The global position of the next element of the process that saved this state."""
        return self.geometry.to_global(self.position)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": STATE_VERSION,
            "position": int(self.position),
            "global_position": self.global_position,
            "fingerprint": self.fingerprint,
            "stream": self.stream.to_json(),
            "geometry": self.geometry.to_json(),
            "operations": [n[:48] for n in self.operations[:6]],
        }
        if self.slowest is not None:
            out[_SLOWEST] = self.slowest.merged
            out[_SLOWEST_GLOBAL] = self.slowest.global_position
        extra = self.extensions.to_json()
        if extra:
            out[_DATASET] = extra
        out[DIGEST] = state_digest(out)
        return out

    @classmethod
    def from_json(cls, state: Any) -> LoaderState:
        """Parses and checks a saved state; raises InvalidStateError naming what is wrong."""
        if not isinstance(state, Mapping):
            raise InvalidStateError(
                f"a state must be a dict as returned by get_state(), got {type(state).__name__}"
            )
        version = _require(state, "version", (int,))
        if version == LEGACY_VERSION and DIGEST not in state:
            raise InvalidStateError(
                "this state (version 1) was saved by an earlier thresher, without the digest that shows "
                "it was not edited since; this thresher restores it after thresher.upgrade_state(state), "
                "which adds the digest: do that only for a state you did not edit (docs/state.md)")
        if version != STATE_VERSION:
            raise InvalidStateError(
                f"state version {version} is not supported (this thresher reads version "
                f"{STATE_VERSION}, and version {LEGACY_VERSION} through thresher.upgrade_state)"
            )
        position = _require(state, "position", (int,))
        if not is_int(position, 0, _MAX_POSITION - 1):
            raise InvalidStateError(f"state['position'] must be >= 0 and < 2**62 (positions are 64-bit), "
                                    f"got {position}")
        saved_fingerprint = _require(state, "fingerprint", (str,))
        stream = StreamId.from_json(_require(state, "stream", (dict,)))
        geometry = Geometry.from_json(_require(state, "geometry", (dict,)))
        slowest = None
        if _SLOWEST in state:
            merged = _require(state, _SLOWEST, (int,))
            if merged != geometry.shard_count:
                raise InvalidStateError(
                    f"state[{_SLOWEST!r}] is {merged} but the state has shard_count "
                    f"{geometry.shard_count}"
                )
            g = _require(state, _SLOWEST_GLOBAL, (int,))
            if not is_int(g, 0, _MAX_POSITION - 1):
                raise InvalidStateError(f"state[{_SLOWEST_GLOBAL!r}] must be in [0, 2**62), got {g}")
            slowest = Slowest(merged, int(g))
        if stream.fingerprint != saved_fingerprint:
            raise InvalidStateError(
                "state['fingerprint'] does not match state['stream']: the state was edited "
                "or corrupted"
            )
        names = state.get("operations")
        operations = tuple(str(n) for n in names) if isinstance(names, list) else ()
        g = state.get("global_position")
        parsed = cls(
            int(position),
            stream,
            geometry,
            operations,
            int(g) if is_int(g, numpy=False) else None,
            slowest,
            Extensions.from_json(state.get(_DATASET)),
        )
        check_digest(state)  # last: a malformed field is named by the checks above
        return parsed
