"""Preparing datasets on Apache Beam: the same directory, byte for byte, as ``thresher.prepare``.

``WriteDataset`` is a PTransform for a user's own pipeline: its input is a PCollection of
``(key, example)`` pairs (or a dict ``{split: PCollection}``), and it writes a prepared
dataset directory that ``thresher.data_source`` reads. ``prepare(..., beam_runner=...)``
builds such a pipeline from in-memory examples. Keys (int, str or bytes, unique within a
split, as TFDS's ``_generate_examples`` yields them) fix the order of the records
(``thresher.sources.formats.prepared.keys``), so the output is the same for every runner, worker
count and arrival order, and equal to ``prepare(..., keyed=True)`` in one process.

The pipeline, per split (nothing ever holds a whole split; records are exchanged once)::

    Encode     (key, example) -> (sort key, record)               one example at a time
    Bucket     bucket of the sort key (``sources.prepared.plan``)  one record at a time
    Plan       records and bytes per bucket (a side input)        65,536 counters
    Exchange   each record to the shard(s) its bucket overlaps
    WriteShard sort one shard, write its ArrayRecord file          one shard (+ edge buckets)
    Commit     dataset_info.json last, then one rename             once, at the end

The exchange goes through spill files by default (``exchange="files"``,
``thresher.sources.write.beam.files``: encoders write sorted runs, the runner's shuffle carries only
byte ranges of them) or through the runner's shuffle (``exchange="runner"``: a GroupByKey
of the records). With ``shuffle=False`` the buckets are cut at approximate quantiles of the
sort keys (one more pass over the keys, 4,097 of them kept). ``WriteShard`` reports what
it held as Beam metrics (namespace ``thresher.beam``: ``held_records``, ``held_bytes``,
``shard_records``).

The target is a local directory (on a filesystem that every worker and the launching
process see) or a URL (``gs://``, ``s3://``, any fsspec URL, with ``storage_options``).
Locally, files are written into a hidden temporary directory beside the target, which
readers refuse; the final rename makes the dataset appear whole or not at all. For a URL
each shard writer uploads its shard to its final object name and the commit uploads
``dataset_info.json`` last; readers refuse the prefix until then (``thresher.sources.write.beam.target``,
which also says how a URL that already holds objects is treated). A pipeline that fails
leaves at most the temporary directory or the shards without ``dataset_info.json``, and
its spill files (``prepare`` removes them); a successful one removes the spill files
before the commit.

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

import pickle
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from thresher._optional import missing

try:
    import apache_beam as beam
except ModuleNotFoundError as e:
    raise missing(e, "thresher.beam") from e

from thresher import errors
from thresher._validate import check_int, user_path
from thresher.errors import ConfigError, ThresherError
from thresher.sources.formats.prepared.info import DatasetInfo, SplitInfo
from thresher.sources.formats.prepared.layout import PathLike
from thresher.sources.remote.fs import filesystem, is_url, join
from thresher.sources.write.beam.files import through_files
from thresher.sources.write.beam.shards import METRICS, Count, Encoder, WriteShard, split_info
from thresher.sources.write.beam.target import abandon, commit, open_target, temp_prefix
from thresher.sources.write.local import PrepareArgs, check_prepare_args, shuffle_key, temp_dir
from thresher.sources.write.plan import EDGES, Plan, Routed, edge_bucket, hash_bucket
from thresher.sources.write.spill import RUN_BYTES, remove_tree

__all__ = ["EXCHANGES", "METRICS", "WriteDataset", "prepare_on_beam"]

_WORKER_ERROR = re.compile(r"thresher\.errors\.(\w+): (.*?)(?: \[while running [^\]]*\])?$",
                           re.MULTILINE)


class _Encode(beam.DoFn):
    def __init__(self, encode: Encoder) -> None:
        self.encode = encode

    def process(self, pair: Any) -> Iterator[tuple[bytes, bytes]]:
        yield self.encode(pair)


def _by_hash(kv: tuple[bytes, bytes]) -> Routed:
    return hash_bucket(kv[0]), kv[0], kv[1]


def _by_edges(kv: tuple[bytes, bytes], edges: Sequence[bytes]) -> Routed:
    return edge_bucket(edges, kv[0]), kv[0], kv[1]


def _route(routed: Routed, plan: Plan) -> Iterator[tuple[int, Routed]]:
    """Sends a record to every shard its bucket overlaps (two at most, unless shards are tiny)."""
    for shard in plan.shards_of(routed[0]):
        yield shard, routed


def _through_runner(pcoll: Any, label: str, encode: Encoder, num_shards: int | None,
                    tmp: str, dataset: str, storage_options: Mapping[str, Any] | None) -> tuple[Any, Any]:
    """One split's steps with the records in the runner's shuffle; (written shards, plan)."""
    encoded = pcoll | f"{label}/Encode" >> beam.ParDo(_Encode(encode))
    if encode.shuffle:
        bucketed = encoded | f"{label}/Bucket" >> beam.Map(_by_hash)
    else:  # keys' own order: buckets between quantiles of the sort keys
        edges = beam.pvalue.AsSingleton(
            encoded | f"{label}/SortKeys" >> beam.Map(lambda kv: kv[0])
            | f"{label}/Edges" >> beam.ApproximateQuantiles.Globally(EDGES))
        bucketed = encoded | f"{label}/Bucket" >> beam.Map(_by_edges, edges)
    plan = beam.pvalue.AsSingleton(bucketed | f"{label}/Plan" >> beam.CombineGlobally(Count(num_shards)))
    written = (bucketed
               | f"{label}/Route" >> beam.FlatMap(_route, plan)
               | f"{label}/GroupShard" >> beam.GroupByKey()
               | f"{label}/WriteShard" >> beam.ParDo(
                   WriteShard(tmp, dataset, encode.split, encode.shuffle, storage_options), plan))
    return written, plan


def _commit(infos: list[tuple[int, SplitInfo]], tmp: str, args: PrepareArgs, spill: str,
            storage_options: Mapping[str, Any] | None) -> str:
    remove_tree(spill, storage_options)
    commit(tmp, args, [info for _, info in sorted(infos, key=lambda x: x[0])], storage_options)
    return args.target


EXCHANGES = ("files", "runner")


class WriteDataset(beam.PTransform):
    """Writes ``(key, example)`` pairs as a prepared dataset directory at ``path``.

    Args:
        path: the directory to create, or a URL (``gs://bucket/ds/1.0.0``; the workers
            upload the shards, ``dataset_info.json`` is uploaded last); the same
            arguments as ``thresher.prepare`` follow (``features``, ``num_shards``,
            ``name``, ``version``, ``description``, ``shuffle``, ``overwrite``).
        split: the split name when the input is one PCollection; with a dict
            ``{split: PCollection}`` every split is written.
        exchange: how records travel from the encoders to the shard writers:
            ``"files"`` (the default) through spill files, so that the runner's shuffle
            carries only paths and byte ranges; ``"runner"`` through the runner's own
            shuffle (GroupByKey), e.g. Dataflow's managed shuffle. The output is the same.
        spill_dir: where the spill files go with ``exchange="files"`` (a local path or an
            fsspec URL such as ``gs://bucket/tmp``; every worker must reach it). By
            default a folder in the hidden temporary directory (or prefix) beside ``path``.
            A uniquely named folder under it is removed before the commit.
        storage_options: fsspec options for a URL ``path`` and a ``spill_dir`` URL.
        run_bytes: the most record bytes an encoder buffers before it writes a sorted
            run (``exchange="files"``).

    The output is a PCollection holding the dataset's path once it is committed.
    """

    def __init__(self, path: PathLike, *, features: Any, split: str = "train",
                 num_shards: int | Mapping[str, int] | None = None,
                 name: str | None = None, version: str = "1.0.0", description: str = "",
                 shuffle: bool = True, overwrite: bool = False, exchange: str = "files",
                 spill_dir: str | None = None, storage_options: Mapping[str, Any] | None = None,
                 run_bytes: int = RUN_BYTES) -> None:
        super().__init__()
        if exchange not in EXCHANGES:
            raise ConfigError(f"WriteDataset(exchange={exchange!r}): use one of {list(EXCHANGES)}")
        check_int(run_bytes, "WriteDataset(run_bytes=)", minimum=1)
        self.path, self.features, self.split = path, features, split
        self.num_shards, self.name, self.version = num_shards, name, version
        self.description, self.shuffle, self.overwrite = description, shuffle, overwrite
        self.exchange, self.run_bytes = exchange, run_bytes
        self.spill_dir = None if spill_dir is None else user_path(spill_dir)
        self.storage_options = dict(storage_options) if storage_options else None
        self.args: PrepareArgs | None = None
        self.tmp: str | None = None
        self.spill: str | None = None

    def expand(self, pcolls: Any) -> Any:
        inputs = dict(pcolls) if isinstance(pcolls, Mapping) else {self.split: pcolls}
        args = self.args or check_prepare_args(
            self.path, list(inputs), self.features, self.num_shards, self.name, self.version,
            self.description, self.shuffle, self.overwrite)
        self.args, so = args, self.storage_options
        tmp, spill = self.tmp, self.spill = open_target(args.target, so, self.overwrite, self.spill_dir)
        infos = []
        for i, (split, pcoll) in enumerate(inputs.items()):
            n = args.shard_counts[split]
            encode = Encoder(args.codec, split, shuffle_key(split), args.shuffle)
            if self.exchange == "files":
                written, plan = through_files(pcoll, split, encode, n, spill, f"{i:05d}", self.run_bytes, so,
                                              (tmp, args.dataset))
            else:
                written, plan = _through_runner(pcoll, split, encode, n, tmp, args.dataset, so)
            infos.append(written | f"{split}/Written" >> beam.combiners.ToList() | f"{split}/Info" >> beam.Map(
                lambda w, plan, i=i, split=split: (i, split_info(w, plan, tmp, args.dataset, split, so)), plan))
        return (infos | "AllSplits" >> beam.Flatten() | "Gather" >> beam.combiners.ToList()
                | "Commit" >> beam.Map(_commit, tmp, args, spill, so))


SPOOL_BYTES = 16 << 20  # examples per spool file, in pickled bytes


def prepare_on_beam(args: PrepareArgs, splits: Mapping[str, Any], runner: str,
                    options: Mapping[str, Any], storage_options: Mapping[str, Any] | None = None,
                    overwrite: bool = False) -> DatasetInfo:
    """``thresher.prepare(..., beam_runner=runner)``: runs WriteDataset on the given splits.

    The examples of each split are ``(key, example)`` pairs, from a list or a generator.
    They are streamed, one at a time, into files of about 16 MiB in a hidden directory
    (or, for a URL target, prefix) beside the target; workers read those files in
    parallel, and they are removed at the end. Neither the launching process nor the
    pipeline's graph holds a split. A failed run removes what it wrote.
    """
    from apache_beam.options.pipeline_options import PipelineOptions

    for split, examples in splits.items():
        if isinstance(examples, Mapping):
            raise ConfigError(f"split {split!r}: Beam needs (key, example) pairs, not a dict "
                              "of columns")
    so = dict(storage_options) if storage_options else None
    transform = WriteDataset(args.target, features=args.codec.features, overwrite=overwrite,
                             storage_options=so)
    transform.args = args
    spool = temp_prefix(args.target) if is_url(args.target) else temp_dir(args.target)
    try:
        files = {split: _spool(examples, join(spool, f"{i:05d}"), split, so)
                 for i, (split, examples) in enumerate(splits.items())}
        with beam.Pipeline(runner=runner, options=PipelineOptions(flags=[], **options)) as p:
            pcolls = {split: p | f"{split}/Files" >> beam.Create(paths)
                      | f"{split}/Read" >> beam.FlatMap(_read_spool, so)
                      for split, paths in files.items()}
            _ = pcolls | transform
    except BaseException as e:
        abandon(transform.tmp, transform.spill, so)
        if isinstance(e, Exception) and not isinstance(e, ThresherError):
            raise _worker_error(e) from e
        raise
    finally:
        remove_tree(spool, so)
    return DatasetInfo.read(args.target, so)


def _open(path: str, mode: str, storage_options: Mapping[str, Any] | None) -> Any:
    if not is_url(path):
        return open(path, mode)
    fs, inner = filesystem(path, storage_options)
    return fs.open(inner, mode)


def _spool(examples: Iterable[Any], prefix: str, split: str,
           storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """Pickles ``examples`` one by one into files ``prefix-NNNNN`` of about SPOOL_BYTES each."""
    paths: list[str] = []
    f = None
    try:
        for pair in examples:
            if f is None or f.tell() >= SPOOL_BYTES:
                if f is not None:
                    f.close()
                paths.append(f"{prefix}-{len(paths):05d}")
                f = _open(paths[-1], "wb", storage_options)
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


def _read_spool(path: str, storage_options: Mapping[str, Any] | None = None) -> Iterator[Any]:
    with _open(path, "rb", storage_options) as f:
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
