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
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from thresher.dataset import nodes as N
from thresher.dataset.mix import MixView
from thresher.dataset.nodes.sources import component_view
from thresher.dataset.rebatch import RebatchFront
from thresher.dataset.repeat import RepeatView
from thresher.dataset.stage import PREFETCH_DEFAULTS, CompileContext, PackFront, Stage, stage_line
from thresher.errors import ConfigError
from thresher.loader.data_loader import DataLoader
from thresher.loader.options import LoaderOptions
from thresher.loader.state import stream_identity
from thresher.samplers.index_sampler import IndexSampler

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
                 options: LoaderOptions = PREFETCH_DEFAULTS) -> None:
        self.chain_digest = chain_digest
        self._init(source, sampler, operations, options)

    @cached_property
    def stream(self) -> dict[str, Any]:
        return stream_identity(self.sampler.stream_config(), self.chain_digest, self.plan.descriptions)


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


def _build(nodes: Sequence[N.Node], ctx: CompileContext) -> Stage:
    """Compiles ``nodes`` into their last stage; the shard and what runs after the engine go to ``ctx``."""
    first = nodes[0]
    if not isinstance(first, N.SourceNode):
        raise ConfigError(f"a Dataset chain must start with a source, got {first.describe()}")
    stage = first.start(ctx)
    for node in nodes[1:]:
        if node.places:
            stage = node.compile(stage, ctx)
        elif ctx.after is not None:
            node.after_engine(ctx.after)
        elif isinstance(node, N.BatchNode) and stage.batch is not None and stage.lost is not None:
            # Batches of a filtered stream's batches: not random access, so they are
            # formed after the engine, from consecutive batches of its stream.
            ctx.after = RebatchFront.of(node.batch_size, node.drop_remainder, node.pad_to, node.where)
        else:
            stage = node.compile(stage, ctx)
    return stage


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
    options = prefetch[-1].options if prefetch else PREFETCH_DEFAULTS
    ctx = CompileContext(salt=0, prefix_digest=prefix_digest, options=options, mix_segment=mix_segment, build=_build)
    stage = _build(nodes, ctx)
    shard = ctx.shard
    front = ctx.after if isinstance(ctx.after, PackFront) else None
    rebatch = ctx.after if isinstance(ctx.after, RebatchFront) else None
    ctx.stages.append(f"stage {len(ctx.stages)}: {stage_line(stage)}"
                      + (f" -> {front.batch!r}" if front is not None and front.batch is not None else "")
                      + "".join(f" -> map_batch({N.fn_name(f)})" for f in (front.batch_fns if front else []))
                      + (f" -> then {rebatch.describe()}" if rebatch is not None else ""))
    source, sampler = stage.engine(shard)
    if ctx.reseeded or isinstance(source, RepeatView):
        # The stream differs from what a thresher that reused the first epoch's draws
        # gave: a state saved by one must not restore into the other.
        chain_digest = f"{chain_digest}+reseed"
    if front is not None:
        options = replace(options, chunk_size=_PACK_CHUNK_WINDOWS)
    loader = CompiledLoader(source, sampler, stage.operations(), chain_digest=chain_digest, options=options)
    in_order = stage.shuffle is None and (stage.epochs == 1 or stage.endless_source)
    mix = stage.source if isinstance(stage.source, MixView) and in_order else None
    endless = stage.endless
    return Compiled(loader, front, rebatch, mix, endless, stage.lost, ctx.stages, tuple(nodes))

