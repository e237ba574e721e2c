"""Steps that change which element sits at which position: shuffle, repeat, slice.

Example:
    >>> import thresher as th
    >>> th.Dataset.range(6).shuffle(seed=1).repeat(2).compile().stages
    ['stage 0: RangeDataSource(0, 6, 1) -> shuffle(seed=1) -> repeat(2)']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from thresher.dataset.nodes.base import Node
from thresher.dataset.nodes.sources import Source
from thresher.dataset.stage import CompileContext, Stage, close_stage, shuffle_text
from thresher.dataset.views import SliceView
from thresher.errors import ConfigError
from thresher.transforms import FilterTransform, MapTransform

__all__ = ["Repeat", "Shuffle", "Slice"]


@dataclass(frozen=True)
class Shuffle(Node):
    seed: int = 0
    block: Any = None  # a thresher.BlockShuffle, or None for a full shuffle

    def describe(self) -> str:
        return shuffle_text(self.seed, self.block)

    def identity(self) -> str:
        if self.block is None:
            return self.describe()
        return f"shuffle(seed={self.seed}, block={self.block.config()})"  # natural boundaries by digest

    def compile(self, stage: Stage, ctx: CompileContext) -> Stage:
        movable = all(isinstance(op, (MapTransform, FilterTransform)) for op in stage.record_ops)
        if stage.shuffle is None and stage.epochs == 1 and stage.batch is None and movable \
                and not stage.endless_source:
            stage.shuffle, stage.block = self.seed, self.block
            return stage
        if stage.endless:
            raise ConfigError(f"{self.where}: cannot shuffle an endless dataset; shuffle before repeat()")
        stage = close_stage(stage, ctx, self.where)
        stage.shuffle, stage.block = self.seed, self.block
        return stage


@dataclass(frozen=True)
class Repeat(Node):
    num_epochs: int | None = None
    reseed_each_epoch: bool = True

    def describe(self) -> str:
        if self.reseed_each_epoch:
            return f"repeat({self.num_epochs})"
        return f"repeat({self.num_epochs}, reseed_each_epoch=False)"

    def noop(self, nodes: Sequence[Node], i: int) -> str | None:
        return f"removed repeat(1) at step {self.at}" if self.num_epochs == 1 else None

    def compile(self, stage: Stage, ctx: CompileContext) -> Stage:
        if self.num_epochs == 1:
            return stage
        if stage.batch is not None:
            raise ConfigError(f"{self.where}: repeat after batch is not supported; put repeat before batch (the "
                              "batches then run over the repeated stream and may span an epoch boundary) or use "
                              "drop_remainder")
        if stage.endless:
            raise ConfigError(f"{self.where}: the dataset already repeats forever")
        if len(stage.source) == 0:
            return stage  # an empty dataset repeated (even forever) is empty, as in Grain
        if not self.reseed_each_epoch or not stage.reseed:
            # Cycling the first epoch of what came before: close it, unless it is the
            # bare source. A reseeding repeat after a cycling one closes that one too.
            if not stage.bare:
                stage = close_stage(stage, ctx, self.where)
            stage.reseed = self.reseed_each_epoch
        stage.epochs = None if self.num_epochs is None else stage.epochs * self.num_epochs  # type: ignore[operator]
        return stage


@dataclass(frozen=True)
class Slice(Node):
    start: int | None = None
    stop: int | None = None
    step: int | None = None

    def describe(self) -> str:
        return f"slice({self.start}, {self.stop}, {self.step})"

    def indices(self, length: int) -> range:
        return range(length)[slice(self.start, self.stop, self.step)]

    def noop(self, nodes: Sequence[Node], i: int) -> str | None:
        """A slice that keeps every element of the source it applies to."""
        first = nodes[0]
        if not isinstance(first, Source):
            return None
        r = range(len(first.source))
        for n in nodes[1:i]:
            if isinstance(n, Slice):
                r = r[slice(n.start, n.stop, n.step)]
            elif not n.places:
                return None
        if r[slice(self.start, self.stop, self.step)] != r:
            return None
        return f"removed {self.describe()} at step {self.at} (it keeps everything)"

    def compile(self, stage: Stage, ctx: CompileContext) -> Stage:
        if stage.endless:
            raise ConfigError(f"{self.where}: cannot slice an endless dataset; slice before repeat()")
        if not stage.bare:
            stage = close_stage(stage, ctx, self.where)
        r = self.indices(len(stage.source))
        sliced = Stage(SliceView(stage.source, r), f"SliceView({stage.label})[{r.start}:{r.stop}:{r.step}]",
                       reseed=stage.reseed)
        # A closed filtering stage has holes: the slice takes positions, holes included
        # (as Grain's MapDataset.slice after filter), and the holes are removed after it.
        sliced.record_ops, sliced.steps, sliced.lost = list(stage.record_ops), list(stage.steps), stage.lost
        return sliced
