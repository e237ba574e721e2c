"""Opening prepared dataset directories: ``builder(path)`` and ``data_source(path, split)``.

Example:
    >>> import tempfile, os, numpy as np
    >>> import thresher as th
    >>> path = os.path.join(tempfile.mkdtemp(), "toy")
    >>> _ = th.prepare(path, {"train": [{"x": i} for i in range(8)],
    ...                       "test": [{"x": -i} for i in range(4)]},
    ...                features={"x": th.features.Scalar("int64")}, progress=False)
    >>> ds = th.data_source(path)
    >>> sorted(ds), len(ds["train"]), sorted(int(ds["train"][k]["x"]) for k in range(8))
    (['test', 'train'], 8, [0, 1, 2, 3, 4, 5, 6, 7])
    >>> len(th.data_source(path, split="train[:75%]+test"))
    10
    >>> th.builder(path).info.splits["train[:25%]"].num_examples
    2
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from thresher._validate import user_path
from thresher.errors import IncompleteDatasetError, SourceNotFoundError
from thresher.sources.formats.prepared.info import DatasetInfo
from thresher.sources.formats.prepared.layout import INFO_FILE, PathLike, is_temp_dir
from thresher.sources.formats.prepared.source import PreparedSource
from thresher.sources.remote.fs import is_url, list_names
from thresher.sources.remote.reader import RemoteReadOptions
from thresher.splits import SplitArg

__all__ = ["ReadOnlyBuilder", "builder", "data_source"]

SplitSelection = SplitArg | list | tuple | None


def _incomplete(path: str, shards: list[str]) -> IncompleteDatasetError:
    return IncompleteDatasetError(
        f"{path!r} has {len(shards)} ArrayRecord file(s) but no {INFO_FILE}: it is "
        "not a complete prepared dataset (an unfinished write, or files from another "
        "tool). Re-create it with thresher.prepare()")


def _check_dir(path: str, storage_options: Mapping[str, Any] | None = None) -> None:
    if is_temp_dir(path):
        raise IncompleteDatasetError(
            f"{path!r} is the working directory of a thresher.prepare() that did not finish "
            "(it was interrupted, or is still running); it is not a dataset. Rerun prepare: "
            "it removes this directory once the process that wrote it is gone")
    if is_url(path):
        names = list_names(path, storage_options)
        if names is None:
            raise SourceNotFoundError(f"prepared dataset directory {path!r} does not exist "
                                      "(no object has that prefix)")
        if INFO_FILE not in names:
            raise _incomplete(path, [n for n in names if ".array_record" in n])
        return
    if not os.path.exists(path):
        raise SourceNotFoundError(f"prepared dataset directory {path!r} does not exist")
    if not os.path.isdir(path):
        raise SourceNotFoundError(
            f"{path!r} is a file, not a prepared dataset directory (for plain ArrayRecord "
            "files use thresher.sources.ArrayRecordSource)")
    if not os.path.exists(os.path.join(path, INFO_FILE)):
        shards = [f for f in os.listdir(path) if ".array_record" in f]
        if shards:
            raise _incomplete(path, shards)


class ReadOnlyBuilder:
    """A prepared dataset directory: its ``info`` and its data sources.

    Args:
        path: the directory ``thresher.prepare`` wrote, or its URL (``gs://...``).
        storage_options: fsspec options for a URL (credentials, endpoint).
        read_options: how records are read over byte ranges from a URL.

    Raises SourceNotFoundError (no such directory, no ``dataset_info.json``),
    IncompleteDatasetError (an unfinished write) or DatasetInfoError (an unreadable or
    inconsistent ``dataset_info.json``).
    """

    def __init__(self, path: PathLike, *, storage_options: Mapping[str, Any] | None = None,
                 read_options: RemoteReadOptions | None = None) -> None:
        text = user_path(path)
        self.data_dir = text.rstrip("/") if is_url(text) else os.path.abspath(text)
        self._storage_options, self._read_options = storage_options, read_options
        _check_dir(self.data_dir, storage_options)
        self.info: DatasetInfo = DatasetInfo.read(self.data_dir, storage_options)

    def __repr__(self) -> str:
        return f"ReadOnlyBuilder({self.data_dir!r})"

    def as_data_source(self, split: SplitSelection = None) -> Any:
        """Sources for ``split``: a dict of every split (None), one source (a split
        expression or object), or a list of sources (a list of them)."""
        if split is None:
            return {name: self._source(name) for name in self.info.splits}
        if isinstance(split, (list, tuple)):
            return [self._source(s) for s in split]
        return self._source(split)

    def _source(self, split: SplitArg) -> PreparedSource:
        instructions = self.info.splits.resolve(split)
        return PreparedSource(self.info, str(split), instructions,
                              storage_options=self._storage_options,
                              read_options=self._read_options)


def builder(path: PathLike, *, storage_options: Mapping[str, Any] | None = None,
            read_options: RemoteReadOptions | None = None) -> ReadOnlyBuilder:
    """Opens a prepared dataset directory or URL (see :class:`ReadOnlyBuilder`).

    Example:
        >>> import tempfile, os
        >>> import thresher as th
        >>> path = os.path.join(tempfile.mkdtemp(), "labels")
        >>> _ = th.prepare(path, {"train": [{"y": i % 3} for i in range(9)]},
        ...                features={"y": th.features.ClassLabel(names=["a", "b", "c"])},
        ...                num_shards=3, progress=False)
        >>> info = th.builder(path).info
        >>> info.features["y"].num_classes, info.splits["train"].num_shards
        (3, 3)
        >>> info.splits["train[1shard:]"].num_examples
        6
    """
    return ReadOnlyBuilder(path, storage_options=storage_options, read_options=read_options)


def data_source(path: PathLike, split: SplitSelection = None, *,
                storage_options: Mapping[str, Any] | None = None,
                read_options: RemoteReadOptions | None = None) -> Any:
    """Random-access sources over a prepared dataset, as ``tfds.data_source`` gives.

    Args:
        path: the dataset directory, or its URL (``s3://bucket/datasets/mnist/1.0.0``).
        split: None for ``{split name: source}`` of every split; a split expression
            (``"train[:75%]+test"``, a ReadInstruction, an ``even_splits`` item) for one
            source; a list of them for a list of sources.
        storage_options, read_options: for a URL, as in :class:`ReadOnlyBuilder`.

    Each source has an exact ``len()``, random access ``source[k]`` and batched
    ``source.__getitems__(keys)``, and decodes records to NumPy.

    Example:
        >>> import tempfile, os
        >>> import thresher as th
        >>> path = os.path.join(tempfile.mkdtemp(), "squares")
        >>> _ = th.prepare(path, {"train": [{"n": i, "sq": i * i} for i in range(10)]},
        ...                features={"n": th.features.Scalar("int32"),
        ...                          "sq": th.features.Scalar("int64")},
        ...                shuffle=False, progress=False)
        >>> first, last = th.data_source(path, split=["train[:2]", "train[-1:]"])
        >>> [int(x["sq"]) for x in first.__getitems__([0, 1])], int(last[0]["n"])
        ([0, 1], 9)
    """
    return ReadOnlyBuilder(path, storage_options=storage_options,
                           read_options=read_options).as_data_source(split)
