"""DataLoader: source + sampler + operations -> deterministic, resumable batches."""

from __future__ import annotations

import logging
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, Sequence, Union

from thresher.errors import ConfigError
from thresher.loader.autotune import AutotuneReport, decide, memory_budget
from thresher.loader.chunk import ChunkProcessor
from thresher.loader.iterator import DataLoaderIterator
from thresher.loader.producer import InProcessProducer, MeasuringProducer, Producer
from thresher.loader.state import geometry_of, stream_identity
from thresher.loader.stats import BATCH, PACK, TRANSFER, WAIT_WORKERS, StatsRecorder, available_cpus
from thresher.samplers.index_sampler import IndexSampler
from thresher.transforms.operations import plan_operations

if TYPE_CHECKING:
    from thresher.loader.worker_main import WorkerSpec

__all__ = ["DataLoader"]

_MIN_CHUNK_RECORDS = 256
_log = logging.getLogger("thresher")

WorkerCount = Union[int, Literal["auto"]]


class DataLoader:
    """Reads, transforms and batches records; a pure function of (data, sampler, ops, seed).

    Args:
        data_source: a random-access source (``__len__``, ``__getitem__``; ``__getitems__``
            makes reads batched and much faster).
        sampler: an IndexSampler: the global stream and this process's shard of it.
        operations: callables (maps), MapTransform, RandomMapTransform,
            FilterTransform, and at most one Batch; operations after the Batch see
            whole batches.
        worker_count: processes that compute ahead; 0 computes in this process;
            ``"auto"`` measures the first chunk in this process and picks the count
            (and the read-ahead) from its time and size, the CPUs and the memory
            (see thresher.loader.autotune; the choice is ``autotune_report``).
            Batches are identical for every value.
        chunk_size: positions computed in one piece (default: a multiple of the
            batch size of at least 256). It changes speed and memory, never results.
        worker_buffer_size: chunks each worker computes ahead of the training loop;
            memory use is about ``worker_count * worker_buffer_size`` chunks. The
            default (None) is 2, fewer if the first chunk shows that would not fit a
            quarter of the available memory. It changes speed and memory, never results.

    With ``worker_count > 0`` the source and the operations before the Batch are
    pickled with cloudpickle (lambdas and closures work) and run in worker processes
    (started with forkserver, or spawn; never a bare fork). Arrays come back through
    shared memory; when a Batch comes before any Filter the workers stack the
    batches themselves and the training loop gets them without a copy. Operations
    after the Batch run in this process. Keep the training loop of a script under
    ``if __name__ == "__main__":``, as with any multiprocessing code.

    ``it.stats()`` on an iterator tells where the time goes and what to change;
    ``thresher.trace(path)`` records a timeline (docs/performance.md).

    When a Batch comes before any Filter and the shard options leave ``block_size``
    unset, shards are dealt in blocks of one batch: the P local batches of step t
    are then exactly global positions [t*P*b, (t+1)*P*b), the same global batches for
    any number of processes.

    Example:
        >>> import thresher as th
        >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 10),
        ...                        th.IndexSampler(10, shuffle=True, seed=0),
        ...                        [lambda x: x * 2, th.Batch(4, drop_remainder=True)])
        >>> [b.shape for b in loader]
        [(4,), (4,)]
        >>> with_workers = th.DataLoader(loader.data_source, loader.sampler,
        ...                              [lambda x: x * 2, th.Batch(4, drop_remainder=True)],
        ...                              worker_count=2)
        >>> [b.tolist() for b in with_workers] == [b.tolist() for b in loader]
        True
        >>> auto = th.DataLoader(loader.data_source, loader.sampler,
        ...                      [lambda x: x * 2, th.Batch(4, drop_remainder=True)], worker_count="auto")
        >>> [b.tolist() for b in auto] == [b.tolist() for b in loader]
        True
        >>> auto.autotune_report.worker_count   # 10 records: workers would not pay
        0
    """

    def __init__(
        self,
        data_source: Any,
        sampler: IndexSampler,
        operations: Sequence[Any] = (),
        *,
        worker_count: WorkerCount = 0,
        chunk_size: int | None = None,
        worker_buffer_size: int | None = None,
    ) -> None:
        if not (hasattr(data_source, "__len__") and hasattr(data_source, "__getitem__")):
            raise ConfigError(f"data_source must have __len__ and __getitem__ (random access); got {data_source!r}")
        if not isinstance(sampler, IndexSampler):
            raise ConfigError(f"sampler must be a thresher.IndexSampler, got {sampler!r}")
        n = len(data_source)
        if sampler.num_records > n:
            raise ConfigError(f"the sampler has num_records={sampler.num_records} but the source {data_source!r} "
                              f"has only {n} records")
        if worker_count != "auto" and (isinstance(worker_count, bool) or not isinstance(worker_count, int)
                                       or worker_count < 0):
            raise ConfigError(f"worker_count must be an int >= 0 or \"auto\", got {worker_count!r}")
        self.plan = plan_operations(operations)
        batch = self.plan.batch
        if sampler.shard_options.block_size is None:
            block = batch.batch_size if batch is not None and not self.plan.filter_before_batch else 1
            sampler = sampler.with_block_size(block)
        self.sampler = sampler
        self.data_source = data_source
        self.worker_count = worker_count
        if chunk_size is None:
            unit = batch.batch_size if batch is not None else 1
            chunk_size = unit * max(1, -(-_MIN_CHUNK_RECORDS // unit))
        elif isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ConfigError(f"chunk_size must be an int >= 1, got {chunk_size!r}")
        if worker_buffer_size is not None and (isinstance(worker_buffer_size, bool)
                                               or not isinstance(worker_buffer_size, int) or worker_buffer_size < 1):
            raise ConfigError(f"worker_buffer_size must be an int >= 1 or None, got {worker_buffer_size!r}")
        self.chunk_size = chunk_size
        self.worker_buffer_size = worker_buffer_size
        self._processor = ChunkProcessor(data_source, sampler, self.plan)
        self._worker_spec: WorkerSpec | None = None
        self._unusable: str | None = None  # why workers cannot run this pipeline ("auto" only)
        #: What ``worker_count="auto"`` chose (set by the first iterator), else None.
        self.autotune_report: AutotuneReport | None = None
        if worker_count != 0:
            from thresher.loader.warm_start import begin
            from thresher.loader.workers import make_worker_spec

            try:
                self._worker_spec = make_worker_spec(self._processor, chunk_size)
            except ConfigError as e:
                if worker_count != "auto":
                    raise
                self._unusable = str(e).split(". ")[0]
            if self._worker_spec is not None:
                begin()  # the fork server starts in the background (see warm_start)

    @cached_property
    def stream(self) -> dict[str, Any]:
        """What defines the global stream (the state's fingerprint covers exactly this)."""
        return stream_identity(self.sampler.stream_config(), self.plan.record_ops_digest(),
                               self.plan.descriptions)

    @cached_property
    def geometry(self) -> dict[str, Any]:
        """This process's part of the stream."""
        s = self.sampler
        batch = self.plan.batch
        # A Filter after the Batch drops whole batches on one process and not another, which
        # puts the processes' positions out of step just as a Filter before it does.
        filters = self.plan.filter_before_batch or any(op.kind == "filter" for op in self.plan.batch_ops)
        aligned = (batch is not None and not filters
                   and (s.block_size == batch.batch_size or s.shard_count == 1))
        return geometry_of(s.shard_index, s.shard_count, s.block_size,
                           batch.batch_size if batch is not None else None,
                           s.shard_options.drop_remainder, aligned)

    @cached_property
    def stage_order(self) -> tuple[str, ...]:
        """The names of the pipeline's stages, in order (the rows of ``it.stats()``)."""
        p = self._processor
        return (*p.stages, BATCH, PACK, WAIT_WORKERS, TRANSFER, *p.batch_stages)

    def _make_producer(self, position: int, stats: StatsRecorder | None = None) -> Producer:
        stop = self.sampler.local_length
        if self.worker_count != "auto":
            return self._producer(self.worker_count, self.worker_buffer_size, position, stop, stats)
        report = self.autotune_report
        if report is not None:
            return self._producer(report.worker_count, report.worker_buffer_size, position, stop, stats)

        def choose(chunk_s: float, chunk_bytes: int, records: int, left: int | None, at: int) -> Producer:
            report = decide(chunk_s, chunk_bytes, records, left, available_cpus(), memory_budget(), self._unusable)
            if self.worker_buffer_size is not None:
                report = replace(report, worker_buffer_size=self.worker_buffer_size)
            self.autotune_report = report
            _log.info("%s", report)
            return self._producer(report.worker_count, report.worker_buffer_size, at, stop, stats)

        if stats is not None:
            stats.worker_count = 0
        return MeasuringProducer(self._processor, position, stop, self.chunk_size, stats, choose)

    def _producer(self, workers: int, buffer: int | None, position: int, stop: int | None,
                  stats: StatsRecorder | None) -> Producer:
        if stats is not None:
            stats.worker_count = workers
            stats.notes = [str(self.autotune_report)] if self.autotune_report is not None else []
        if workers == 0:
            return InProcessProducer(self._processor, position, stop, self.chunk_size, stats)
        from thresher.loader.warm_start import WarmStartProducer, is_ready
        from thresher.loader.workers import WorkerPoolProducer

        spec = self._worker_spec
        assert spec is not None

        def pool(at: int) -> Producer:
            return WorkerPoolProducer(spec, at, stop, self.chunk_size, workers, buffer, stats)

        if is_ready():
            return pool(position)
        # The first batches come from this process while the fork server starts: same batches.
        return WarmStartProducer(self._processor, position, stop, self.chunk_size, stats, pool)

    def __iter__(self) -> DataLoaderIterator:
        return DataLoaderIterator(self)

    def __len__(self) -> int:
        """The number of batches (elements without a Batch) of a finite stream without filters."""
        n = self.sampler.local_length
        if n is None:
            raise TypeError("this DataLoader repeats forever (num_epochs=None): it has no len()")
        if self.plan.filter_before_batch or any(op.kind == "filter" for op in self.plan.batch_ops):
            raise TypeError("a DataLoader with a Filter has no len(): the number of batches depends on the data")
        batch = self.plan.batch
        if batch is None:
            return n
        return n // batch.batch_size if batch.drop_remainder else -(-n // batch.batch_size)

    def __repr__(self) -> str:
        return (f"DataLoader({self.data_source!r}, {self.sampler!r}, {list(self.plan.descriptions)}, "
                f"worker_count={self.worker_count})")
