"""Writing a prepared dataset directory on this machine, deterministically and atomically.

Each split is written in two passes with bounded memory: the examples are encoded and
appended to a spill file, then read back in a keyed pseudo-random order
(:class:`~thresher.samplers.Permutation`, key derived from the split name) and dealt
into ``num_shards`` contiguous shard files (shard i holds positions
``[round(N*i/S), round(N*(i+1)/S))``). The same input therefore gives the same bytes on
every machine, and records that were adjacent in the input are spread over the split.

Everything is written into a hidden directory beside the target
(``.{name}.thresher-tmp-{pid}@{host}.XXXX``); ``dataset_info.json`` is written last and the
directory is renamed into place at the very end. An exception or Ctrl-C removes the temporary
directory; a SIGKILL leaves it, and readers refuse it (IncompleteDatasetError), so no
state of an interrupted write is ever taken for a dataset. The next ``prepare`` of the same
target removes such leftovers once their process is gone (:mod:`thresher.sources.temp_files`).
Files and directories get the modes ``open()`` and ``mkdir`` would give (the umask applies).

Example (the shard bounds; ``thresher.prepare`` in :mod:`thresher.sources.write.prepare` is the entry point):
    >>> from thresher.sources.write.local import shard_bounds
    >>> shard_bounds(10, 10 * 1000, 3)
    [0, 3, 7, 10]
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import itertools
import math
import os
import shutil
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

import numpy as np

from thresher._validate import check_int, user_path
from thresher.errors import ConfigError, FeatureError
from thresher.features import RecordCodec, as_feature
from thresher.randomness.permutation import Permutation
from thresher.randomness.seeds import derive_seed
from thresher.sources.formats.array_record.source import ArrayRecordSource
from thresher.sources.formats.array_record.writer import ArrayRecordWriter
from thresher.sources.formats.prepared.info import DatasetInfo, SplitDict, SplitInfo
from thresher.sources.formats.prepared.keys import describe_key, key_bytes, sort_key
from thresher.sources.formats.prepared.layout import (
    DATASET_NAME_RE,
    INFO_FILE,
    OLD_MARK,
    PathLike,
    shard_filename,
)
from thresher.sources.remote.fs import is_url
from thresher.sources.temp_files import new_temp_dir, sweep_stale, writing
from thresher.splits import check_split_name

__all__ = ["TARGET_SHARD_BYTES", "PrepareArgs", "check_prepare_args", "commit_dataset", "dataset_info", "shard_bounds",
           "shuffle_key", "temp_dir", "write_splits"]

TARGET_SHARD_BYTES = 256 << 20
_DOMAIN_PREPARE = 0x50524550  # "PREP"
_READ_CHUNK = 4096


def shuffle_key(split: str) -> int:
    """The fixed 64-bit key of the on-disk order of ``split`` (same on every machine)."""
    digest = hashlib.blake2b(split.encode("utf-8"), digest_size=8).digest()
    return derive_seed(_DOMAIN_PREPARE, int.from_bytes(digest, "little"))


def shard_bounds(count: int, nbytes: int, num_shards: int | None) -> list[int]:
    """Where the shards of a split of ``count`` records (``nbytes`` of records) start and end.

    Example:
        >>> shard_bounds(10, 100, 3)
        [0, 3, 7, 10]
    """
    shards = num_shards or max(1, math.ceil(nbytes / TARGET_SHARD_BYTES))
    shards = max(1, min(shards, count))
    return [round(count * i / shards) for i in range(shards + 1)]


def _rows(columns: Mapping[str, Any], where: str) -> tuple[Iterator[Any], int]:
    """The rows of a (nested) dict of equal-length columns, and their number."""
    def length(v: Any, path: str) -> int:
        if isinstance(v, Mapping):
            sizes = {length(x, f"{path}/{k}") for k, x in v.items()}
            if len(sizes) > 1:
                raise FeatureError(f"{where}: columns of {path or 'the split'} have different "
                                   f"lengths {sorted(sizes)}")
            return sizes.pop() if sizes else 0
        return len(v)

    def row(v: Any, i: int) -> Any:
        return {k: row(x, i) for k, x in v.items()} if isinstance(v, Mapping) else v[i]

    n = length(columns, "")
    return (row(columns, i) for i in range(n)), n


def _progress(enabled: bool, total: int | None, desc: str) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, unit=" ex", leave=False, dynamic_ncols=True)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


class _SplitWriter:
    """Writes one split into the temporary directory."""

    def __init__(self, tmp: str, dataset: str, split: str, codec: RecordCodec,
                 num_shards: int | None, shuffle: bool, progress: bool,
                 keyed: bool = False) -> None:
        self.tmp, self.dataset, self.split = tmp, dataset, split
        self.codec, self.num_shards, self.shuffle, self.progress = (
            codec, num_shards, shuffle, progress)
        self.keyed = keyed
        self.sort_keys: list[bytes] = []

    def write(self, examples: Any) -> SplitInfo:
        spill = os.path.join(self.tmp, f".spill-{self.split}.array_record")
        count, nbytes = self._spill(examples, spill)
        bounds = shard_bounds(count, nbytes, self.num_shards)
        shards = len(bounds) - 1
        order = self._key_order() if self.keyed else None
        perm = Permutation(count, shuffle_key(self.split)) if self.shuffle and not self.keyed else None
        source = ArrayRecordSource(glob.escape(spill)) if count else None
        bar = _progress(self.progress, count, f"{self.dataset} {self.split}: shuffle+shard")
        lengths, size = [], 0
        for s in range(shards):
            path = os.path.join(self.tmp, shard_filename(self.dataset, self.split, s, shards))
            with ArrayRecordWriter(path) as w:
                for lo in range(bounds[s], bounds[s + 1], _READ_CHUNK):
                    positions = np.arange(lo, min(lo + _READ_CHUNK, bounds[s + 1]), dtype=np.uint64)
                    keys = (order[positions] if order is not None
                            else perm(positions) if perm is not None else positions)
                    assert source is not None
                    for rec in source.__getitems__(cast(Sequence[int], keys.astype(np.int64))):
                        w.write(rec)
                    if bar is not None:
                        bar.update(len(positions))
            lengths.append(bounds[s + 1] - bounds[s])
            size += os.path.getsize(path)
        if bar is not None:
            bar.close()
        if source is not None:
            source.close()
        os.remove(spill)
        return SplitInfo(self.split, tuple(lengths), size, self.dataset)

    def _spill(self, examples: Any, spill: str) -> tuple[int, int]:
        total: int | None
        if isinstance(examples, Mapping):
            if self.keyed:
                raise ConfigError(f"split {self.split!r}: keyed=True needs an iterable of (key, "
                                  "example) pairs, not a dict of columns")
            examples, total = _rows(examples, f"split {self.split!r}")
        else:
            total = len(examples) if hasattr(examples, "__len__") else None
        if not isinstance(examples, Iterable):
            raise ConfigError(f"split {self.split!r}: expected an iterable of examples or a "
                              f"dict of columns, got {type(examples).__name__}")
        bar = _progress(self.progress, total, f"{self.dataset} {self.split}: encode")
        count = nbytes = 0
        with ArrayRecordWriter(spill) as w:
            for i, example in enumerate(examples):
                where = f"example {i} of split {self.split!r}"
                if self.keyed:
                    example = self._key(example, where)
                rec = self.codec.encode(example, where=where)
                w.write(rec)
                count += 1
                nbytes += len(rec)
                if bar is not None:
                    bar.update(1)
        if bar is not None:
            bar.close()
        return count, nbytes


    def _key(self, pair: Any, where: str) -> Any:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ConfigError(f"{where}: keyed=True needs (key, example) pairs, got "
                              f"{type(pair).__name__}")
        kb = key_bytes(pair[0], where)
        self.sort_keys.append(sort_key(shuffle_key(self.split), kb, shuffle=self.shuffle))
        return pair[1]

    def _key_order(self) -> np.ndarray:
        """Spill positions in increasing sort-key order (keys.py); refuses duplicate keys."""
        sks = self.sort_keys
        order = sorted(range(len(sks)), key=sks.__getitem__)
        for a, b in itertools.pairwise(order):
            if sks[a] == sks[b]:
                raise ConfigError(f"split {self.split!r}: examples {a} and {b} have the same key "
                                  f"{describe_key(sks[a][8:] if self.shuffle else sks[a])}; keys "
                                  "must be unique within a split")
        self.sort_keys = []
        return np.asarray(order, dtype=np.int64)


def _dataset_name(path: str, name: str | None) -> str:
    if name is None:
        base = os.path.basename(os.path.normpath(path))
        name = "".join(c if c.isalnum() or c in "_.-" else "_" for c in base).lstrip("._-")
        name = name or "dataset"
    if not isinstance(name, str) or not DATASET_NAME_RE.fullmatch(name):
        raise ConfigError(f"invalid dataset name {name!r}: use letters, digits, '_', '.', '-' "
                          "(it is part of the shard file names)")
    return name


@dataclasses.dataclass(frozen=True)
class PrepareArgs:
    """The checked arguments of a ``prepare`` call (shared by the one-process and Beam paths)."""

    target: str
    dataset: str
    shard_counts: dict[str, int | None]
    codec: RecordCodec
    version: str
    description: str
    shuffle: bool


def check_prepare_args(path: PathLike, split_names: Sequence[str], features: Any,
                       num_shards: int | Mapping[str, int] | None, name: str | None,
                       version: str, description: str, shuffle: bool,
                       overwrite: bool) -> PrepareArgs:
    """Checks ``prepare``'s arguments; ConfigError names the one that is wrong."""
    text = user_path(path)
    target = text.rstrip("/") if is_url(text) else os.path.abspath(text)
    dataset = _dataset_name(target, name)
    if not split_names:
        raise ConfigError("splits must be a non-empty dict {split name: examples}")
    for split in split_names:
        check_split_name(split)
    if isinstance(num_shards, Mapping):
        unknown = set(num_shards) - set(split_names)
        if unknown:
            raise ConfigError(f"num_shards names unknown split(s) {sorted(unknown)}")
    shard_counts = {s: num_shards.get(s) if isinstance(num_shards, Mapping) else num_shards
                    for s in split_names}
    for s, n in shard_counts.items():
        check_int(n, f"num_shards for split {s!r}", minimum=1, optional=True)
    if not isinstance(version, str) or not version:
        raise ConfigError(f"version must be a non-empty string, got {version!r}")
    codec = RecordCodec(as_feature(features))
    if not is_url(target) and os.path.exists(target) and not overwrite:  # a URL: by its writer
        raise ConfigError(f"{target!r} already exists; pass overwrite=True (or --overwrite) "
                          "to replace it")
    return PrepareArgs(target, dataset, shard_counts, codec, version, description, bool(shuffle))


