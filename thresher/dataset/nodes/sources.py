"""The steps a chain starts with: a source, a mixture, an interleave.

Example:
    >>> import thresher as th
    >>> from thresher.dataset.nodes import Source
    >>> Source(at=0, source=th.sources.RangeDataSource(0, 3)).describe()
    'source(RangeDataSource, len=3)'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from thresher.dataset.interleave import InterleaveView
from thresher.dataset.mix import MixSchedule, MixView
from thresher.dataset.nodes.base import SourceNode
from thresher.dataset.nodes.placement import Shard
from thresher.dataset.stage import CompileContext, PackFront, Stage, close_stage
from thresher.errors import ConfigError
from thresher.randomness.seeds import derive_seed

__all__ = ["Interleave", "Mix", "Source", "component_view"]

_DOMAIN_COMPONENT = 0x434F4D50  # "COMP": the salt of a component chain


def component_view(dataset: Any, ctx: CompileContext, index: int, what: str) -> tuple[Any, int | None]:
    """A component of a mix or interleave as a random-access view, and its length."""
    nodes = dataset.optimized_nodes()
    for n in nodes:
        if isinstance(n, Shard):
            raise ConfigError(f"{what} component {index} has a shard(): shard the {what} instead")
    sub = ctx.component(derive_seed(ctx.salt, index, _DOMAIN_COMPONENT), dataset.prefix_digest)
    assert ctx.build is not None
    stage = ctx.build(nodes, sub)
    if isinstance(sub.after, PackFront):
        raise ConfigError(f"{what} component {index} is packed; pack the {what} instead")
    if stage.lost is not None:
        raise ConfigError(f"{what} component {index} is iterable-only ({stage.lost}); {what} needs random-access "
                          f"components: filter after the {what}")
    closed = close_stage(stage, sub, f"{what} component {index}")
    ctx.reseeded = ctx.reseeded or sub.reseeded
    ctx.stages.extend(f"  {what}[{index}] {line}" for line in sub.stages)
    n = len(closed.source)
    return closed.source, None if closed.endless_source else n


@dataclass(frozen=True)
class Source(SourceNode):
    source: Any = None

    def describe(self) -> str:
        return f"source({type(self.source).__name__}, len={len(self.source)})"

    def identity(self) -> str:
        # As in the engine's fingerprint, only the length: the same records may move
        # between kinds of source (an in-memory copy, other files) and keep the state.
        return f"source(len={len(self.source)})"

    def start(self, ctx: CompileContext) -> Stage:
        return Stage(self.source, repr(self.source))


@dataclass(frozen=True)
class Mix(SourceNode):
    datasets: tuple[Any, ...] = ()
    weights: tuple[float, ...] = ()
    period: int = 1000
    seed: int | None = None

    def describe(self) -> str:
        parts = ",".join(d.fingerprint() for d in self.datasets)
        w = ",".join(f"{x:.12g}" for x in self.weights)
        return f"mix([{parts}], weights=[{w}], period={self.period}, seed={self.seed})"

    def start(self, ctx: CompileContext) -> Stage:
        views, lengths = zip(*[component_view(d, ctx, j, "mix") for j, d in enumerate(self.datasets)], strict=False)
        schedule = MixSchedule(self.weights, self.period, self.seed)
        origin, offsets = ctx.mix_segment if ctx.mix_segment is not None else (0, None)
        mix = MixView(views, lengths, schedule, origin, offsets)
        return Stage(mix, repr(mix), endless_source=mix.endless)


@dataclass(frozen=True)
class Interleave(SourceNode):
    datasets: tuple[Any, ...] = ()
    cycle_length: int = 1
    block_length: int = 1

    def describe(self) -> str:
        parts = ",".join(d.fingerprint() for d in self.datasets)
        return f"interleave([{parts}], cycle_length={self.cycle_length}, block_length={self.block_length})"

    def start(self, ctx: CompileContext) -> Stage:
        views, lengths = zip(*[component_view(d, ctx, j, "interleave") for j, d in enumerate(self.datasets)],
                             strict=False)
        for j, n in enumerate(lengths):
            if n is None:
                raise ConfigError(f"interleave component {j} is endless; interleave needs finite datasets "
                                  "(repeat after the interleave)")
        view = InterleaveView(views, [int(n) for n in lengths if n is not None], self.cycle_length,
                              self.block_length)
        return Stage(view, repr(view))
