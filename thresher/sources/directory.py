"""``builder(path)`` and ``data_source(path, split)`` for any dataset directory.

A directory written by ``thresher.prepare`` opens as a prepared dataset; one written by
TensorFlow Datasets (a version directory, or a dataset directory whose newest version is
taken) opens as a TFDS dataset, read without TensorFlow (:mod:`thresher.sources.formats.tfds`); a
local directory of Parquet files with one file pattern per split (the Hugging Face Hub's
``data/train-00000-of-00010.parquet``) opens as a :class:`ParquetBuilder`
(:mod:`thresher.sources.formats.parquet.splits`).

Example:
    >>> import tempfile, os
    >>> import thresher as th
    >>> path = os.path.join(tempfile.mkdtemp(), "toy")
    >>> _ = th.prepare(path, {"train": [{"x": i} for i in range(4)]},
    ...                features={"x": th.features.Scalar("int64")}, progress=False)
    >>> type(th.builder(path)).__name__, len(th.data_source(path, split="train[:50%]"))
    ('ReadOnlyBuilder', 2)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from thresher._validate import user_path
from thresher.sources.formats import prepared
from thresher.sources.formats.parquet.splits import ParquetBuilder, is_parquet_dir
from thresher.sources.formats.prepared.layout import PathLike
from thresher.sources.formats.tfds.info import is_tfds_dir
from thresher.sources.formats.tfds.reader import TfdsBuilder
from thresher.sources.remote.fs import is_url

__all__ = ["builder", "data_source"]


def _tfds_path(path: PathLike, storage_options: Mapping[str, Any] | None) -> str | None:
    """The path of a TFDS-written directory (``~`` expanded), or None for anything else."""
    p = user_path(path)
    if is_url(p):
        return p if is_tfds_dir(p, storage_options) else None
    return p if os.path.isdir(p) and is_tfds_dir(p) else None


def builder(path: PathLike, *, storage_options: Mapping[str, Any] | None = None,
            read_options: Any = None) -> prepared.ReadOnlyBuilder | TfdsBuilder | ParquetBuilder:
    """Opens a dataset directory: thresher-prepared or TFDS-written.

    For a TFDS directory, ``builder(path).info`` has ``features``, ``splits`` (with
    ``num_examples``, ``shard_lengths``, and any split expression as key),
    ``file_format`` and ``supervised_keys``. For a prepared one see
    :func:`thresher.sources.formats.prepared.builder`. Either kind may be a URL
    (``s3://bucket/ds/1.0.0``, ``gs://bucket/tensorflow_datasets/mnist``), with fsspec
    ``storage_options`` and the byte-range reader's ``read_options``.
    """
    tfds_path = _tfds_path(path, storage_options)
    if tfds_path is not None:
        return TfdsBuilder(tfds_path, storage_options=storage_options, read_options=read_options)
    local = user_path(path)
    if not is_url(local) and is_parquet_dir(local):
        return ParquetBuilder(local, read_options=read_options)
    return prepared.builder(local, storage_options=storage_options,
                            read_options=read_options)


def data_source(path: PathLike, split: Any = None, *, storage_options: Mapping[str, Any] | None = None,
                read_options: Any = None) -> Any:
    """Random-access sources over a dataset directory, as ``tfds.data_source`` gives.

    Args:
        path: a thresher-prepared directory, a TFDS version directory, or a TFDS dataset
            directory (its newest version is read); any of them may be a URL. ``~`` and
            ``$VAR`` in a local path are expanded (``"~/tensorflow_datasets/mnist"``). Or a local
            directory of Parquet files named by split (``data/train-*.parquet``).
        split: None for ``{split name: source}``; a split string, a thresher or TFDS
            split object (``tfds.even_splits(...)`` items, ``tfds.core.ReadInstruction``)
            for one source; a list of them for a list of sources.
        storage_options: fsspec options, for a directory given as a URL.
        read_options: the byte-range reader's options, for a directory given as a URL
            (see :func:`thresher.sources.formats.prepared.data_source`).

    On a TFDS directory, key ``k`` is the record ``tfds.data_source`` returns at ``k``,
    decoded to the same values. See :func:`thresher.sources.formats.prepared.data_source` for
    an example on a prepared directory.
    """
    return builder(path, storage_options=storage_options, read_options=read_options).as_data_source(split)
