"""Steps that change elements: map, random_map, filter, map_batch.

Example:
    >>> import thresher as th
    >>> list(th.Dataset.range(5).map(lambda x: x * 10).filter(lambda x: x != 20))
    [0, 10, 30, 40]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from thresher.dataset.fused import fused_filter, fused_map
from thresher.dataset.nodes.base import Node, fn_name
from thresher.dataset.stage import AfterEngine, CompileContext, Stage
from thresher.errors import ConfigError
from thresher.randomness.seeds import DOMAIN_OPERATION, derive_seed
from thresher.transforms import FilterTransform, MapTransform, RandomMapTransform

__all__ = ["Filter", "Map", "MapBatch", "RandomMap", "identity"]


@dataclass(frozen=True)
class Map(Node):
    """One map, or several consecutive ones fused (``fns`` applied in order)."""

    fns: tuple[Callable[[Any], Any], ...] = ()
    batchable: bool = False
    fused_from: tuple[int, ...] = ()

    def describe(self) -> str:
        return "+".join(f"map({fn_name(f)})" for f in self.fns)

    def compile(self, stage: Stage, ctx: CompileContext) -> Stage:
        stage.add_op(MapTransform(fused_map(self.fns)), self.describe())
        return stage

    def after_engine(self, front: AfterEngine) -> None:
        front.add_maps(self.fns, self.where)

    def fused_into(self, prev: Node) -> tuple[Node, str] | None:
        if not isinstance(prev, Map):
            return None
        fused = replace(prev, fns=prev.fns + self.fns, batchable=prev.batchable and self.batchable,
                        fused_from=(prev.fused_from or (prev.at,)) + (self.at,))
        return fused, f"fused map at step {self.at} into the map at step {prev.at}"

    def noop(self, nodes: Sequence[Node], i: int) -> str | None:
        return f"removed map(identity) at step {self.at}" if all(f is identity for f in self.fns) else None


@dataclass(frozen=True)
class RandomMap(Node):
    fn: Callable[[Any, Any], Any] = field(default=lambda x, rng: x)
    seed: int | None = None

    def describe(self) -> str:
        return f"random_map({fn_name(self.fn)}, seed={self.seed})"

    def compile(self, stage: Stage, ctx: CompileContext) -> Stage:
        seed = derive_seed(self.seed or 0, DOMAIN_OPERATION, self.at, ctx.salt)
        stage.add_op(RandomMapTransform(self.fn, seed=seed), self.describe())
        if stage.batch is None:
            stage.randomized = True
        return stage


@dataclass(frozen=True)
class Filter(Node):
    """One predicate, or several consecutive ones fused (all must hold)."""

    fns: tuple[Callable[[Any], Any], ...] = ()

    def describe(self) -> str:
        return "+".join(f"filter({fn_name(f)})" for f in self.fns)

    def compile(self, stage: Stage, ctx: CompileContext) -> Stage:
        stage.add_op(FilterTransform(fused_filter(self.fns)), self.describe())
        stage.lost = stage.lost or f"filter at step {self.at}"
        return stage

    def fused_into(self, prev: Node) -> tuple[Node, str] | None:
        if not isinstance(prev, Filter):
            return None
        note = f"fused filter at step {self.at} into the filter at step {prev.at}"
        return replace(prev, fns=prev.fns + self.fns), note


@dataclass(frozen=True)
class MapBatch(Node):
    fns: tuple[Callable[[Any], Any], ...] = ()
    vectorised_from: tuple[int, ...] = ()

    def describe(self) -> str:
        return "+".join(f"map_batch({fn_name(f)})" for f in self.fns)

    def compile(self, stage: Stage, ctx: CompileContext) -> Stage:
        if stage.batch is None and not stage.batched_source:
            raise ConfigError(f"{self.where}: map_batch maps whole batches; put it after batch()")
        stage.add_op(MapTransform(fused_map(self.fns)), self.describe())
        return stage

    def after_engine(self, front: AfterEngine) -> None:
        front.add_maps(self.fns, self.where)

    def fused_into(self, prev: Node) -> tuple[Node, str] | None:
        if not isinstance(prev, MapBatch):
            return None
        fused = replace(prev, fns=prev.fns + self.fns, vectorised_from=prev.vectorised_from + self.vectorised_from)
        return fused, f"fused map_batch at step {self.at} into the one at step {prev.at}"


def identity(x: Any) -> Any:
    """Returns its argument; ``ds.map(identity)`` is removed by the optimiser.

    Example:
        >>> from thresher.dataset import identity
        >>> identity(3)
        3
    """
    return x