def temp_dir(target: str) -> str:
    """A new hidden working directory beside ``target`` (readers refuse it), after removing
    the stale ones that interrupted writes of ``target`` left."""
    sweep_stale(target)
    return new_temp_dir(target)


def dataset_info(args: PrepareArgs, infos: Sequence[SplitInfo]) -> DatasetInfo:
    """The DatasetInfo that a prepare with ``args`` writing splits ``infos`` commits."""
    return DatasetInfo(args.dataset, args.version, args.description, args.codec.features,
                       SplitDict(list(infos)), data_dir=None, shuffled=args.shuffle)


def commit_dataset(tmp: str, args: PrepareArgs, infos: Sequence[SplitInfo]) -> None:
    """Writes ``dataset_info.json`` last into ``tmp``, syncs, and renames ``tmp`` into place."""
    info_path = os.path.join(tmp, INFO_FILE)
    with writing(os.path.join(args.target, INFO_FILE)):
        with open(info_path, "w", encoding="utf-8") as f:
            f.write(dataset_info(args, infos).dumps())
        for entry in os.listdir(tmp):
            _fsync(os.path.join(tmp, entry))
        _fsync(tmp)
    parent = os.path.dirname(args.target)
    _commit(tmp, args.target, os.path.basename(args.target), parent)



