"""Compiling a Dataset chain onto the engine: stages of (source, IndexSampler, operations).

One *stage* is exactly what a DataLoader runs: a random-access source, an
IndexSampler (shuffle, seed, epochs; shards for the last stage), per-record
operations, at most one Batch and operations on batches. A chain fills one stage
for as long as it can:

- ``shuffle`` goes to the stage's sampler when nothing but maps and filters came
  before it in the stage (they commute with a permutation of positions);
- ``repeat`` sets the stage's epochs: everything in the stage sees the repeated
  positions, so each epoch is reshuffled and random maps draw anew (Grain's rule,
  ``reseed_each_epoch=True``). When the stage reads a view that changes from one
  epoch to the next (a closed stage that shuffles or draws), epoch e reads the
  view's epoch e (``repeat.RepeatView``), so draws before a shuffle or a slice
  change too. ``repeat(n, reseed_each_epoch=False)`` closes the stage instead and
  cycles its first epoch;
- maps, random maps and filters become the stage's record operations, or its
  batch operations after the Batch.

When a step cannot join the stage (a slice after a shuffle, a shuffle after a
random map or a batch, a second batch, the components of a mix, a cache), the
stage is *closed* into a random-access view (``views.StageView``) and becomes
the source of the next stage. A stage with a filter closes into a view with
holes (``views.HOLE`` where the filter removed an element; the next stage
filters them out), as Grain's MapDataset does; a batch of filtered batches runs
after the engine (``rebatch.RebatchFront``). The last stage is the DataLoader that iterates;
views run inside its ChunkProcessor, in its worker processes when there are any.

Example:
    >>> import thresher as th
    >>> ds = th.Dataset.range(10).map(lambda x: x * 2).shuffle(seed=1)[2:6].batch(2)
    >>> print("\\n".join(ds.compile().stages))
    stage 0: RangeDataSource(0, 10, 1) -> shuffle(seed=1) -> map(<lambda>)
    stage 1: SliceView(StageView(stage 0))[2:6:1] -> Batch(2, drop_remainder=False)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from thresher.dataset import nodes as N
from thresher.dataset.cache import MemoryCacheView
from thresher.dataset.cache_files import build_disk_cache, pod_process
from thresher.dataset.fused import fused_filter, fused_map
from thresher.dataset.interleave import InterleaveView
from thresher.dataset.mix import MixSchedule, MixView
from thresher.dataset.packing import PackView
from thresher.dataset.padding import PaddedBatch
from thresher.dataset.rebatch import RebatchFront
from thresher.dataset.repeat import RepeatView, repeated_sampler
from thresher.dataset.views import SliceView, StageView, not_hole
from thresher.errors import ConfigError
from thresher.loader.chunk import ChunkProcessor
from thresher.loader.data_loader import DataLoader
from thresher.loader.options import DEFAULT_WORKER_TIMEOUT_S
from thresher.loader.state import stream_identity
from thresher.randomness.seeds import DOMAIN_OPERATION, derive_seed
from thresher.samplers.index_sampler import IndexSampler
from thresher.samplers.sharding import ShardOptions
from thresher.transforms import (
    Batch,
    FilterTransform,
    MapTransform,
    RandomMapTransform,
    plan_operations,
)

__all__ = ["Compiled", "CompiledLoader", "PackFront", "compile_chain", "component_view"]

_PACK_CHUNK_WINDOWS = 1


class CompiledLoader(DataLoader):
    """The DataLoader of a chain's last stage, whose state fingerprint is the chain's.

    The fingerprint covers the chain as written (before optimisation), so a
    checkpoint taken with optimisation on restores with it off, and the reverse.

    Example:
        >>> import thresher as th
        >>> ds = th.Dataset.range(6).map(abs).map(abs)
        >>> loader = ds.to_data_loader()
        >>> loader.stream["operations"] == ds.fingerprint() == ds.with_options(optimize=False).fingerprint()
        True
    """

    def __init__(self, source: Any, sampler: IndexSampler, operations: Sequence[Any], *, chain_digest: str,
                 worker_count: int = 0, buffer: int | None = None, chunk_size: int | None = None,
                 worker_mode: str = "process", worker_timeout_s: float | None = DEFAULT_WORKER_TIMEOUT_S,
                 warm_start: bool = False) -> None:
        super().__init__(source, sampler, operations, worker_count=worker_count, chunk_size=chunk_size,
                         worker_buffer_size=2 if buffer is None else buffer,
                         worker_mode="thread" if worker_mode == "thread" else "process",
                         worker_timeout_s=worker_timeout_s, warm_start=warm_start)
        self.chain_digest = chain_digest

    @cached_property
    def stream(self) -> dict[str, Any]:
        return stream_identity(self.sampler.stream_config(), self.chain_digest, self.plan.descriptions)


@dataclass
class PackFront:
    """What runs after the engine on packed rows: flattening windows, Batch, batch maps."""

    seq_len: int
    batch: Batch | None = None
    batch_fns: list[Callable[[Any], Any]] = field(default_factory=list)


@dataclass
class _Stage:
    source: Any
    label: str
    endless_source: bool = False
    shuffle: int | None = None
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

    def engine(self, shard: ShardOptions | None = None, *, endless: bool = False) -> tuple[Any, IndexSampler]:
        """The source and sampler the engine runs; ``endless``: the stage without an end."""
        epochs = None if endless or self.endless_source else self.epochs
        if self.reseed and epochs != 1 and not self.endless_source and getattr(self.source, "varies_by_epoch", False):
            view = RepeatView(self.source, shuffle=self.shuffle, num_epochs=epochs)
            return view, repeated_sampler(view, self.shuffle, shard)
        return self.source, IndexSampler(len(self.source), shuffle=self.shuffle is not None, seed=self.shuffle,
                                         num_epochs=epochs, shard_options=shard)

    def operations(self) -> list[Any]:
        return self.record_ops + ([self.batch] if self.batch is not None else []) + self.batch_ops

    def processor(self, *, endless: bool = False) -> ChunkProcessor:
        source, sampler = self.engine(endless=endless)
        return ChunkProcessor(source, sampler, plan_operations(self.operations()))

    def add_op(self, op: Any, step: str) -> None:
        (self.batch_ops if self.batch is not None else self.record_ops).append(op)
        self.steps.append(step)


@dataclass
class Compiled:
    """A compiled chain: the last stage's DataLoader and what runs after it."""

    loader: CompiledLoader
    front: PackFront | None
    rebatch: RebatchFront | None
    mix: MixView | None  # the last stage's source, when it is a mixture read in order
    endless: bool
    lost: str | None
    stages: list[str]
    nodes: tuple[N.Node, ...]


