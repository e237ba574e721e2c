"""Preparing datasets on Apache Beam: the same directory, byte for byte, as ``thresher.prepare``.

``WriteDataset`` is a PTransform for a user's own pipeline: its input is a PCollection of
``(key, example)`` pairs (or a dict ``{split: PCollection}``), and it writes a prepared
dataset directory that ``thresher.data_source`` reads. ``prepare(..., beam_runner=...)``
builds such a pipeline from in-memory examples. Keys (int, str or bytes, unique within a
split, as TFDS's ``_generate_examples`` yields them) fix the order of the records
(``thresher.sources.prepared.keys``), so the output is the same for every runner, worker
count and arrival order, and equal to ``prepare(..., keyed=True)`` in one process.

The pipeline, per split (nothing ever holds a whole split; one shuffle of the records)::

    Encode     (key, example) -> (sort key, record)               one example at a time
    Bucket     bucket of the sort key (``sources.prepared.plan``)  one record at a time
    Plan       records and bytes per bucket (a side input)        65,536 counters
    Route      to the shard(s) the record's bucket overlaps       one record at a time
    WriteShard group by shard, sort, write its ArrayRecord file    one shard (+ edge buckets)
    Commit     dataset_info.json last, then one rename             once, at the end

With ``shuffle=False`` the buckets are cut at approximate quantiles of the sort keys (one
more pass over the keys, 4,097 of them kept). ``WriteShard`` reports what it held as Beam
metrics (namespace ``thresher.beam``: ``held_records``, ``held_bytes``, ``shard_records``).

Files are written into a hidden temporary directory beside the target, which readers
refuse; the final rename makes the dataset appear whole or not at all. A pipeline that
fails leaves at most that temporary directory (``prepare`` removes it). The target must be
on a filesystem that every worker and the launching process see.

Example:
    >>> import os, tempfile
    >>> import apache_beam as beam
    >>> import thresher as th, thresher.beam
    >>> path = os.path.join(tempfile.mkdtemp(), "squares")
    >>> with beam.Pipeline("DirectRunner") as p:
    ...     _ = (p | beam.Create([(i, {"x": i * i}) for i in range(10)])
    ...            | th.beam.WriteDataset(path, features={"x": th.features.Scalar("int64")},
    ...                                   split="train", num_shards=2))
    >>> sorted(int(e["x"]) for e in th.data_source(path, split="train"))[:4]
    [0, 1, 4, 9]
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

try:
    import apache_beam as beam
except ImportError as e:  # pragma: no cover - the extra is part of the test environment
    raise ImportError("thresher.beam needs Apache Beam: pip install 'thresher[beam]'") from e

from thresher import errors
from thresher.errors import ConfigError, ThresherError
from thresher.features import RecordCodec
from thresher.sources.array_record_writer import ArrayRecordWriter
from thresher.sources.prepared.info import DatasetInfo, SplitInfo
from thresher.sources.prepared.keys import key_bytes, sort_key
from thresher.sources.prepared.layout import PathLike, shard_filename
from thresher.sources.prepared.plan import EDGES, NUM_BUCKETS, Plan, Routed, edge_bucket, hash_bucket
from thresher.sources.prepared.writer import (
    PrepareArgs,
    check_prepare_args,
    commit_dataset,
    shuffle_key,
    temp_dir,
)

__all__ = ["METRICS", "WriteDataset", "prepare_on_beam"]

_WORKER_ERROR = re.compile(r"thresher\.errors\.(\w+): (.*?)(?: \[while running [^\]]*\])?$",
                           re.MULTILINE)
METRICS = "thresher.beam"  # namespace of the metrics that WriteShard reports (see _WriteShard)


class _Encode(beam.DoFn):
    def __init__(self, codec: RecordCodec, split: str, shuffle: bool) -> None:
        self.codec, self.split, self.shuffle = codec, split, shuffle
        self.key = shuffle_key(split)

    def process(self, pair: Any) -> Iterator[tuple[bytes, bytes]]:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ConfigError(f"split {self.split!r}: WriteDataset needs (key, example) pairs, "
                              f"got {type(pair).__name__}")
        where = f"example with key {pair[0]!r:.80} of split {self.split!r}"
        kb = key_bytes(pair[0], where)
        yield sort_key(self.key, kb, shuffle=self.shuffle), self.codec.encode(pair[1], where)


def _by_hash(kv: tuple[bytes, bytes]) -> Routed:
    return hash_bucket(kv[0]), kv[0], kv[1]


def _by_edges(kv: tuple[bytes, bytes], edges: Sequence[bytes]) -> Routed:
    return edge_bucket(edges, kv[0]), kv[0], kv[1]


class _Count(beam.CombineFn):
    """Records per bucket and bytes of a split: a fixed-size array, whatever the split's size."""

    def __init__(self, num_shards: int | None) -> None:
        self.num_shards = num_shards

    def create_accumulator(self) -> list[Any]:
        return [np.zeros(NUM_BUCKETS, np.int64), 0]

    def add_input(self, acc: list[Any], routed: Routed) -> list[Any]:
        acc[0][routed[0]] += 1
        acc[1] += len(routed[2])
        return acc

    def merge_accumulators(self, accs: Iterable[list[Any]]) -> list[Any]:
        out = self.create_accumulator()
        for counts, nbytes in accs:
            out[0] += counts
            out[1] += nbytes
        return out

    def extract_output(self, acc: list[Any]) -> Plan:
        return Plan(acc[0], acc[1], self.num_shards)


