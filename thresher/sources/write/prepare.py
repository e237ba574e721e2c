"""``prepare()``: write a prepared dataset directory, deterministically and atomically.

Each split is written in two passes with bounded memory: the examples are encoded and
appended to a spill file, then read back in a keyed pseudo-random order
(:class:`~thresher.samplers.Permutation`, key derived from the split name) and dealt
into ``num_shards`` contiguous shard files. The same input therefore gives the same bytes on
every machine (:mod:`thresher.sources.write.local`), on Apache Beam
(:mod:`thresher.sources.write.beam`) and for a URL (written locally, then uploaded with
``dataset_info.json`` last, :mod:`thresher.sources.write.commit`).

Example:
    >>> import tempfile, os, numpy as np
    >>> import thresher as th
    >>> path = os.path.join(tempfile.mkdtemp(), "digits")
    >>> info = th.prepare(path, {"train": {"image": np.zeros((10, 8, 8, 1), np.uint8),
    ...                                     "label": np.arange(10) % 3}},
    ...                   features={"image": th.features.Image((8, 8, 1), encoding="none"),
    ...                             "label": th.features.ClassLabel(num_classes=3)},
    ...                   num_shards=2, progress=False)
    >>> info.splits["train"].shard_lengths, sorted(os.listdir(path))[0]
    ((5, 5), 'dataset_info.json')
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any

from thresher._validate import user_path
from thresher.errors import ConfigError
from thresher.sources.formats.prepared.info import DatasetInfo
from thresher.sources.formats.prepared.layout import INFO_FILE, PathLike
from thresher.sources.remote.fs import is_url
from thresher.sources.write.commit import exists, publish_tree
from thresher.sources.write.infer import describe_features, infer_features
from thresher.sources.write.local import _dataset_name, check_prepare_args, write_splits

__all__ = ["prepare"]

_log = logging.getLogger("thresher")


def _say_inferred(path: str, features: Any, progress: bool) -> None:
    text = (f"thresher: prepare {path}: features inferred from the columns (pass features= to "
            f"choose others):\n{describe_features(features)}")
    _log.info("%s", text)
    if progress:
        print(text, file=sys.stderr)


def prepare(
    path: PathLike,
    splits: Mapping[str, Iterable[Any] | Mapping[str, Any]],
    *,
    features: Any = None,
    num_shards: int | Mapping[str, int] | None = None,
    name: str | None = None,
    version: str = "1.0.0",
    description: str = "",
    shuffle: bool = True,
    overwrite: bool = False,
    progress: bool = True,
    keyed: bool = False,
    beam_runner: str | None = None,
    beam_options: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> DatasetInfo:
    """Writes a prepared dataset directory that ``thresher.data_source`` reads.

    Args:
        path: the directory to create (its parent is created if needed); ``~`` and
            ``$VAR`` are expanded.
        splits: ``{split name: examples}``; examples are an iterable of (nested) dicts
            matching ``features``, or a dict of equal-length columns (arrays).
        features: a Feature or a (nested) dict of them (``thresher.features``). Left out,
            they are inferred from splits given as dicts of columns, by the rules of
            ``thresher prepare`` (:mod:`thresher.sources.write.infer`: NumPy dtypes and
            shapes, strings, bytes; ``image`` / ``label`` arrays), and what was inferred is
            logged (logger ``thresher``, INFO) and, with ``progress``, printed to stderr.
        num_shards: shard files per split (an int, or ``{split: int}``); by default one
            per 256 MiB of records. Never more than the split has records.
        name: the dataset name (default: the directory name); used in file names.
        version: the dataset version, stored in ``dataset_info.json``.
        description: free text, stored in ``dataset_info.json``.
        shuffle: store records in a fixed pseudo-random order (True, like TFDS) or in
            input order (in key order with ``keyed=True``).
        overwrite: replace an existing directory at ``path``.
        progress: show tqdm progress bars (if tqdm is installed) and print a summary
            to stderr.
        keyed: examples are ``(key, example)`` pairs with unique int/str/bytes keys; the
            order on disk is then a function of the keys alone
            (``thresher.sources.formats.prepared.keys``), the same as ``thresher.beam`` writes.
            Without keys the order is a function of the input order.
        beam_runner: run on Apache Beam with this runner (``"DirectRunner"``,
            ``"DataflowRunner"``, ...; implies ``keyed=True``): the same bytes as one process.
            See ``thresher.beam`` and ``docs/beam.md``.
        beam_options: Beam pipeline options, e.g. ``{"direct_num_workers": 2}``.
        storage_options: fsspec options when ``path`` is a URL (``s3://bucket/ds``): the
            dataset is written on local disk, uploaded, and committed by uploading
            ``dataset_info.json`` last. With ``beam_runner`` the Beam workers upload the
            shards themselves (``thresher.beam``).

    Returns:
        The DatasetInfo of the new dataset.
    """
    path = user_path(path)
    url = path.rstrip("/")
    if features is None and isinstance(splits, Mapping) and splits:
        features, splits = infer_features(splits)
        _say_inferred(path, features, progress)
    if is_url(url) and exists(url, storage_options) and not overwrite:  # before reading examples
        raise ConfigError(f"{url!r} already exists; pass overwrite=True to replace it")
    if is_url(url) and beam_runner is None:
        with tempfile.TemporaryDirectory(prefix="thresher-prepare-") as tmp:
            local = os.path.join(tmp, "dataset")
            prepare(local, splits, features=features, num_shards=num_shards,
                    name=_dataset_name(url, name), version=version, description=description,
                    shuffle=shuffle, progress=progress, keyed=keyed)
            publish_tree(local, url, storage_options, last=INFO_FILE, overwrite=overwrite)
        return DatasetInfo.read(url, storage_options)
    if not isinstance(splits, Mapping) or not splits:
        raise ConfigError("splits must be a non-empty dict {split name: examples}")
    args = check_prepare_args(path, list(splits), features, num_shards, name, version,
                              description, shuffle, overwrite)
    if beam_runner is not None:
        from thresher.sources.write.beam import prepare_on_beam  # apache_beam is an optional extra

        return prepare_on_beam(args, splits, beam_runner, beam_options or {}, storage_options,
                               overwrite=overwrite)
    return write_splits(args, splits, progress=progress, keyed=keyed)