class _Context:
    def __init__(self, *, salt: int, prefix_digest: Callable[[int], str] | None, worker_count: int,
                 buffer: int | None, mix_segment: tuple[int, list[int]] | None = None,
                 worker_mode: str = "process", worker_timeout_s: float | None = DEFAULT_WORKER_TIMEOUT_S,
                 warm_start: bool = False) -> None:
        self.salt = salt
        self.warm_start = warm_start
        self.prefix_digest = prefix_digest
        self.worker_count = worker_count
        self.worker_mode = worker_mode
        self.worker_timeout_s = worker_timeout_s
        self.buffer = buffer
        self.mix_segment = mix_segment
        self.stages: list[str] = []
        self.reseeded = False  # a stage reads the epochs of a view that changes by epoch


def _stage_line(stage: _Stage) -> str:
    parts = [stage.label]
    if stage.shuffle is not None:
        parts.append(f"shuffle(seed={stage.shuffle})")
    if stage.epochs != 1:
        parts.append(f"repeat({stage.epochs})")
    parts.extend(stage.steps)
    return " -> ".join(parts)


def _holey(stage: _Stage) -> bool:
    """Whether the stage closes into a view with holes: it filters records and does not batch them."""
    return stage.batch is None and any(isinstance(op, FilterTransform) for op in stage.record_ops)