def _route(routed: Routed, plan: Plan) -> Iterator[tuple[int, Routed]]:
    """Sends a record to every shard its bucket overlaps (two at most, unless shards are tiny)."""
    for shard in plan.shards_of(routed[0]):
        yield shard, routed


class _WriteShard(beam.DoFn):
    """Writes one shard's ArrayRecord file from what was routed to it (one shard in memory).

    Reports, in namespace ``METRICS``, the distributions ``held_records`` and ``held_bytes``
    (what one call holds: the shard plus the parts of its edge buckets) and ``shard_records``.
    """

    def __init__(self, tmp: str, dataset: str, split: str, shuffle: bool) -> None:
        self.tmp, self.dataset, self.split, self.shuffle = tmp, dataset, split, shuffle
        self.held = beam.metrics.Metrics.distribution(METRICS, "held_records")
        self.held_bytes = beam.metrics.Metrics.distribution(METRICS, "held_bytes")
        self.written = beam.metrics.Metrics.distribution(METRICS, "shard_records")

    def process(self, item: tuple[int, Iterable[Routed]], plan: Plan) -> Iterator[tuple[int, int, int]]:
        shard, routed = item
        held = list(routed)
        self.held.update(len(held))
        self.held_bytes.update(sum(len(r[2]) for r in held))
        result = _write(self.tmp, self.dataset, self.split, shard, plan.num_shards,
                        (r for _, r in plan.place(shard, held, self.split, self.shuffle)))
        self.written.update(result[1])
        yield result


def _write(tmp: str, dataset: str, split: str, shard: int, shards: int,
           records: Iterable[bytes]) -> tuple[int, int, int]:
    path = os.path.join(tmp, shard_filename(dataset, split, shard, shards))
    with ArrayRecordWriter(path) as w:
        for r in records:
            w.write(r)
        n = w.count
    return shard, n, os.path.getsize(path)


def _split_info(written: list[tuple[int, int, int]], plan: Plan, tmp: str, dataset: str,
                split: str) -> SplitInfo:
    shards = plan.num_shards
    done = {s: (n, size) for s, n, size in written}
    for s in range(shards):  # an empty split still has its one (empty) shard file
        if s not in done:
            _, n, size = _write(tmp, dataset, split, s, shards, ())
            done[s] = (n, size)
    lengths = tuple(done[s][0] for s in range(shards))
    return SplitInfo(split, lengths, sum(size for _, size in done.values()), dataset)


def _commit(infos: list[tuple[int, SplitInfo]], tmp: str, args: PrepareArgs) -> str:
    commit_dataset(tmp, args, [info for _, info in sorted(infos, key=lambda x: x[0])])
    return args.target


class WriteDataset(beam.PTransform):
    """Writes ``(key, example)`` pairs as a prepared dataset directory at ``path``.

    Args:
        path: the directory to create; the same arguments as ``thresher.prepare`` follow
            (``features``, ``num_shards``, ``name``, ``version``, ``description``,
            ``shuffle``, ``overwrite``).
        split: the split name when the input is one PCollection; with a dict
            ``{split: PCollection}`` every split is written.

    The output is a PCollection holding the dataset's path once it is committed.
    """

    def __init__(self, path: PathLike, *, features: Any, split: str = "train",
                 num_shards: int | Mapping[str, int] | None = None,
                 name: str | None = None, version: str = "1.0.0", description: str = "",
                 shuffle: bool = True, overwrite: bool = False) -> None:
        super().__init__()
        self.path, self.features, self.split = path, features, split
        self.num_shards, self.name, self.version = num_shards, name, version
        self.description, self.shuffle, self.overwrite = description, shuffle, overwrite
        self.args: PrepareArgs | None = None
        self.tmp: str | None = None

    def expand(self, pcolls: Any) -> Any:
        inputs = dict(pcolls) if isinstance(pcolls, Mapping) else {self.split: pcolls}
        args = self.args or check_prepare_args(
            self.path, list(inputs), self.features, self.num_shards, self.name, self.version,
            self.description, self.shuffle, self.overwrite)
        self.args, self.tmp = args, temp_dir(args.target)
        tmp = self.tmp
        infos = []
        for i, (split, pcoll) in enumerate(inputs.items()):
            n = args.shard_counts[split]
            encoded = pcoll | f"{split}/Encode" >> beam.ParDo(_Encode(args.codec, split, args.shuffle))
            if args.shuffle:
                bucketed = encoded | f"{split}/Bucket" >> beam.Map(_by_hash)
            else:  # keys' own order: buckets between quantiles of the sort keys
                edges = beam.pvalue.AsSingleton(
                    encoded | f"{split}/SortKeys" >> beam.Map(lambda kv: kv[0])
                    | f"{split}/Edges" >> beam.ApproximateQuantiles.Globally(EDGES))
                bucketed = encoded | f"{split}/Bucket" >> beam.Map(_by_edges, edges)
            plan = beam.pvalue.AsSingleton(bucketed | f"{split}/Plan" >> beam.CombineGlobally(_Count(n)))
            written = (
                bucketed
                | f"{split}/Route" >> beam.FlatMap(_route, plan)
                | f"{split}/GroupShard" >> beam.GroupByKey()
                | f"{split}/WriteShard" >> beam.ParDo(_WriteShard(tmp, args.dataset, split, args.shuffle), plan)
                | f"{split}/Written" >> beam.combiners.ToList())
            infos.append(written | f"{split}/Info" >> beam.Map(
                lambda w, plan, i=i, split=split: (i, _split_info(w, plan, tmp, args.dataset, split)), plan))
        return (infos | "AllSplits" >> beam.Flatten() | "Gather" >> beam.combiners.ToList()
                | "Commit" >> beam.Map(_commit, tmp, args))


