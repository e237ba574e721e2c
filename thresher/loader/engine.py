"""The Engine: what an iterator needs from its DataLoader, as one immutable value.

A DataLoader checks the user's arguments and builds an Engine: the chunk processor
(the pure function of positions), the chunking, how workers run the pipeline, the
stream's identity and this process's geometry. Iterators depend on the Engine only;
it makes their producers (in this process, in worker processes or threads, or, for
``worker_count="auto"``, a measuring one whose measurement gives the decision).

Example:
    >>> import thresher as th
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 8), th.IndexSampler(8), [th.Batch(4)])
    >>> engine = loader.engine
    >>> engine.chunk_size, engine.state_at(4).to_json()["position"]
    (256, 4)
    >>> producer = engine.producer(0)
    >>> producer.next_chunk().elements
    [0, 1, 2, 3, 4, 5, 6, 7]
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from thresher.errors import GeometryError, InvalidStateError
from thresher.loader.autotune import (
    LATENCY_WORTH,
    MAX_AUTO_READS,
    WORKER_START_S,
    WORTH,
    AutotuneReport,
    Probe,
    choose_reads,
    decide,
    memory_budget,
)
from thresher.loader.chunk import ChunkProcessor
from thresher.loader.exclusions import Consumed, Exclusions
from thresher.loader.options import LoaderOptions, OptionAttributes
from thresher.loader.producers.base import Producer
from thresher.loader.producers.coalescing import CoalescingProducer
from thresher.loader.producers.in_process import InProcessProducer
from thresher.loader.producers.measuring import MeasuringProducer
from thresher.loader.profiling.stats import StatsRecorder, available_cpus
from thresher.loader.read_ahead import ReadAhead
from thresher.loader.read_options import ReadOptions
from thresher.loader.state import check_stream, resume_position
from thresher.loader.state_types import Geometry, LoaderState, StreamId
from thresher.loader.thread_probe import choose_mode

if TYPE_CHECKING:
    from thresher.loader.pool.worker_main import WorkerSpec

__all__ = ["Engine"]

_log = logging.getLogger("thresher")


@dataclass(frozen=True)
class Engine(OptionAttributes):
    """Makes producers for iterators; immutable, shared by all iterators of a DataLoader.

    Attributes:
        processor: reads and transforms a range of positions (a pure function).
        options: how it computes (``LoaderOptions``, ``chunk_size`` resolved): the workers
            (``worker_count``, ``"auto"`` included, ``worker_mode``, ``worker_buffer_size``,
            ``worker_timeout_s``: see thresher.loader.pool.watchdog), the reads in flight per
            producer (``read_options``; ``num_threads`` None: the source's suggestion, or with
            ``"auto"`` the measured choice) and ``warm_start``.
        stream, geometry: the state's stream identity and this process's geometry.
        stage_order: the stages' names, in order (the rows of ``it.stats()``).
        worker_spec: the pipeline pickled for workers, or None without workers.
        unusable: why worker processes cannot run this pipeline (``"auto"`` only), or None.
        ledger: the directory of the delivery ledger every iterator appends to (None: none).
    """

    processor: ChunkProcessor
    options: LoaderOptions
    stream: StreamId
    geometry: Geometry
    stage_order: tuple[str, ...]
    worker_spec: WorkerSpec | None = None
    unusable: str | None = None
    ledger: str | None = None

    # -- state ------------------------------------------------------------------------------
    def state_at(self, position: int) -> LoaderState:
        """The state of an iterator whose next batch starts at ``position``."""
        return LoaderState.at(
            position, self.stream, self.geometry, self.processor.plan.descriptions
        )

    def resume_position(self, state: LoaderState, *, allow_approximate: bool = False) -> int:
        """Checks a parsed state against this stream and geometry; the position to resume at.

        A position iteration could not have reached is refused (InvalidStateError): past
        the end of a finite stream, or, where batches are whole runs of positions (a
        Batch and no Filter before it), inside a batch.
        """
        consumed = state.extensions.consumed
        if consumed is not None and (consumed.merged or state.geometry != self.geometry):
            return self._resume_merged(state, consumed)
        state = self._finished_shard_as_steps(state)
        position = resume_position(
            state,
            self.stream,
            self.geometry,
            self.processor.plan.descriptions,
            allow_approximate=allow_approximate,
        )
        end = self.processor.sampler.local_length
        saved, b = state.geometry, state.geometry.batch_size
        if saved != self.geometry:  # converted from another geometry: the end of this shard at most
            return position if end is None else min(position, end)
        if end is not None and position > end:
            raise InvalidStateError(
                f"the state's position {state.position} (here {position}) is past the end of this "
                f"process's stream ({end} positions): it was not saved by this pipeline, or it was edited"
            )
        if (state.slowest is None and saved.aligned and b
                and position % b and position != end):
            raise InvalidStateError(
                f"the state's position {position} is inside a batch (batches of {b} positions "
                f"start at multiples of {b}): iteration never stops there, so the state was edited "
                "or comes from another pipeline"
            )
        return position

    def _finished_shard_as_steps(self, state: LoaderState) -> LoaderState:
        """A state saved at the very end of its shard's finite stream, for another geometry: as the
        position after the steps that shard made (its last block may be partial, so the position
        itself is not at a step boundary, but the steps are: the processes stepped together).
        """
        saved = state.geometry
        sampler = self.processor.sampler
        total = sampler.global_length
        if (saved == self.geometry or not saved.aligned or saved.shard_count == 1 or total is None
                or state.slowest is not None):
            return state
        b = saved.block_size
        end = saved.local_length(total, sampler.shard_options.drop_remainder)
        if state.position != end or end % b == 0:
            return state
        steps = end // b if saved.drop_remainder else -(-end // b)  # a dropped or a partial last batch
        return replace(state, position=steps * b, global_position=None)

    def _resume_merged(self, state: LoaderState, consumed: Consumed) -> int:
        """The position of this process in a restart from a state merged by ``merge_states``."""
        check_stream(state, self.stream, self.processor.plan.descriptions)
        if not consumed.merged:
            raise GeometryError(
                f"this state was saved by shard {state.geometry.shard_index} of {state.geometry.shard_count} "
                f"after a restart on another process count; this process is shard {self.geometry.shard_index} "
                f"of {self.geometry.shard_count}. Merge the states of all processes with "
                "thresher.merge_states(states) and restore the merged state on every process")
        position = self.geometry.first_at_or_after(consumed.watermark)
        end = self.processor.sampler.local_length
        return position if end is None else min(position, end)

    def with_exclusions(self, exclusions: Exclusions) -> Engine:
        """This engine, leaving out ``exclusions`` (blocked records, positions consumed elsewhere)."""
        if exclusions == (self.processor.exclusions or Exclusions()):
            return self
        processor = self.processor.with_exclusions(exclusions)
        spec = self.worker_spec
        if spec is not None:
            from thresher.loader.pool.worker_start import make_worker_spec

            spec = make_worker_spec(processor, self.chunk_size)
        return replace(self, processor=processor, worker_spec=spec)

    def first_keys(self, start: int, stop: int, count: int = 8) -> list[int]:
        """The record keys of the first ``count`` positions of [start, stop) (for error messages)."""
        sampler = self.processor.sampler
        positions = np.arange(start, min(stop, start + count), dtype=np.int64)
        keys, _ = sampler.record_keys(sampler.to_global(positions))
        return [int(k) for k in keys]

    # -- producers --------------------------------------------------------------------------
    def decide(self, probe: Probe) -> AutotuneReport:
        """What ``worker_count="auto"`` chooses for a first chunk measured as ``probe``.

        The worker mode, when not given: threads if ``probe.thread_speedup`` shows the
        work runs in parallel on threads, else processes (thresher.loader.thread_probe).
        """
        report, short = self._decide(probe)
        if self.worker_mode == "thread":
            return replace(report, worker_mode="thread", thread_speedup=probe.thread_speedup)
        if self.worker_mode == "auto":
            processes = self.unusable is None
            speedup = None if short and processes else probe.thread_speedup
            why = ("even the most reads in flight leave the CPU waiting: processes multiply them" if short
                   else "" if processes else "processes cannot run this pipeline")
            report = choose_mode(report, speedup, processes, why)
            if not processes:
                report = replace(report, reason=f"{report.reason}; worker processes cannot be used: {self.unusable}")
        return report

    def wants_thread_speedup(self, probe: Probe) -> bool:
        """Whether ``decide`` needs the thread speedup measured for ``probe`` (the mode is to be chosen)."""
        if self.worker_mode != "auto" or available_cpus() < 2:
            return False
        report, short = self._decide(probe)
        return report.worker_count > 0 and not (short and self.unusable is None)

    def _decide(self, probe: Probe) -> tuple[AutotuneReport, bool]:
        """The worker count and reads in flight, and whether reads call for more producers."""
        fixed, worth, short = self.options.read_options.num_threads, WORTH, False
        declared = getattr(self.processor.source, "suggested_reads_in_flight", None)
        if fixed is None and declared is not None:  # the source knows its storage: measuring cannot beat that
            threads, cost, why = declared, probe.chunk_s, f"the source suggests {declared} reads in flight"
        elif fixed is None:
            threads, cost, why = choose_reads(probe)
            if threads:  # latency-bound: threads wait; processes for heavy operations, or for more reads
                cpu_s = probe.ops_s + probe.read_cpu_s
                short = threads == MAX_AUTO_READS and cost > LATENCY_WORTH / 2 * cpu_s
                left = probe.chunks_left
                short = short and (left is None or left * cost > 2 * WORKER_START_S)  # else starting costs more
                cost, worth = (cost, WORTH) if short else (probe.ops_s, LATENCY_WORTH)
        else:
            threads, cost, why = fixed, probe.chunk_s, f"ReadOptions(num_threads={fixed})"
        unusable = self.unusable if self.worker_mode == "process" else None  # threads need no pickling
        report = decide(cost, probe.chunk_bytes, probe.chunk_records, probe.chunks_left, available_cpus(),
                        memory_budget(), unusable, worth)
        wait_s = probe.read_s * max(1, probe.read_threads) / max(1, probe.chunk_records)
        report = replace(report, chunk_s=probe.chunk_s, read_threads=threads, read_wait_s=wait_s,
                         reason=f"{why}; {report.reason}")
        if self.options.worker_buffer_size is not None:
            report = replace(report, worker_buffer_size=self.options.worker_buffer_size)
        return report, short

    def reads(self, threads: int | None = None) -> ReadOptions:
        """The read options of a producer: ``threads`` (else the option's or the source's) resolved."""
        opts = self.options.read_options
        return replace(opts, num_threads=opts.threads_for(self.processor.source) if threads is None else threads)

    def producer(self, position: int, stats: StatsRecorder | None = None, decision: AutotuneReport | None = None,
                 decided: Callable[[AutotuneReport], None] | None = None) -> Producer:
        """A producer of the chunks from ``position`` on.

        With ``worker_count="auto"`` and no earlier ``decision``, the first chunks are
        computed here and measured; the decision is passed to ``decided`` and the
        producer it picks takes over.
        """
        stop = self.processor.sampler.local_length
        if self.worker_count != "auto":
            return self._producer(self.worker_count, self.worker_mode, self.options.worker_buffer_size, position, stop,
                                  stats, None, self.reads())
        if decision is not None:
            return self._producer(decision.worker_count, decision.worker_mode, decision.worker_buffer_size,
                                  position, stop, stats, decision, self.reads(decision.read_threads))

        def choose(probe: Probe, at: int) -> Producer:
            report = self.decide(probe)
            _log.info("%s", report)
            if decided is not None:
                decided(report)
            return self._producer(report.worker_count, report.worker_mode, report.worker_buffer_size, at, stop,
                                  stats, report, self.reads(report.read_threads))

        if stats is not None:
            stats.worker_count = 0
        probe = self.reads()
        return MeasuringProducer(self.processor, position, stop, self.chunk_size, stats, choose,
                                 ReadAhead(self.processor, probe.num_threads or 0, probe.timeout_s),
                                 self.wants_thread_speedup, self.options.worker_timeout_s, self.first_keys)

    def _producer(self, workers: int, mode: str, buffer: int | None, position: int, stop: int | None,
                  stats: StatsRecorder | None, decision: AutotuneReport | None, reads: ReadOptions) -> Producer:
        if stats is not None:
            stats.worker_count = workers
            stats.worker_mode = mode
            stats.notes = [str(decision)] if decision is not None else []
        if workers == 0 and not reads.num_threads:
            # No read threads: cheap chunks are computed several at a time (the same chunks).
            return CoalescingProducer(self.processor, position, stop, self.chunk_size, stats)
        if workers == 0:
            return InProcessProducer(self.processor, position, stop, self.chunk_size, stats,
                                     ReadAhead(self.processor, reads.num_threads or 0, reads.timeout_s),
                                     reads.chunks_ahead(self.chunk_size))
        if mode == "thread":
            from thresher.loader.producers.threads import ThreadPoolProducer

            return ThreadPoolProducer(self.processor, position, stop, self.chunk_size, workers, buffer, stats,
                                      reads=reads, timeout_s=self.options.worker_timeout_s, keys=self.first_keys)
        # The pool's modules (sockets, shared memory) are loaded only by loaders with workers.
        from thresher.errors import WorkerError
        from thresher.loader.main_module import guard_error, unimportable_main
        from thresher.loader.producers.processes import WorkerPoolProducer
        from thresher.loader.producers.warm_start import WarmStartProducer

        spec = self.worker_spec
        assert spec is not None
        if multiprocessing.parent_process() is None and (why := guard_error()) is not None:
            raise WorkerError(why)  # before any worker starts: whatever the data size, the first next() says it

        def pool(at: int, deferred: bool = False) -> WorkerPoolProducer:
            return WorkerPoolProducer(spec, at, stop, self.chunk_size, workers, buffer, stats, reads=reads,
                                      timeout_s=self.options.worker_timeout_s, keys=self.first_keys, deferred=deferred)

        if (not self.options.warm_start or multiprocessing.parent_process() is not None
                or unimportable_main() is not None):
            # Where workers cannot start (a script's top level run again in a worker, a script
            # read from stdin) the pool's clear error comes now, not after a warm start.
            return pool(position)
        # Opted in: the first chunks come from this process while the workers start (the same batches).
        return WarmStartProducer(self.processor, position, stop, self.chunk_size, stats,
                                 lambda at: pool(at, deferred=True), timeout_s=self.options.worker_timeout_s)