def _close(stage: _Stage, ctx: _Context, why: str) -> _Stage:
    """The stage as a random-access view, and a fresh stage reading it.

    A stage that filters records closes into a view with holes, and the fresh
    stage starts by removing them (it stays iterable-only).
    """
    holes = stage.lost is not None and _holey(stage)
    if stage.lost is not None and not holes:
        raise ConfigError(f"{why}: needs random access to what comes before it, but {stage.lost} made the "
                          "dataset iterable-only (a filter before a batch, or packing); move it before that step")
    index = len(ctx.stages)
    ctx.stages.append(f"stage {index}: {_stage_line(stage)}")
    processor = stage.processor()
    extends = stage.changes_by_epoch and not stage.endless and len(stage.source) > 0
    epochs = stage.processor(endless=True) if extends else None
    ctx.reseeded = ctx.reseeded or isinstance(processor.source, RepeatView)
    view = StageView(processor, f"stage {index}", epochs_processor=epochs, holes=holes)
    fresh = _Stage(view, f"StageView(stage {index})", endless_source=stage.endless,
                   batched_source=stage.batch is not None or stage.batched_source)
    if holes:
        fresh.record_ops.append(FilterTransform(not_hole))
        fresh.steps.append("filter(holes)")
        fresh.lost = stage.lost
    return fresh


def _random_seed(node: N.RandomMap, ctx: _Context) -> int:
    return derive_seed(node.seed or 0, DOMAIN_OPERATION, node.at, ctx.salt)


def component_view(dataset: Any, ctx: _Context, index: int, what: str) -> tuple[Any, int | None]:
    """A component of a mix or interleave as a random-access view, and its length."""
    nodes = dataset.optimized_nodes()
    for n in nodes:
        if isinstance(n, N.Shard):
            raise ConfigError(f"{what} component {index} has a shard(): shard the {what} instead")
    sub = _Context(salt=derive_seed(ctx.salt, index, 0x434F4D50), prefix_digest=dataset.prefix_digest,
                   worker_count=ctx.worker_count, buffer=ctx.buffer, worker_mode=ctx.worker_mode,
                   worker_timeout_s=ctx.worker_timeout_s, warm_start=ctx.warm_start)
    stage, _, front, _ = _build(nodes, sub)
    if front is not None:
        raise ConfigError(f"{what} component {index} is packed; pack the {what} instead")
    if stage.lost is not None:
        raise ConfigError(f"{what} component {index} is iterable-only ({stage.lost}); {what} needs random-access "
                          f"components: filter after the {what}")
    closed = _close(stage, sub, f"{what} component {index}")
    ctx.reseeded = ctx.reseeded or sub.reseeded
    ctx.stages.extend(f"  {what}[{index}] {line}" for line in sub.stages)
    n = len(closed.source)
    return closed.source, None if closed.endless_source else n


def _start(node: N.Node, ctx: _Context) -> _Stage:
    if isinstance(node, N.Source):
        return _Stage(node.source, repr(node.source))
    if isinstance(node, N.Mix):
        views, lengths = zip(*[component_view(d, ctx, j, "mix") for j, d in enumerate(node.datasets)], strict=False)
        schedule = MixSchedule(node.weights, node.period, node.seed)
        origin, offsets = ctx.mix_segment if ctx.mix_segment is not None else (0, None)
        mix = MixView(views, lengths, schedule, origin, offsets)
        return _Stage(mix, repr(mix), endless_source=mix.endless)
    if isinstance(node, N.Interleave):
        views, lengths = zip(*[component_view(d, ctx, j, "interleave") for j, d in enumerate(node.datasets)],
                             strict=False)
        for j, n in enumerate(lengths):
            if n is None:
                raise ConfigError(f"interleave component {j} is endless; interleave needs finite datasets "
                                  "(repeat after the interleave)")
        view = InterleaveView(views, [int(n) for n in lengths if n is not None], node.cycle_length,
                              node.block_length)
        return _Stage(view, repr(view))
    raise ConfigError(f"a Dataset chain must start with a source, got {node.describe()}")


