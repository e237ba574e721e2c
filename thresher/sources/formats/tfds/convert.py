"""``thresher convert``: a tfrecord TFDS dataset to ArrayRecord shards, without TensorFlow.

TFDS writes tfrecord shards by default; they can only be read in order. The converter
reads each shard's records (checking their CRCs, :mod:`thresher.sources.formats.tfds.tfrecord`)
and writes them unchanged, in the same order, to ``array_record`` shards named by the
same template, so every key and split string selects the same record as before.

- In place (no ``out``): the ArrayRecord shards are written beside the tfrecord ones and
  ``array_record`` is added to ``alternativeFileFormats`` in ``dataset_info.json`` (what
  TFDS itself does), which is replaced last, atomically: an interrupted conversion
  leaves the dataset as it was.
- With ``out``: a new TFDS directory with ``fileFormat: array_record`` is built in a
  temporary directory beside ``out`` and renamed to ``out`` when complete.

Example:
    >>> import os, tempfile
    >>> import thresher as th
    >>> from thresher.sources.formats.tfds.convert import convert
    >>> src = os.path.join(os.path.dirname(th.__file__), "..", "tests", "fixtures", "tfds",
    ...                    "data", "images_tfrecord")
    >>> out = convert(src, os.path.join(tempfile.mkdtemp(), "images"), progress=False)
    >>> len(th.data_source(out, split="train[:10%]"))
    5
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from thresher._validate import user_path
from thresher.errors import ConfigError, DatasetInfoError
from thresher.sources.formats.array_record.writer import ArrayRecordWriter
from thresher.sources.formats.tfds.info import INFO_FILE, TfdsInfo, TfdsSplitInfo, shard_filenames
from thresher.sources.formats.tfds.tfrecord import read_records
from thresher.sources.paths import inside
from thresher.sources.remote.fs import is_url
from thresher.sources.temp_files import new_temp_dir, new_temp_file, publish_mode, sweep_stale, writing

__all__ = ["convert"]


def _bar(enabled: bool, total: int, desc: str) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, unit=" rec", dynamic_ncols=True)


def _convert_split(info: TfdsInfo, split: TfdsSplitInfo, out_dir: str, bar: Any,
                   verify: bool) -> None:
    sources = shard_filenames(split.template, info.name, split.name, "tfrecord",
                              split.num_shards)
    targets = shard_filenames(split.template, info.name, split.name, "array_record",
                              split.num_shards)
    field = f"split {split.name!r} filepathTemplate {split.template!r}"
    for src, dst, want in zip(sources, targets, split.shard_lengths, strict=False):
        path = inside(info.data_dir, src, field, INFO_FILE)
        target = inside(out_dir, dst, field, INFO_FILE)
        if not os.path.isfile(path):
            raise DatasetInfoError(f"shard {path!r} listed in {INFO_FILE} does not exist: the "
                                   "dataset is incomplete; copy or regenerate it")
        count = 0
        with open(path, "rb") as f, ArrayRecordWriter(target, clean_stale=False) as w:
            for record in read_records(f, path, verify=verify):
                w.write(record)
                count += 1
                if bar is not None:
                    bar.update(1)
            if count != want:
                raise DatasetInfoError(f"shard {path!r} has {count} records but {INFO_FILE} "
                                       f"says {want}: it is truncated or from another dataset")


def _write_info(obj: dict[str, Any], directory: str) -> None:
    path = os.path.join(directory, INFO_FILE)
    tmp = new_temp_file(path)
    try:
        with writing(path):
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(obj, f, indent=2)
                f.write("\n")
            publish_mode(tmp)
            os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def convert(path: str, out: str | None = None, *, progress: bool = True,
            verify: bool = True) -> str:
    """Converts a tfrecord TFDS dataset (a version or dataset directory) to ArrayRecord.

    Args:
        path: the TFDS directory (its newest version if it holds version directories).
        out: where to write a converted copy (must not exist); None converts in place.
        progress: show a progress bar (tqdm, if installed).
        verify: check each record's data CRC32C (the length CRC is always checked).

    Returns the directory to read (``thresher.data_source(result, split=...)``).
    """
    path = user_path(path)
    for where in (path, out):
        if where is not None and is_url(os.fspath(where)):
            raise ConfigError(f"thresher convert works on local directories, not {where!r}: "
                              "copy the dataset from the bucket (e.g. `gsutil -m cp -r URL DIR`), "
                              "convert the copy, and read it or upload the result")
    info = TfdsInfo.read(path)
    if info.has_array_record and out is None:
        return info.data_dir
    if info.file_format != "tfrecord" and not info.has_array_record:
        raise ConfigError(f"{info.data_dir!r} is stored as {info.file_format!r}; only "
                          "tfrecord datasets need converting")
    total = sum(s.num_examples for s in info.splits.values())
    bar = _bar(progress, total, f"convert {info.name}")
    obj = dict(info.raw)
    try:
        if out is None:
            targets = [name for split in info.tfds_splits for name in shard_filenames(
                split.template, info.name, split.name, "array_record", split.num_shards)]
            sweep_stale(os.path.join(info.data_dir, INFO_FILE), also=targets)
            for split in info.tfds_splits:
                _convert_split(info, split, info.data_dir, bar, verify)
            alternatives = list(obj.get("alternativeFileFormats") or [])
            obj["alternativeFileFormats"] = [*alternatives, "array_record"]
            _write_info(obj, info.data_dir)
            return info.data_dir
        out = os.path.abspath(user_path(out))
        if os.path.exists(out):
            raise ConfigError(f"--out {out!r} already exists; give a new directory")
        if os.path.isdir(os.path.dirname(out)):
            sweep_stale(out)
        work = new_temp_dir(out)
        try:
            for entry in os.listdir(info.data_dir):
                src = os.path.join(info.data_dir, entry)
                if os.path.isfile(src) and ".tfrecord-" not in entry and entry != INFO_FILE \
                        and not entry.startswith("."):
                    with writing(os.path.join(out, entry), "copying to"):
                        shutil.copy2(src, os.path.join(work, entry))
                    publish_mode(os.path.join(work, entry))
            for split in info.tfds_splits:
                _convert_split(info, split, work, bar, verify)
            obj["fileFormat"] = "array_record"
            obj.pop("alternativeFileFormats", None)
            _write_info(obj, work)
            os.rename(work, out)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        return out
    finally:
        if bar is not None:
            bar.close()