SPOOL_BYTES = 16 << 20  # examples per spool file, in pickled bytes


def prepare_on_beam(args: PrepareArgs, splits: Mapping[str, Any], runner: str,
                    options: Mapping[str, Any]) -> DatasetInfo:
    """``thresher.prepare(..., beam_runner=runner)``: runs WriteDataset on the given splits.

    The examples of each split are ``(key, example)`` pairs, from a list or a generator.
    They are streamed, one at a time, into files of about 16 MiB in a hidden directory
    beside the target (workers read those files in parallel; it is removed at the end),
    so neither the launching process nor the pipeline's graph holds a split.
    """
    from apache_beam.options.pipeline_options import PipelineOptions

    for split, examples in splits.items():
        if isinstance(examples, Mapping):
            raise ConfigError(f"split {split!r}: Beam needs (key, example) pairs, not a dict "
                              "of columns")
    transform = WriteDataset(args.target, features=args.codec.features)
    transform.args = args
    spool = temp_dir(args.target)
    try:
        files = {split: _spool(examples, os.path.join(spool, f"{i:05d}"), split)
                 for i, (split, examples) in enumerate(splits.items())}
        with beam.Pipeline(runner=runner, options=PipelineOptions(flags=[], **options)) as p:
            pcolls = {split: p | f"{split}/Files" >> beam.Create(paths)
                      | f"{split}/Read" >> beam.FlatMap(_read_spool)
                      for split, paths in files.items()}
            _ = pcolls | transform
    except BaseException as e:
        if transform.tmp is not None:
            shutil.rmtree(transform.tmp, ignore_errors=True)
        if isinstance(e, Exception) and not isinstance(e, ThresherError):
            raise _worker_error(e) from e
        raise
    finally:
        shutil.rmtree(spool, ignore_errors=True)
    return DatasetInfo.read(args.target)


def _spool(examples: Iterable[Any], prefix: str, split: str) -> list[str]:
    """Pickles ``examples`` one by one into files ``prefix-NNNNN`` of about SPOOL_BYTES each."""
    paths: list[str] = []
    f = None
    try:
        for pair in examples:
            if f is None or f.tell() >= SPOOL_BYTES:
                if f is not None:
                    f.close()
                paths.append(f"{prefix}-{len(paths):05d}")
                f = open(paths[-1], "wb")  # noqa: SIM115 - closed when full or at the end
            try:
                pickle.dump(pair, f, protocol=pickle.HIGHEST_PROTOCOL)
            except (pickle.PicklingError, TypeError, AttributeError) as e:
                key = pair[0] if isinstance(pair, (tuple, list)) and pair else pair
                raise ConfigError(f"split {split!r}: the example with key {key!r:.80} cannot be "
                                  f"pickled for the Beam workers ({e}); use plain data (numpy "
                                  "arrays, numbers, str, bytes, lists, dicts)") from e
    finally:
        if f is not None:
            f.close()
    return paths


def _read_spool(path: str) -> Iterator[Any]:
    with open(path, "rb") as f:
        while True:
            try:
                yield pickle.load(f)
            except EOFError:
                return


def _worker_error(e: Exception) -> Exception:
    """The thresher error a worker raised, out of the runner's wrapped error (else ``e``)."""
    found = _WORKER_ERROR.findall(str(e))
    if not found:
        return e
    name, message = found[-1]
    cls = getattr(errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, ThresherError)):
        return e
    return cls(f"on a Beam worker: {message.strip()}")