def _batch(node: N.BatchNode) -> Batch:
    if node.pad_to is None:
        return Batch(node.batch_size, node.drop_remainder)
    return PaddedBatch(node.batch_size, node.drop_remainder, pad_to=node.pad_to, padding_value=node.padding_value)


def _step(stage: _Stage, node: N.Node, ctx: _Context) -> _Stage:
    """Adds one node to the stage (or closes it and starts the next)."""
    at = f"{node.describe()} at step {node.at}"
    if isinstance(node, N.Shuffle):
        movable = all(isinstance(op, (MapTransform, FilterTransform)) for op in stage.record_ops)
        if stage.shuffle is None and stage.epochs == 1 and stage.batch is None and movable \
                and not stage.endless_source:
            stage.shuffle = node.seed
            return stage
        if stage.endless:
            raise ConfigError(f"{at}: cannot shuffle an endless dataset; shuffle before repeat()")
        stage = _close(stage, ctx, at)
        stage.shuffle = node.seed
        return stage
    if isinstance(node, N.Repeat):
        if node.num_epochs == 1:
            return stage
        if stage.batch is not None:
            raise ConfigError(f"{at}: repeat after batch is not supported; put repeat before batch (the batches "
                              "then run over the repeated stream and may span an epoch boundary) or use "
                              "drop_remainder")
        if stage.endless:
            raise ConfigError(f"{at}: the dataset already repeats forever")
        if len(stage.source) == 0:
            return stage  # an empty dataset repeated (even forever) is empty, as in Grain
        if not node.reseed_each_epoch or not stage.reseed:
            # Cycling the first epoch of what came before: close it, unless it is the
            # bare source. A reseeding repeat after a cycling one closes that one too.
            if not stage.bare:
                stage = _close(stage, ctx, at)
            stage.reseed = node.reseed_each_epoch
        stage.epochs = None if node.num_epochs is None else stage.epochs * node.num_epochs  # type: ignore[operator]
        return stage
    if isinstance(node, N.Slice):
        if stage.endless:
            raise ConfigError(f"{at}: cannot slice an endless dataset; slice before repeat()")
        if not stage.bare:
            stage = _close(stage, ctx, at)
        r = node.indices(len(stage.source))
        sliced = _Stage(SliceView(stage.source, r), f"SliceView({stage.label})[{r.start}:{r.stop}:{r.step}]",
                        reseed=stage.reseed)
        # A closed filtering stage has holes: the slice takes positions, holes included
        # (as Grain's MapDataset.slice after filter), and the holes are removed after it.
        sliced.record_ops, sliced.steps, sliced.lost = list(stage.record_ops), list(stage.steps), stage.lost
        return sliced
    if isinstance(node, N.Map):
        stage.add_op(MapTransform(fused_map(node.fns)), node.describe())
        return stage
    if isinstance(node, N.RandomMap):
        stage.add_op(RandomMapTransform(node.fn, seed=_random_seed(node, ctx)), node.describe())
        if stage.batch is None:
            stage.randomized = True
        return stage
    if isinstance(node, N.Filter):
        stage.add_op(FilterTransform(fused_filter(node.fns)), node.describe())
        stage.lost = stage.lost or f"filter at step {node.at}"
        return stage
    if isinstance(node, N.BatchNode):
        if stage.batch is not None:
            stage = _close(stage, ctx, at)
        stage.batch = _batch(node)
        stage.steps.append(repr(stage.batch))
        return stage
    if isinstance(node, N.MapBatch):
        if stage.batch is None and not stage.batched_source:
            raise ConfigError(f"{at}: map_batch maps whole batches; put it after batch()")
        stage.add_op(MapTransform(fused_map(node.fns)), node.describe())
        return stage
    if isinstance(node, N.Cache):
        return _cache(stage, node, ctx)
    raise ConfigError(f"{at}: not supported here")


