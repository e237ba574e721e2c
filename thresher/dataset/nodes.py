"""The steps of a Dataset chain, as small frozen records.

A chain is a tuple of nodes; the first is a source (``Source``, ``Mix``,
``Interleave``). Each node knows the step of the chain it was written at (``at``),
which stays fixed through optimisation: random operations are seeded from it, and
the state's fingerprint is computed from the chain as written.

Example:
    >>> from thresher.dataset.nodes import Map, describe_chain
    >>> describe_chain((Map(at=1, fns=(abs,)),))
    ['map(abs)']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from thresher.loader.options import DEFAULT_WORKER_TIMEOUT_S
from thresher.samplers.sharding import ShardOptions
from thresher.transforms.operations import describe

__all__ = [
    "SOURCE_NODES",
    "BatchNode",
    "Cache",
    "Filter",
    "Interleave",
    "Map",
    "MapBatch",
    "Mix",
    "Node",
    "Pack",
    "Prefetch",
    "RandomMap",
    "Repeat",
    "Shard",
    "Shuffle",
    "Slice",
    "Source",
    "describe_chain",
    "fn_name",
]


def fn_name(fn: Any) -> str:
    """``abs``, ``decode``, ``<lambda>``: what ``Map(...)`` shows for a function."""
    text = describe(fn)
    return text[4:-1] if text.startswith("Map(") else text


@dataclass(frozen=True)
class Node:
    at: int

    def describe(self) -> str:
        raise NotImplementedError

    def identity(self) -> str:
        """What this step contributes to the fingerprint (``describe()`` unless noted)."""
        return self.describe()


@dataclass(frozen=True)
class Source(Node):
    source: Any = None

    def describe(self) -> str:
        return f"source({type(self.source).__name__}, len={len(self.source)})"

    def identity(self) -> str:
        # As in the engine's fingerprint, only the length: the same records may move
        # between kinds of source (an in-memory copy, other files) and keep the state.
        return f"source(len={len(self.source)})"


@dataclass(frozen=True)
class Mix(Node):
    datasets: tuple[Any, ...] = ()
    weights: tuple[float, ...] = ()
    period: int = 1000
    seed: int | None = None

    def describe(self) -> str:
        parts = ",".join(d.fingerprint() for d in self.datasets)
        w = ",".join(f"{x:.12g}" for x in self.weights)
        return f"mix([{parts}], weights=[{w}], period={self.period}, seed={self.seed})"


@dataclass(frozen=True)
class Interleave(Node):
    datasets: tuple[Any, ...] = ()
    cycle_length: int = 1
    block_length: int = 1

    def describe(self) -> str:
        parts = ",".join(d.fingerprint() for d in self.datasets)
        return f"interleave([{parts}], cycle_length={self.cycle_length}, block_length={self.block_length})"


@dataclass(frozen=True)
class Shuffle(Node):
    seed: int = 0

    def describe(self) -> str:
        return f"shuffle(seed={self.seed})"


@dataclass(frozen=True)
class Repeat(Node):
    num_epochs: int | None = None
    reseed_each_epoch: bool = True

    def describe(self) -> str:
        if self.reseed_each_epoch:
            return f"repeat({self.num_epochs})"
        return f"repeat({self.num_epochs}, reseed_each_epoch=False)"


@dataclass(frozen=True)
class Slice(Node):
    start: int | None = None
    stop: int | None = None
    step: int | None = None

    def describe(self) -> str:
        return f"slice({self.start}, {self.stop}, {self.step})"

    def indices(self, length: int) -> range:
        return range(length)[slice(self.start, self.stop, self.step)]


@dataclass(frozen=True)
class Map(Node):
    """One map, or several consecutive ones fused (``fns`` applied in order)."""

    fns: tuple[Callable[[Any], Any], ...] = ()
    batchable: bool = False
    fused_from: tuple[int, ...] = ()

    def describe(self) -> str:
        return "+".join(f"map({fn_name(f)})" for f in self.fns)


@dataclass(frozen=True)
class RandomMap(Node):
    fn: Callable[[Any, Any], Any] = field(default=lambda x, rng: x)
    seed: int | None = None

    def describe(self) -> str:
        return f"random_map({fn_name(self.fn)}, seed={self.seed})"


@dataclass(frozen=True)
class Filter(Node):
    """One predicate, or several consecutive ones fused (all must hold)."""

    fns: tuple[Callable[[Any], Any], ...] = ()

    def describe(self) -> str:
        return "+".join(f"filter({fn_name(f)})" for f in self.fns)


@dataclass(frozen=True)
class BatchNode(Node):
    batch_size: int = 1
    drop_remainder: bool = False
    pad_to: Any = None
    padding_value: Any = 0

    def describe(self) -> str:
        pad = "" if self.pad_to is None else f", pad_to={self.pad_to!r}, padding_value={self.padding_value!r}"
        return f"batch({self.batch_size}, drop_remainder={self.drop_remainder}{pad})"


@dataclass(frozen=True)
class MapBatch(Node):
    fns: tuple[Callable[[Any], Any], ...] = ()
    vectorised_from: tuple[int, ...] = ()

    def describe(self) -> str:
        return "+".join(f"map_batch({fn_name(f)})" for f in self.fns)


@dataclass(frozen=True)
class Shard(Node):
    options: ShardOptions | None = None

    def describe(self) -> str:
        o = self.options
        assert o is not None
        return f"shard({o.shard_index}/{o.shard_count}, drop_remainder={o.drop_remainder})"


@dataclass(frozen=True)
class Prefetch(Node):
    worker_count: int = 0
    buffer: int = 2
    worker_mode: str = "process"
    worker_timeout_s: float | None = DEFAULT_WORKER_TIMEOUT_S
    warm_start: bool = False

    def describe(self) -> str:
        mode = f", worker_mode={self.worker_mode!r}" if self.worker_mode != "process" else ""
        if self.worker_timeout_s != DEFAULT_WORKER_TIMEOUT_S:
            mode += f", worker_timeout_s={self.worker_timeout_s!r}"
        if self.warm_start:
            mode += ", warm_start=True"
        return f"prefetch(worker_count={self.worker_count}, buffer={self.buffer}{mode})"


@dataclass(frozen=True)
class Cache(Node):
    path: str | None = None
    max_bytes: int | None = None
    serializer: Any = None
    timeout_s: float = 3600.0
    storage_options: Any = field(default=None, compare=False, repr=False)  # may hold credentials

    def describe(self) -> str:
        where = "memory" if self.path is None else "disk"
        return f"cache({where})"

    def identity(self) -> str:
        return "cache()"  # where the cache lives changes no element and no position


@dataclass(frozen=True)
class Pack(Node):
    seq_len: int = 1
    window: int = 256
    truncate: bool = False

    def describe(self) -> str:
        return f"pack({self.seq_len}, window={self.window}, truncate={self.truncate})"


SOURCE_NODES = (Source, Mix, Interleave)

# What does not change the elements of the stream (only how or where it is computed).
_NOT_IN_FINGERPRINT = (Shard, Prefetch)


def describe_chain(nodes: Sequence[Node], *, for_fingerprint: bool = False) -> list[str]:
    """One line per node; with ``for_fingerprint``, only what defines the stream."""
    if for_fingerprint:
        return [n.identity() for n in nodes if not isinstance(n, _NOT_IN_FINGERPRINT)]
    return [n.describe() for n in nodes]
