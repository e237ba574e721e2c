"""A stage of a compiled Dataset chain, and what compiling a chain carries from node to node.

One *stage* is exactly what a DataLoader runs: a random-access source, an IndexSampler
(shuffle, seed, epochs; shards for the last stage), per-record operations, at most one Batch
and operations on batches. Each node of a chain adds itself to the current stage
(``Node.compile``), or closes it (:func:`close_stage`) into a random-access view that the next
stage reads. :class:`CompileContext` carries what a chain's compilation shares: the stages
written so far, the shard, what runs after the engine, and how to build a component chain.

Example:
    >>> import thresher as th
    >>> from thresher.dataset.stage import Stage, stage_line
    >>> stage_line(Stage(th.sources.RangeDataSource(0, 4), "range", shuffle=3))
    'range -> shuffle(seed=3)'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from thresher.dataset.repeat import RepeatView, repeated_sampler
from thresher.dataset.views import StageView, not_hole
from thresher.errors import ConfigError
from thresher.loader.chunk import ChunkProcessor
from thresher.loader.options import LoaderOptions
from thresher.samplers.block_shuffle import BlockShuffle
from thresher.samplers.index_sampler import IndexSampler
from thresher.samplers.sharding import ShardOptions
from thresher.transforms import Batch, FilterTransform, RandomMapTransform, plan_operations

__all__ = ["AfterEngine", "CompileContext", "PackFront", "Stage", "close_stage", "shuffle_text", "stage_line"]

#: The workers of a chain without ``prefetch`` (none), and a prefetch's defaults (2 chunks per worker).
PREFETCH_DEFAULTS = LoaderOptions(worker_buffer_size=2)


@dataclass
class Stage:
    """What one DataLoader of the compiled chain runs (see the module docstring)."""

    source: Any
    label: str
    endless_source: bool = False
    shuffle: int | None = None
    block: BlockShuffle | None = None  # with ``shuffle``: a block shuffle instead of a full one
    epochs: int | None = 1
    record_ops: list[Any] = field(default_factory=list)
    batch: Batch | None = None
    batch_ops: list[Any] = field(default_factory=list)
    randomized: bool = False
    lost: str | None = None  # the step that made the stage iterable-only
    steps: list[str] = field(default_factory=list)
    batched_source: bool = False  # the source's elements are batches (a closed batched stage)
    reseed: bool = True  # each repeat epoch reads the source's own epoch (when the source changes by epoch)

    @property
    def bare(self) -> bool:
        return self.shuffle is None and self.epochs == 1 and not self.record_ops and self.batch is None

    @property
    def endless(self) -> bool:
        return self.endless_source or self.epochs is None

    @property
    def changes_by_epoch(self) -> bool:
        """Whether the stage run past its end (a later repeat epoch) gives other elements."""
        random_ops = any(isinstance(op, RandomMapTransform) for op in self.record_ops + self.batch_ops)
        varies = bool(getattr(self.source, "varies_by_epoch", False))
        return self.shuffle is not None or random_ops or (varies and self.reseed)

    @property
    def holey(self) -> bool:
        """Whether the stage closes into a view with holes: it filters records and does not batch them."""
        return self.batch is None and any(isinstance(op, FilterTransform) for op in self.record_ops)

    def engine(self, shard: ShardOptions | None = None, *, endless: bool = False) -> tuple[Any, IndexSampler]:
        """The source and sampler the engine runs; ``endless``: the stage without an end."""
        epochs = None if endless or self.endless_source else self.epochs
        if self.reseed and epochs != 1 and not self.endless_source and getattr(self.source, "varies_by_epoch", False):
            view = RepeatView(self.source, shuffle=self.shuffle, num_epochs=epochs, block=self.block)
            return view, repeated_sampler(view, self.shuffle, shard)
        shuffle: bool | BlockShuffle = self.block if self.block is not None else self.shuffle is not None
        return self.source, IndexSampler(len(self.source), shuffle=shuffle, seed=self.shuffle,
                                         num_epochs=epochs, shard_options=shard)

    def operations(self) -> list[Any]:
        return self.record_ops + ([self.batch] if self.batch is not None else []) + self.batch_ops

    def processor(self, *, endless: bool = False) -> ChunkProcessor:
        source, sampler = self.engine(endless=endless)
        return ChunkProcessor(source, sampler, plan_operations(self.operations()))

    def add_op(self, op: Any, step: str) -> None:
        (self.batch_ops if self.batch is not None else self.record_ops).append(op)
        self.steps.append(step)


class AfterEngine(Protocol):
    """What runs after the engine (on packed rows, or on batches of a filtered stream's batches):
    the nodes written after it add themselves through these."""

    def add_batch(self, batch_size: int, drop_remainder: bool, pad_to: Any, at: str) -> None: ...

    def add_maps(self, fns: Sequence[Callable[[Any], Any]], at: str) -> None: ...

    def refuse(self, at: str) -> ConfigError: ...


@dataclass
class PackFront:
    """What runs after the engine on packed rows: flattening windows, Batch, batch maps."""

    seq_len: int
    batch: Batch | None = None
    batch_fns: list[Callable[[Any], Any]] = field(default_factory=list)

    def add_batch(self, batch_size: int, drop_remainder: bool, pad_to: Any, at: str) -> None:
        if self.batch is not None:
            raise self.refuse(at)
        if pad_to is not None:
            raise ConfigError(f"{at}: packed rows all have the same length; drop pad_to")
        self.batch = Batch(batch_size, drop_remainder)

    def add_maps(self, fns: Sequence[Callable[[Any], Any]], at: str) -> None:
        if self.batch is None:
            raise self.refuse(at)
        self.batch_fns.extend(fns)

    def refuse(self, at: str) -> ConfigError:
        return ConfigError(f"{at}: after pack, thresher supports batch() and then map()/map_batch() on the packed "
                           "batches; map, filter and random_map the records before pack")


class CompileContext:
    """What the compilation of one chain (or of one component of a mix) shares between its nodes."""

    def __init__(self, *, salt: int, prefix_digest: Callable[[int], str] | None, options: LoaderOptions,
                 mix_segment: tuple[int, list[int]] | None = None,
                 build: Callable[[Any, CompileContext], Stage] | None = None) -> None:
        self.salt = salt
        self.prefix_digest = prefix_digest
        self.options = options  # the chain's workers (its last prefetch's), for every DataLoader it builds
        self.mix_segment = mix_segment
        self.stages: list[str] = []
        self.reseeded = False  # a stage reads the epochs of a view that changes by epoch
        self.shard: ShardOptions | None = None
        self.after: AfterEngine | None = None  # set by pack, or by a batch of a filtered stream's batches
        self.build = build  # compiles a component chain's nodes in a context of its own

    def component(self, salt: int, prefix_digest: Callable[[int], str] | None) -> CompileContext:
        """A context for a component chain (of a mix or an interleave): the same workers, its own salt."""
        return CompileContext(salt=salt, prefix_digest=prefix_digest, options=self.options, build=self.build)

    def record_stage(self, stage: Stage, note: str = "") -> int:
        """Writes ``stage``'s line into the compiled stages; returns its index."""
        index = len(self.stages)
        self.stages.append(f"stage {index}: {stage_line(stage)}{note}")
        return index


def shuffle_text(seed: int, block: BlockShuffle | None) -> str:
    """``shuffle(seed=1)``, or ``shuffle(seed=1, block=BlockShuffle(512 x 128))`` for a block shuffle."""
    if block is None:
        return f"shuffle(seed={seed})"
    natural = ", natural boundaries" if block.boundaries is not None else ""
    return f"shuffle(seed={seed}, block=BlockShuffle({block.block_size} x {block.window_blocks}{natural}))"


def stage_line(stage: Stage) -> str:
    parts = [stage.label]
    if stage.shuffle is not None:
        parts.append(shuffle_text(stage.shuffle, stage.block))
    if stage.epochs != 1:
        parts.append(f"repeat({stage.epochs})")
    parts.extend(stage.steps)
    return " -> ".join(parts)


def close_stage(stage: Stage, ctx: CompileContext, why: str) -> Stage:
    """The stage as a random-access view, and a fresh stage reading it.

    A stage that filters records closes into a view with holes, and the fresh
    stage starts by removing them (it stays iterable-only).
    """
    holes = stage.lost is not None and stage.holey
    if stage.lost is not None and not holes:
        raise ConfigError(f"{why}: needs random access to what comes before it, but {stage.lost} made the "
                          "dataset iterable-only (a filter before a batch, or packing); move it before that step")
    index = ctx.record_stage(stage)
    processor = stage.processor()
    extends = stage.changes_by_epoch and not stage.endless and len(stage.source) > 0
    epochs = stage.processor(endless=True) if extends else None
    ctx.reseeded = ctx.reseeded or isinstance(processor.source, RepeatView)
    view = StageView(processor, f"stage {index}", epochs_processor=epochs, holes=holes)
    fresh = Stage(view, f"StageView(stage {index})", endless_source=stage.endless,
                  batched_source=stage.batch is not None or stage.batched_source)
    if holes:
        fresh.record_ops.append(FilterTransform(not_hole))
        fresh.steps.append("filter(holes)")
        fresh.lost = stage.lost
    return fresh