def _cache(stage: _Stage, node: N.Cache, ctx: _Context) -> _Stage:
    at = f"cache at step {node.at}"
    if stage.endless:
        raise ConfigError(f"{at}: cannot cache an endless dataset; cache before repeat()")
    if node.path is None:
        closed = _close(stage, ctx, f"{at} (in memory)")
        view = MemoryCacheView(closed.source, node.max_bytes, at)
        cached = _Stage(view, f"MemoryCacheView({closed.label})")
        # After a filter the cached view has holes; they are removed after it.
        cached.record_ops, cached.steps, cached.lost = list(closed.record_ops), list(closed.steps), closed.lost
        return cached
    index = len(ctx.stages)
    ctx.stages.append(f"stage {index}: {_stage_line(stage)}  [written once to {node.path}]")
    digest = ctx.prefix_digest(node.at) if ctx.prefix_digest is not None else "?"

    process = pod_process()

    def elements() -> Any:
        source, sampler = stage.engine(_cache_part(stage, *process))
        ctx.reseeded = ctx.reseeded or isinstance(source, RepeatView)
        loader = DataLoader(source, sampler, stage.operations(), worker_count=ctx.worker_count,
                            worker_mode="thread" if ctx.worker_mode == "thread" else "process",
                            worker_timeout_s=ctx.worker_timeout_s, warm_start=ctx.warm_start)
        with iter(loader) as it:
            yield from it

    disk = build_disk_cache(node.path, digest, elements(), serializer=node.serializer, max_bytes=node.max_bytes,
                            process=process, timeout_s=node.timeout_s, storage_options=node.storage_options)
    return _Stage(disk, f"DiskCacheView({node.path!r})")


