"""``thresher.beam``'s file exchange: records go from encoders to shard writers through spill files.

Per split (``WriteDataset(..., exchange="files")``, the default)::

    EncodeToRuns  (key, example) -> sorted runs of records, written as files   one run (RUN_BYTES)
    Index         a run's keys file -> its records and byte offsets per bucket  one run's keys
    Plan          records and bytes per bucket (a side input)                   65,536 counters
    Ranges        a run (indexed again) -> (shard, byte range of its buckets)   one run's index
    GroupRanges   the byte ranges of each shard (metadata only)                 a few per run
    WriteShard    reads its ranges, sorts, writes its ArrayRecord file          one shard (+ edge buckets)

The runner carries runs' paths and byte ranges of them, never records, so its memory
(and a local runner's habit of handing a worker a stage's whole input at once) does not
grow with the records' bytes. Runs live under the spill directory (``thresher.beam``
removes it before the commit; ``sources.prepared.spill`` has the file format).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from thresher.sources.remote.fs import join
from thresher.sources.write.beam.shards import METRICS, Count, Encoder, WriteShard, bucket_function
from thresher.sources.write.plan import EDGES, Plan, Routed
from thresher.sources.write.spill import Run, RunIndex, index_run, read_range, write_run

__all__ = ["through_files"]

_OVERHEAD = 128  # Python objects per buffered record, in bytes (counted against RUN_BYTES)
Range = tuple[str, int, int, int]  # (run path, start byte, end byte, records)


class _EncodeToRuns(beam.DoFn):
    """Encodes examples and writes them as runs of at most ``run_bytes``; outputs the ``Run``s
    (and, to the ``keys`` output, every sort key when the buckets are cut at quantiles).
    Reports the distribution ``run_records`` (records per run) in namespace ``METRICS``."""

    def __init__(self, encode: Encoder, spill: str, prefix: str, run_bytes: int,
                 storage_options: Mapping[str, Any] | None, emit_keys: bool) -> None:
        self.encode, self.spill, self.prefix, self.run_bytes = encode, spill, prefix, run_bytes
        self.storage_options, self.emit_keys = storage_options, emit_keys
        self.buf: list[tuple[bytes, bytes]] = []
        self.size = 0
        self.run_records = beam.metrics.Metrics.distribution(METRICS, "run_records")

    def start_bundle(self) -> None:
        self.buf, self.size = [], 0

    def process(self, pair: Any) -> Iterator[Any]:
        sk, rec = self.encode(pair)
        self.buf.append((sk, rec))
        self.size += len(sk) + len(rec) + _OVERHEAD
        if self.emit_keys:
            yield beam.pvalue.TaggedOutput("keys", sk)
        if self.size >= self.run_bytes:
            yield self._flush()

    def finish_bundle(self) -> Iterator[Any]:
        if self.buf:
            yield GlobalWindows.windowed_value(self._flush())

    def _flush(self) -> Run:
        path = join(self.spill, f"{self.prefix}-{uuid.uuid4().hex}")
        run = write_run(path, self.buf, self.storage_options)
        self.run_records.update(run.count)
        self.buf, self.size = [], 0
        return run


class _CountRuns(Count):
    """``Count`` over run indexes: adds each run's records per bucket."""

    def add_input(self, acc: list[Any], idx: RunIndex) -> list[Any]:  # type: ignore[override]
        acc[0][idx.buckets] += idx.counts
        acc[1] += idx.run.nbytes
        return acc


def _ranges(idx: RunIndex, plan: Plan) -> Iterator[tuple[int, Range]]:
    """For each shard that a run's buckets overlap: the run's byte range of those buckets
    (one contiguous range, since a run is sorted and a shard's buckets are contiguous)."""
    span: dict[int, tuple[int, int]] = {}
    for i, b in enumerate(idx.buckets.tolist()):
        for shard in plan.shards_of(b):
            span[shard] = (span.get(shard, (i, i))[0], i)
    for shard, (i, j) in sorted(span.items()):
        yield shard, (idx.run.path, int(idx.offsets[i]), int(idx.offsets[j + 1]),
                      int(idx.counts[i:j + 1].sum()))


class _WriteShardFromRuns(WriteShard):
    """``WriteShard`` whose grouped values are byte ranges of runs, read here."""


    def gather(self, values: Iterable[Range], edges: Sequence[bytes] | None) -> list[Routed]:
        bucket = bucket_function(edges)
        held: list[Routed] = []
        for path, start, end, count in sorted(values):
            held.extend((bucket(sk), sk, rec) for sk, rec in
                        read_range(path, start, end, count, self.storage_options))
        return held


def _index(run: Run, edges: Sequence[bytes] | None = None,
           storage_options: Mapping[str, Any] | None = None) -> RunIndex:
    return index_run(run, bucket_function(edges), storage_options)


def through_files(pcoll: Any, label: str, encode: Encoder, num_shards: int | None, spill: str,
                  prefix: str, run_bytes: int, storage_options: Mapping[str, Any] | None,
                  writer: tuple[str, str]) -> tuple[Any, Any]:
    """Adds one split's steps to the pipeline; returns (written shards, plan side input).

    ``writer`` is (temporary dataset directory, dataset name).
    """
    tmp, dataset = writer
    so = storage_options
    outs = pcoll | f"{label}/EncodeToRuns" >> beam.ParDo(
        _EncodeToRuns(encode, spill, prefix, run_bytes, so, emit_keys=not encode.shuffle)
    ).with_outputs("keys", main="runs")
    side: list[Any] = []
    if not encode.shuffle:  # keys' own order: buckets between quantiles of the sort keys
        side = [beam.pvalue.AsSingleton(outs.keys | f"{label}/Edges" >> beam.ApproximateQuantiles.Globally(EDGES))]
    # Index runs in the stage that counts them (the combine is lifted: only its fixed-size
    # accumulators leave the stage); Ranges indexes them again instead of receiving the
    # indexes through the runner, so that what the runner holds is a few numbers per run.
    plan = beam.pvalue.AsSingleton(
        outs.runs
        | f"{label}/Index" >> beam.Map(lambda run, *edges: _index(run, edges[0] if edges else None, so), *side)
        | f"{label}/Plan" >> beam.CombineGlobally(_CountRuns(num_shards)))
    written = (
        outs.runs
        | f"{label}/Ranges" >> beam.FlatMap(
            lambda run, plan, *edges: _ranges(_index(run, edges[0] if edges else None, so), plan), plan, *side)
        | f"{label}/GroupRanges" >> beam.GroupByKey()
        | f"{label}/WriteShard" >> beam.ParDo(
            _WriteShardFromRuns(tmp, dataset, encode.split, encode.shuffle, so), plan, *side))
    return written, plan
