"""Steps that group elements: batch (padded or not) and pack.

Example:
    >>> import thresher as th
    >>> [b.tolist() for b in th.Dataset.range(5).batch(2)]
    [[0, 1], [2, 3], [4]]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from thresher.dataset.nodes.base import Node
from thresher.dataset.packing import PackView
from thresher.dataset.padding import PaddedBatch
from thresher.dataset.repeat import RepeatView
from thresher.dataset.stage import AfterEngine, CompileContext, PackFront, Stage, close_stage
from thresher.errors import ConfigError
from thresher.transforms import Batch

__all__ = ["BatchNode", "Pack"]


@dataclass(frozen=True)
class BatchNode(Node):
    batch_size: int = 1
    drop_remainder: bool = False
    pad_to: Any = None
    padding_value: Any = 0

    def describe(self) -> str:
        pad = "" if self.pad_to is None else f", pad_to={self.pad_to!r}, padding_value={self.padding_value!r}"
        return f"batch({self.batch_size}, drop_remainder={self.drop_remainder}{pad})"

    def batch(self) -> Batch:
        if self.pad_to is None:
            return Batch(self.batch_size, self.drop_remainder)
        return PaddedBatch(self.batch_size, self.drop_remainder, pad_to=self.pad_to,
                           padding_value=self.padding_value)

    def compile(self, stage: Stage, ctx: CompileContext) -> Stage:
        if stage.batch is not None:
            stage = close_stage(stage, ctx, self.where)
        stage.batch = self.batch()
        stage.steps.append(repr(stage.batch))
        return stage

    def after_engine(self, front: AfterEngine) -> None:
        front.add_batch(self.batch_size, self.drop_remainder, self.pad_to, self.where)


@dataclass(frozen=True)
class Pack(Node):
    seq_len: int = 1
    window: int = 256
    truncate: bool = False

    def describe(self) -> str:
        return f"pack({self.seq_len}, window={self.window}, truncate={self.truncate})"

    def compile(self, stage: Stage, ctx: CompileContext) -> Stage:
        if stage.batch is not None:
            raise ConfigError(f"pack at step {self.at} packs records, not batches: put pack before batch")
        index = ctx.record_stage(stage, f"  [packed by windows of {self.window}]")
        processor = stage.processor()
        ctx.reseeded = ctx.reseeded or isinstance(processor.source, RepeatView)
        view = PackView(processor, self.seq_len, self.window, self.truncate)
        ctx.after = PackFront(self.seq_len)
        return Stage(view, f"PackView(stage {index}, seq_len={self.seq_len})",
                     endless_source=stage.endless, lost=f"pack at step {self.at}")
