"""Steps that say where the stream runs or is kept: shard, prefetch (workers), cache.

Example:
    >>> import thresher as th
    >>> list(th.Dataset.range(6).shard(th.ShardOptions(1, 2)))
    [1, 3, 5]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from thresher.dataset.cache import MemoryCacheView
from thresher.dataset.cache_files import build_disk_cache, pod_process
from thresher.dataset.nodes.base import Node
from thresher.dataset.repeat import RepeatView
from thresher.dataset.stage import PREFETCH_DEFAULTS, AfterEngine, CompileContext, Stage, close_stage
from thresher.errors import ConfigError
from thresher.loader.data_loader import DataLoader
from thresher.loader.options import DEFAULT_WORKER_TIMEOUT_S, LoaderOptions
from thresher.samplers.sharding import ShardOptions

__all__ = ["Cache", "Prefetch", "Shard"]


@dataclass(frozen=True)
class Shard(Node):
    options: ShardOptions | None = None

    def describe(self) -> str:
        o = self.options
        assert o is not None
        return f"shard({o.shard_index}/{o.shard_count}, drop_remainder={o.drop_remainder})"

    places: ClassVar[bool] = True

    def compile(self, stage: Stage, ctx: CompileContext) -> Stage:
        if ctx.shard is not None:
            raise ConfigError(f"shard at step {self.at}: the dataset is already sharded")
        ctx.shard = self.options
        return stage

    def after_engine(self, front: AfterEngine) -> None:
        raise AssertionError("a shard is compiled, even after the engine")  # pragma: no cover


@dataclass(frozen=True)
class Prefetch(Node):
    """The workers of the whole chain: ``Dataset.prefetch``'s options as one ``LoaderOptions``,
    handed whole to the chain's DataLoaders (the last prefetch of a chain wins)."""

    options: LoaderOptions = field(default_factory=lambda: PREFETCH_DEFAULTS)

    @property
    def worker_count(self) -> int:
        count = self.options.worker_count
        assert isinstance(count, int)  # Dataset.prefetch takes a number
        return count

    @property
    def buffer(self) -> int | None:
        return self.options.worker_buffer_size

    @property
    def worker_mode(self) -> str:
        return str(self.options.worker_mode)

    @property
    def worker_timeout_s(self) -> float | None:
        return self.options.worker_timeout_s

    @property
    def warm_start(self) -> bool:
        return self.options.warm_start

    def describe(self) -> str:
        mode = f", worker_mode={self.worker_mode!r}" if self.worker_mode != "process" else ""
        if self.worker_timeout_s != DEFAULT_WORKER_TIMEOUT_S:
            mode += f", worker_timeout_s={self.worker_timeout_s!r}"
        if self.warm_start:
            mode += ", warm_start=True"
        return f"prefetch(worker_count={self.worker_count}, buffer={self.buffer}{mode})"

    places: ClassVar[bool] = True

    def compile(self, stage: Stage, ctx: CompileContext) -> Stage:
        return stage  # compile_chain reads the last prefetch's workers before compiling


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

    def compile(self, stage: Stage, ctx: CompileContext) -> Stage:
        at = f"cache at step {self.at}"
        if stage.endless:
            raise ConfigError(f"{at}: cannot cache an endless dataset; cache before repeat()")
        if self.path is None:
            closed = close_stage(stage, ctx, f"{at} (in memory)")
            view = MemoryCacheView(closed.source, self.max_bytes, at)
            cached = Stage(view, f"MemoryCacheView({closed.label})")
            # After a filter the cached view has holes; they are removed after it.
            cached.record_ops, cached.steps, cached.lost = list(closed.record_ops), list(closed.steps), closed.lost
            return cached
        ctx.record_stage(stage, f"  [written once to {self.path}]")
        digest = ctx.prefix_digest(self.at) if ctx.prefix_digest is not None else "?"
        process = pod_process()

        def elements() -> Any:
            source, sampler = stage.engine(_cache_part(stage, *process))
            ctx.reseeded = ctx.reseeded or isinstance(source, RepeatView)
            loader = DataLoader.of(source, sampler, stage.operations(), ctx.options)
            with iter(loader) as it:
                yield from it

        disk = build_disk_cache(self.path, digest, elements(), serializer=self.serializer, max_bytes=self.max_bytes,
                                process=process, timeout_s=self.timeout_s, storage_options=self.storage_options)
        return Stage(disk, f"DiskCacheView({self.path!r})")


def _cache_part(stage: Stage, index: int, count: int) -> ShardOptions | None:
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
