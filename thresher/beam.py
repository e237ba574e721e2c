"""Preparing datasets on Apache Beam: the same directory, byte for byte, as ``thresher.prepare``.

``WriteDataset`` is a PTransform for a user's own pipeline: its input is a PCollection of
``(key, example)`` pairs (or a dict ``{split: PCollection}``), and it writes a prepared
dataset directory that ``thresher.data_source`` reads. ``prepare(..., beam_runner=...)``
builds such a pipeline from in-memory examples. Keys (int, str or bytes, unique within a
split, as TFDS's ``_generate_examples`` yields them) fix the order of the records
(``thresher.sources.prepared.keys``), so the output is the same for every runner, worker
count and arrival order, and equal to ``prepare(..., keyed=True)`` in one process.

The pipeline, per split (nothing ever holds a whole split)::

    Encode     (key, example) -> (sort key, record)               parallel, on workers
    Plan       records and bytes per bucket of sort keys          2**BUCKET_BITS counters
    Place      group by bucket, sort it, give each record its     one bucket in memory
               global position (plan's prefix sums) and shard
    WriteShard group by shard, write its ArrayRecord file          one shard in memory
    Commit     dataset_info.json last, then one rename             once, at the end

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

import bisect
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

try:
    import apache_beam as beam
except ImportError as e:  # pragma: no cover - the extra is part of the test environment
    raise ImportError("thresher.beam needs Apache Beam: pip install 'thresher[beam]'") from e

import itertools

from thresher import errors
from thresher.errors import ConfigError, ThresherError
from thresher.features import RecordCodec
from thresher.sources.array_record_writer import ArrayRecordWriter
from thresher.sources.prepared.info import DatasetInfo, SplitInfo
from thresher.sources.prepared.keys import bucket_of, describe_key, key_bytes, sort_key
from thresher.sources.prepared.layout import PathLike, shard_filename
from thresher.sources.prepared.writer import (
    PrepareArgs,
    check_prepare_args,
    commit_dataset,
    shard_bounds,
    shuffle_key,
    temp_dir,
)

__all__ = ["WriteDataset", "prepare_on_beam"]

_WORKER_ERROR = re.compile(r"thresher\.errors\.(\w+): (.*?)(?: \[while running [^\]]*\])?$",
                           re.MULTILINE)
Plan = Mapping[int, tuple[int, int]]  # bucket -> (records, bytes)


def _add(values: Iterable[tuple[int, int]]) -> tuple[int, int]:
    n = b = 0
    for x, y in values:
        n, b = n + x, b + y
    return n, b


def _totals(plan: Plan) -> tuple[int, int]:
    return _add(plan.values())


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


class _Place(beam.DoFn):
    """Sorts one bucket and gives each record its global position and shard."""

    def __init__(self, split: str, num_shards: int | None, shuffle: bool) -> None:
        self.split, self.num_shards, self.shuffle = split, num_shards, shuffle

    def process(self, item: tuple[int, Iterable[tuple[bytes, bytes]]],
                plan: Plan) -> Iterator[tuple[int, tuple[int, bytes]]]:
        bucket, values = item
        records = sorted(values, key=lambda kv: kv[0])
        for a, b in itertools.pairwise(records):
            if a[0] == b[0]:
                key = describe_key(a[0][8:] if self.shuffle else a[0])
                raise ConfigError(f"split {self.split!r}: two examples have the key {key}; "
                                  "keys must be unique within a split")
        count, nbytes = _totals(plan)
        bounds = shard_bounds(count, nbytes, self.num_shards)
        offset = sum(n for b, (n, _) in plan.items() if b < bucket)
        for i, (_, record) in enumerate(records):
            pos = offset + i
            yield bisect.bisect_right(bounds, pos) - 1, (pos, record)


class _WriteShard(beam.DoFn):
    def __init__(self, tmp: str, dataset: str, split: str, num_shards: int | None) -> None:
        self.tmp, self.dataset, self.split, self.num_shards = tmp, dataset, split, num_shards

    def process(self, item: tuple[int, Iterable[tuple[int, bytes]]],
                plan: Plan) -> Iterator[tuple[int, int, int]]:
        shard, values = item
        count, nbytes = _totals(plan)
        bounds = shard_bounds(count, nbytes, self.num_shards)
        records = sorted(values, key=lambda pr: pr[0])
        if [p for p, _ in records] != list(range(bounds[shard], bounds[shard + 1])):
            raise ConfigError(f"split {self.split!r}: shard {shard} got positions that do not "
                              f"make [{bounds[shard]}, {bounds[shard + 1]}) (a runner delivered "
                              "records twice or lost some)")
        yield _write(self.tmp, self.dataset, self.split, shard, len(bounds) - 1,
                     (r for _, r in records))


def _write(tmp: str, dataset: str, split: str, shard: int, shards: int,
           records: Iterable[bytes]) -> tuple[int, int, int]:
    path = os.path.join(tmp, shard_filename(dataset, split, shard, shards))
    with ArrayRecordWriter(path) as w:
        for r in records:
            w.write(r)
        n = w.count
    return shard, n, os.path.getsize(path)


def _split_info(written: list[tuple[int, int, int]], plan: Plan, tmp: str, dataset: str,
                split: str, num_shards: int | None) -> SplitInfo:
    count, nbytes = _totals(plan)
    shards = len(shard_bounds(count, nbytes, num_shards)) - 1
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
            plan = beam.pvalue.AsSingleton(
                encoded
                | f"{split}/Count" >> beam.Map(lambda kv: (bucket_of(kv[0]), (1, len(kv[1]))))
                | f"{split}/CountPerBucket" >> beam.CombinePerKey(_add)
                | f"{split}/Plan" >> beam.combiners.ToDict())
            written = (
                encoded
                | f"{split}/ByBucket" >> beam.Map(lambda kv: (bucket_of(kv[0]), kv))
                | f"{split}/GroupBucket" >> beam.GroupByKey()
                | f"{split}/Place" >> beam.ParDo(_Place(split, n, args.shuffle), plan)
                | f"{split}/GroupShard" >> beam.GroupByKey()
                | f"{split}/WriteShard" >> beam.ParDo(_WriteShard(tmp, args.dataset, split, n), plan)
                | f"{split}/Written" >> beam.combiners.ToList())
            infos.append(written | f"{split}/Info" >> beam.Map(
                lambda w, plan, i=i, split=split, n=n: (i, _split_info(w, plan, tmp, args.dataset,
                                                                       split, n)), plan))
        return (infos | "AllSplits" >> beam.Flatten() | "Gather" >> beam.combiners.ToList()
                | "Commit" >> beam.Map(_commit, tmp, args))


def prepare_on_beam(args: PrepareArgs, splits: Mapping[str, Any], runner: str,
                    options: Mapping[str, Any]) -> DatasetInfo:
    """``thresher.prepare(..., beam_runner=runner)``: runs WriteDataset on in-memory splits.

    The examples of each split are ``(key, example)`` pairs; they are handed to Beam with
    ``beam.Create`` (for inputs too big for the launching machine, read them with a Beam
    source in your own pipeline and apply WriteDataset).
    """
    from apache_beam.options.pipeline_options import PipelineOptions

    for split, examples in splits.items():
        if isinstance(examples, Mapping):
            raise ConfigError(f"split {split!r}: Beam needs (key, example) pairs, not a dict "
                              "of columns")
    transform = WriteDataset(args.target, features=args.codec.features)
    transform.args = args
    try:
        with beam.Pipeline(runner=runner, options=PipelineOptions(flags=[], **options)) as p:
            pcolls = {split: p | f"{split}/Create" >> beam.Create(list(examples))
                      for split, examples in splits.items()}
            _ = pcolls | transform
    except BaseException as e:
        if transform.tmp is not None:
            shutil.rmtree(transform.tmp, ignore_errors=True)
        if isinstance(e, Exception) and not isinstance(e, ThresherError):
            raise _worker_error(e) from e
        raise
    return DatasetInfo.read(args.target)


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
