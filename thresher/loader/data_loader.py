"""DataLoader: source + sampler + operations -> deterministic, resumable batches."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any

from thresher._validate import user_path
from thresher.errors import ConfigError, ConfigTypeError
from thresher.loader.autotune import AutotuneReport
from thresher.loader.bad_records import MaxSkipped, check_policy
from thresher.loader.chunk import ChunkProcessor
from thresher.loader.engine import Engine
from thresher.loader.exclusions import Exclusions, RecordKeys, record_blocklist
from thresher.loader.iterator import DataLoaderIterator
from thresher.loader.main_module import guard_error, unimportable_main
from thresher.loader.options import DEFAULT_WORKER_TIMEOUT_S, LoaderOptions, OptionAttributes, WorkerCount, WorkerMode
from thresher.loader.pool.worker_main import WorkerSpec
from thresher.loader.pool.worker_start import make_worker_spec
from thresher.loader.profiling.stats import BATCH, PACK, TRANSFER, WAIT_WORKERS
from thresher.loader.state import geometry_of, stream_identity
from thresher.loader.state_types import Geometry, LoaderState, StreamId
from thresher.loader.warm_start import start_early
from thresher.samplers.index_sampler import IndexSampler
from thresher.sources.protocol import check_source
from thresher.transforms.operations import plan_operations

__all__ = ["DataLoader"]


class DataLoader(OptionAttributes):
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
        worker_mode: ``"process"`` (the default with a number of workers) runs the
            workers as processes; ``"thread"`` as threads of this process: nothing is
            pickled or sent through shared memory, which pays for work that releases
            the GIL (JPEG decode, array_record reads, NumPy) and on free-threaded
            Python, and lets operations that cannot be pickled run ahead. With
            ``worker_count="auto"`` and no worker_mode the mode is measured too (see
            docs/performance.md, "Threads or processes"). Batches are identical for
            every mode.
        chunk_size: positions computed in one piece (default: a multiple of the
            batch size of at least 256). It changes speed and memory, never results.
        worker_buffer_size: chunks each worker computes ahead of the training loop;
            memory use is about ``worker_count * worker_buffer_size`` chunks. The
            default (None) is 2, fewer if the first chunk shows that would not fit a
            quarter of the available memory. It changes speed and memory, never results.
        worker_timeout_s: the watchdog: seconds a worker may keep one chunk before the
            loader raises ``WorkerStuckError`` (naming the worker, the chunk's positions and
            keys, with the worker's Python stack) and stops the workers. Worker threads
            too: a stuck thread cannot be stopped and is left behind (docs/workers.md,
            "Stuck threads"). Default 300; None waits forever. Per chunk, not per epoch: a slow pipeline that keeps
            delivering never trips it. Reads on threads have their own limit,
            ``ReadOptions.timeout_s``.
        read_options: reads in flight in each producer (a ``thresher.ReadOptions``, or
            Grain's ``ReadOptions``): for storage where each read waits (network
            filesystems, buckets, databases). Default: what the source suggests; with
            ``worker_count="auto"``, chosen from the measured reads. It changes speed,
            never results (docs/latency_bound_storage.md).
        warm_start: opt-in (default False): with worker processes, each iterator
            computes its first chunks in this process while its workers start (the
            fork server, then the workers loading the pipeline); the same batches. It
            gives up isolation for those chunks: their operations run in the training
            process, so a crash there (a segfault, an ``os._exit``) ends the training
            process (a hang is caught: those chunks run on a helper thread under
            ``worker_timeout_s``). By default every chunk is computed in a worker, and
            the fork server is started when the DataLoader is constructed, so the
            workers of the first iterator start in milliseconds (docs/workers.md).
        errors: ``"raise"`` (default) stops at the first record whose read or per-record
            operation raises; ``"skip"`` drops it, deterministically, logs and counts it
            (``it.skipped_records``, ``it.stats().skipped_records``; see
            thresher.loader.bad_records). Element counts then depend on the data, as
            with a Filter before the Batch.
        max_skipped: with ``errors="skip"``, raise once more records than this were
            dropped: a count, or a fraction of the positions read (None: no limit).
        skip_records: record keys never delivered (a blocklist), or the path of a text
            file of keys (one per line). They are left out before reading; where no
            Filter comes before the Batch, the batch of their step is formed from the
            step's other elements and every other batch is unchanged. Kept in the state
            (see ``DataLoaderIterator.set_state`` and docs/forensics.md).
        ledger: a directory where every iterator appends one line per step to
            ``process-<i>.ledger``, for ``thresher audit`` (see ``DataLoaderIterator.ledger``).

    With ``worker_count > 0`` the source and the operations before the Batch are
    pickled with cloudpickle (lambdas and closures work) and run in worker processes
    (started with forkserver, or spawn; never a bare fork). Arrays come back through
    shared memory; when a Batch comes before any Filter the workers stack the
    batches themselves and the training loop gets them without a copy. Operations
    after the Batch run in this process. Keep the training loop of a script under
    ``if __name__ == "__main__":``, as with any multiprocessing code.

    ``it.stats()`` on an iterator tells where the time goes and what to change;
    ``thresher.trace(path)`` records a timeline (see ``thresher.loader.profiling``).

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
        worker_mode: WorkerMode | None = None,
        chunk_size: int | None = None,
        worker_buffer_size: int | None = None,
        worker_timeout_s: float | None = DEFAULT_WORKER_TIMEOUT_S,
        read_options: Any = None,
        warm_start: bool = False,
        errors: str = "raise",
        max_skipped: MaxSkipped = None,
        skip_records: RecordKeys | None = None,
        ledger: str | os.PathLike[str] | None = None,
    ) -> None:
        options = LoaderOptions(worker_count, chunk_size, worker_buffer_size, worker_mode, worker_timeout_s,
                                read_options, warm_start)
        self._init(data_source, sampler, operations, options, errors=errors, max_skipped=max_skipped,
                   skip_records=skip_records, ledger=ledger)

    def _init(self, data_source: Any, sampler: IndexSampler, operations: Sequence[Any], options: LoaderOptions, *,
              errors: str = "raise", max_skipped: MaxSkipped = None, skip_records: RecordKeys | None = None,
              ledger: str | os.PathLike[str] | None = None) -> None:
        """The constructor, from the options as one object (what ``Dataset`` chains build loaders with)."""
        check_source(data_source)
        sampler = _check_sampler(sampler, IndexSampler)
        n = len(data_source)
        if sampler.num_records > n:
            raise ConfigError(f"the sampler has num_records={sampler.num_records} but the source {data_source!r} "
                              f"has only {n} records")
        check_policy(errors, max_skipped)
        self.errors = errors
        self.plan = plan_operations(operations)
        if errors == "skip":
            self.plan = replace(self.plan, drops_records=True)
        batch = self.plan.batch
        if sampler.shard_options.block_size is None:
            block = batch.batch_size if batch is not None and not self.plan.filter_before_batch else 1
            sampler = sampler.with_block_size(block)
        self.sampler = sampler
        self.data_source = data_source
        #: How this loader computes (never what): workers, chunking, reads in flight, the watchdog, warm
        #: start; ``chunk_size`` resolved. The Engine runs by it.
        self.options = options = options.resolved(batch.batch_size if batch is not None else None)
        options.read_options.threads_for(data_source)  # a source's bad declaration is an error now
        blocked = None if skip_records is None else Exclusions(record_blocklist(skip_records, n))
        self._processor = ChunkProcessor(data_source, sampler, self.plan, skip_errors=errors == "skip",
                                         max_skipped=max_skipped, exclusions=blocked)
        #: The delivery ledger's directory (thresher.loader.ledger), or None.
        self.ledger = None if ledger is None else user_path(ledger)
        self._worker_spec: WorkerSpec | None = None
        self._unusable: str | None = None  # why workers cannot run this pipeline ("auto" only)
        #: What ``worker_count="auto"`` chose (set by the first iterator), else None.
        self.autotune_report: AutotuneReport | None = None
        worker_count = options.worker_count
        if worker_count != 0 and self.worker_mode != "thread":  # the fork server starts with the first workers
            try:
                self._worker_spec = make_worker_spec(self._processor, self.chunk_size)
            except ConfigError as e:
                if worker_count != "auto":
                    raise
                self._unusable = str(e).split(". ")[0]
            if worker_count == "auto" and self._unusable is None and unimportable_main() is not None:
                self._unusable = "the main module was read from standard input: workers cannot import it"
            if worker_count == "auto" and self._unusable is None and guard_error() is not None:
                self._unusable = 'the script has no `if __name__ == "__main__":` guard: workers would run it again'
            if self._unusable is None and isinstance(worker_count, int):
                # While the user builds the model: the first iterator's workers then start in milliseconds.
                start_early()

    @classmethod
    def of(cls, data_source: Any, sampler: IndexSampler, operations: Sequence[Any], options: LoaderOptions,
           **kwargs: Any) -> DataLoader:
        """A DataLoader from its options as one ``LoaderOptions`` (``kwargs``: ``errors``, ``max_skipped``,
        ``skip_records``, ``ledger``).

        Example:
            >>> import thresher as th
            >>> from thresher.loader.options import LoaderOptions
            >>> loader = th.DataLoader.of(th.sources.RangeDataSource(0, 4), th.IndexSampler(4), [th.Batch(2)],
            ...                           LoaderOptions(worker_count=0))
            >>> [b.tolist() for b in loader], loader.chunk_size
            ([[0, 1], [2, 3]], 256)
        """
        loader = cls.__new__(cls)
        DataLoader._init(loader, data_source, sampler, operations, options, **kwargs)
        return loader

    @cached_property
    def engine(self) -> Engine:
        """What the iterators run: the processor, the options, workers, stream and geometry."""
        return Engine(self._processor, self.options, self.stream_id, self.state_geometry, self.stage_order,
                      self._worker_spec, self._unusable, self.ledger)

    def _decided(self, report: AutotuneReport) -> None:
        self.autotune_report = report

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
        filters = self.plan.filter_before_batch or self.plan.filters_batches
        aligned = (batch is not None and not filters
                   and (s.block_size == batch.batch_size or s.shard_count == 1))
        return geometry_of(s.shard_index, s.shard_count, s.block_size,
                           batch.batch_size if batch is not None else None,
                           s.shard_options.drop_remainder, aligned)

    @cached_property
    def stream_id(self) -> StreamId:
        """``stream``, typed."""
        return StreamId.from_json(self.stream)

    @cached_property
    def state_geometry(self) -> Geometry:
        """``geometry``, typed (its position arithmetic is the sampler's)."""
        return Geometry.from_json(self.geometry)

    def state_at(self, position: int) -> LoaderState:
        """The state of an iterator of this loader whose next batch starts at ``position``."""
        return self.engine.state_at(position)

    def resume_position(self, state: LoaderState, *, allow_approximate: bool = False) -> int:
        """Checks a parsed state against this loader; the position to resume at.

        Raises IncompatibleStateError or GeometryError (see ``thresher.loader.state.restore_position``).
        """
        return self.engine.resume_position(state, allow_approximate=allow_approximate)

    @cached_property
    def stage_order(self) -> tuple[str, ...]:
        """The names of the pipeline's stages, in order (the rows of ``it.stats()``)."""
        p = self._processor
        return (*p.stages, BATCH, PACK, WAIT_WORKERS, TRANSFER, *p.batch_stages)

    def __iter__(self) -> DataLoaderIterator:
        return self.iterator_at(0)

    def iterator_at(self, position: int) -> DataLoaderIterator:
        """An iterator whose first batch starts at ``position`` (a checked state's position)."""
        return DataLoaderIterator(self.engine, position, decision=self.autotune_report, decided=self._decided)

    def __len__(self) -> int:
        """The number of batches (elements without a Batch) of a finite stream without filters."""
        n = self.sampler.local_length
        if n is None:
            raise TypeError("this DataLoader repeats forever (num_epochs=None): it has no len()")
        if self.plan.filter_before_batch or self.plan.filters_batches:
            raise TypeError("a DataLoader with a Filter (or errors='skip') has no len(): the number of batches "
                            "depends on the data")
        batch = self.plan.batch
        if batch is None:
            return n
        return n // batch.batch_size if batch.drop_remainder else -(-n // batch.batch_size)

    def __repr__(self) -> str:
        return (f"DataLoader({self.data_source!r}, {self.sampler!r}, {list(self.plan.descriptions)}, "
                f"worker_count={self.worker_count}, worker_mode={self.worker_mode!r})")


def _check_sampler(sampler: Any, sampler_class: type) -> Any:
    """Returns ``sampler`` if it is a thresher IndexSampler; otherwise says what to pass."""
    if isinstance(sampler, sampler_class):
        return sampler
    grain_hint = ""
    if type(sampler).__name__ in ("IndexSampler", "SequentialSampler"):
        where = f"{type(sampler).__module__}.{type(sampler).__qualname__}"
        grain_hint = (f" ({where} is another library's sampler: use "
                      f"thresher.grain.{type(sampler).__name__} with the same arguments, or thresher.IndexSampler)")
    raise ConfigTypeError(f"sampler must be a thresher.IndexSampler, got {sampler!r}{grain_hint}")