def write_splits(args: PrepareArgs, splits: Mapping[str, Iterable[Any] | Mapping[str, Any]], *,
                 progress: bool, keyed: bool) -> DatasetInfo:
    """Writes checked ``args``' splits in this process and commits the directory (``prepare``'s local path)."""
    start = time.perf_counter()
    tmp = temp_dir(args.target)
    try:
        infos = [
            _SplitWriter(tmp, args.dataset, split, args.codec, args.shard_counts[split],
                         args.shuffle, progress, keyed).write(examples)
            for split, examples in splits.items()
        ]
        commit_dataset(tmp, args, infos)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    info = DatasetInfo.read(args.target)
    if progress:
        _summary(info, time.perf_counter() - start)
    return info

def _commit(tmp: str, target: str, base: str, parent: str) -> None:
    old = None
    if os.path.exists(target):
        old = new_temp_dir(target, OLD_MARK)
        os.rmdir(old)
        os.rename(target, old)
    os.rename(tmp, target)
    _fsync(parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _summary(info: DatasetInfo, seconds: float) -> None:
    lines = [f"thresher: prepared {info.name} {info.version} in {seconds:.1f} s at "
             f"{info.data_dir}"]
    for s in info.splits.values():
        lines.append(f"  {s.name:<12} {s.num_examples:>12,} examples  {s.num_shards:>4} "
                     f"shard{'s' if s.num_shards != 1 else ' '}  {_human(s.num_bytes):>10}")
    print("\n".join(lines), file=sys.stderr)