def _cache_part(stage: _Stage, index: int, count: int) -> ShardOptions | None:
    """Process ``index``'s contiguous part of the stage's stream, for a cache built by a pod.

    Parts are whole blocks of the stream, so their concatenation is the one-process
    stream. With a Filter before a Batch, batches depend on what came before them:
    process 0 then builds the whole cache and the others wait for it.
    """
    if count == 1:
        return None
    total = len(stage.source) * (stage.epochs or 1)
    if stage.batch is not None and stage.lost is not None:
        return ShardOptions(index, count, block_size=max(1, total))
    step = stage.batch.batch_size if stage.batch is not None else 1
    block = -(-total // count)
    block = max(step, -(-block // step) * step)
    return ShardOptions(index, count, block_size=block)


def _build(nodes: Sequence[N.Node], ctx: _Context) -> tuple[_Stage, ShardOptions | None, PackFront | None,
                                                            RebatchFront | None]:
    stage = _start(nodes[0], ctx)
    shard: ShardOptions | None = None
    front: PackFront | None = None
    rebatch: RebatchFront | None = None
    for node in nodes[1:]:
        if isinstance(node, N.Shard):
            if shard is not None:
                raise ConfigError(f"shard at step {node.at}: the dataset is already sharded")
            shard = node.options
            continue
        if isinstance(node, N.Prefetch):
            continue
        if front is not None:
            _after_pack(front, node)
            continue
        if rebatch is not None:
            rebatch.add(node)
            continue
        if isinstance(node, N.BatchNode) and stage.batch is not None and stage.lost is not None:
            # Batches of a filtered stream's batches: not random access, so they are
            # formed after the engine, from consecutive batches of its stream.
            rebatch = RebatchFront.of(node)
            continue
        if isinstance(node, N.Pack):
            if stage.batch is not None:
                raise ConfigError(f"pack at step {node.at} packs records, not batches: put pack before batch")
            index = len(ctx.stages)
            ctx.stages.append(f"stage {index}: {_stage_line(stage)}  [packed by windows of {node.window}]")
            processor = stage.processor()
            ctx.reseeded = ctx.reseeded or isinstance(processor.source, RepeatView)
            view = PackView(processor, node.seq_len, node.window, node.truncate)
            stage = _Stage(view, f"PackView(stage {index}, seq_len={node.seq_len})",
                           endless_source=stage.endless, lost=f"pack at step {node.at}")
            front = PackFront(node.seq_len)
            continue
        stage = _step(stage, node, ctx)
    return stage, shard, front, rebatch


def _after_pack(front: PackFront, node: N.Node) -> None:
    at = f"{node.describe()} at step {node.at}"
    if isinstance(node, N.BatchNode) and front.batch is None:
        if node.pad_to is not None:
            raise ConfigError(f"{at}: packed rows all have the same length; drop pad_to")
        front.batch = Batch(node.batch_size, node.drop_remainder)
        return
    if isinstance(node, (N.Map, N.MapBatch)) and front.batch is not None:
        front.batch_fns.extend(node.fns)
        return
    raise ConfigError(f"{at}: after pack, thresher supports batch() and then map()/map_batch() on the packed "
                      "batches; map, filter and random_map the records before pack")


def compile_chain(nodes: Sequence[N.Node], *, chain_digest: str, prefix_digest: Callable[[int], str] | None = None,
                  mix_segment: tuple[int, list[int]] | None = None) -> Compiled:
    """Compiles an (optimised) chain; ``chain_digest`` is the fingerprint of the chain as written.

    Example:
        >>> import thresher as th
        >>> from thresher.dataset.compile import compile_chain
        >>> ds = th.Dataset.range(8).shuffle(seed=1).batch(4)
        >>> c = compile_chain(ds.nodes, chain_digest=ds.fingerprint())
        >>> len(c.loader), c.stages
        (2, ['stage 0: RangeDataSource(0, 8, 1) -> shuffle(seed=1) -> Batch(4, drop_remainder=False)'])
    """
    prefetch = [n for n in nodes if isinstance(n, N.Prefetch)]
    worker_count = prefetch[-1].worker_count if prefetch else 0
    buffer = prefetch[-1].buffer if prefetch else None
    mode = prefetch[-1].worker_mode if prefetch else "process"
    timeout = prefetch[-1].worker_timeout_s if prefetch else DEFAULT_WORKER_TIMEOUT_S
    warm = prefetch[-1].warm_start if prefetch else False
    ctx = _Context(salt=0, prefix_digest=prefix_digest, worker_count=worker_count, buffer=buffer,
                   mix_segment=mix_segment, worker_mode=mode, worker_timeout_s=timeout, warm_start=warm)
    stage, shard, front, rebatch = _build(nodes, ctx)
    ctx.stages.append(f"stage {len(ctx.stages)}: {_stage_line(stage)}"
                      + (f" -> {front.batch!r}" if front is not None and front.batch is not None else "")
                      + "".join(f" -> map_batch({N.fn_name(f)})" for f in (front.batch_fns if front else []))
                      + (f" -> then {rebatch.describe()}" if rebatch is not None else ""))
    source, sampler = stage.engine(shard)
    if ctx.reseeded or isinstance(source, RepeatView):
        # The stream differs from what a thresher that reused the first epoch's draws
        # gave: a state saved by one must not restore into the other.
        chain_digest = f"{chain_digest}+reseed"
    loader = CompiledLoader(source, sampler, stage.operations(), chain_digest=chain_digest,
                            worker_count=worker_count, buffer=buffer, worker_mode=mode,
                            worker_timeout_s=timeout, warm_start=warm,
                            chunk_size=_PACK_CHUNK_WINDOWS if front is not None else None)
    in_order = stage.shuffle is None and (stage.epochs == 1 or stage.endless_source)
    mix = stage.source if isinstance(stage.source, MixView) and in_order else None
    endless = stage.endless
    return Compiled(loader, front, rebatch, mix, endless, stage.lost, ctx.stages, tuple(nodes))

