"""DataLoader: source + sampler + operations -> deterministic, resumable batches."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any, Sequence

from thresher.errors import ConfigError
from thresher.loader.chunk import ChunkProcessor
from thresher.loader.iterator import DataLoaderIterator
from thresher.loader.producer import InProcessProducer, Producer
from thresher.loader.state import geometry_of, stream_identity
from thresher.samplers.index_sampler import IndexSampler
from thresher.transforms.operations import plan_operations

if TYPE_CHECKING:
    from thresher.loader.worker_main import WorkerSpec

__all__ = ["DataLoader"]

_MIN_CHUNK_RECORDS = 256


class DataLoader:
    """Reads, transforms and batches records; a pure function of (data, sampler, ops, seed).

    Args:
        data_source: a random-access source (``__len__``, ``__getitem__``; ``__getitems__``
            makes reads batched and much faster).
        sampler: an IndexSampler: the global stream and this process's shard of it.
        operations: callables (maps), MapTransform, RandomMapTransform,
            FilterTransform, and at most one Batch; operations after the Batch see
            whole batches.
        worker_count: processes that compute ahead; 0 computes in this process.
            Batches are identical for every value.
        chunk_size: positions computed in one piece (default: a multiple of the
            batch size of at least 256). It changes speed and memory, never results.
        worker_buffer_size: chunks each worker computes ahead of the training loop
            (default 2); memory use is about ``worker_count * worker_buffer_size``
            chunks. It changes speed and memory, never results.

    With ``worker_count > 0`` the source and the operations before the Batch are
    pickled with cloudpickle (lambdas and closures work) and run in worker processes
    (started with forkserver, or spawn; never a bare fork). Arrays come back through
    shared memory; when a Batch comes before any Filter the workers stack the
    batches themselves and the training loop gets them without a copy. Operations
    after the Batch run in this process. Keep the training loop of a script under
    ``if __name__ == "__main__":``, as with any multiprocessing code.

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
    """

    def __init__(
        self,
        data_source: Any,
        sampler: IndexSampler,
        operations: Sequence[Any] = (),
        *,
        worker_count: int = 0,
        chunk_size: int | None = None,
        worker_buffer_size: int = 2,
    ) -> None:
        if not (hasattr(data_source, "__len__") and hasattr(data_source, "__getitem__")):
            raise ConfigError(f"data_source must have __len__ and __getitem__ (random access); got {data_source!r}")
        if not isinstance(sampler, IndexSampler):
            raise ConfigError(f"sampler must be a thresher.IndexSampler, got {sampler!r}")
        n = len(data_source)
        if sampler.num_records > n:
            raise ConfigError(f"the sampler has num_records={sampler.num_records} but the source {data_source!r} "
                              f"has only {n} records")
        if isinstance(worker_count, bool) or not isinstance(worker_count, int) or worker_count < 0:
            raise ConfigError(f"worker_count must be an int >= 0, got {worker_count!r}")
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
        if isinstance(worker_buffer_size, bool) or not isinstance(worker_buffer_size, int) or worker_buffer_size < 1:
            raise ConfigError(f"worker_buffer_size must be an int >= 1, got {worker_buffer_size!r}")
        self.chunk_size = chunk_size
        self.worker_buffer_size = worker_buffer_size
        self._processor = ChunkProcessor(data_source, sampler, self.plan)
        self._worker_spec: WorkerSpec | None = None
        if worker_count > 0:
            from thresher.loader.workers import make_worker_spec, prestart

            self._worker_spec = make_worker_spec(self._processor, chunk_size)
            prestart()

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

    def _make_producer(self, position: int) -> Producer:
        stop = self.sampler.local_length
        if self.worker_count == 0:
            return InProcessProducer(self._processor, position, stop, self.chunk_size)
        from thresher.loader.workers import WorkerPoolProducer

        assert self._worker_spec is not None
        return WorkerPoolProducer(self._worker_spec, position, stop, self.chunk_size, self.worker_count,
                                  self.worker_buffer_size)

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
