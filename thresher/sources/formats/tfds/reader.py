"""Opening TFDS-written directories: :class:`TfdsBuilder`, what ``thresher.builder`` returns.

Example (on the TFDS-written test fixture of this repository):
    >>> import os
    >>> import thresher as th
    >>> path = os.path.join(os.path.dirname(th.__file__), "..", "tests", "fixtures", "tfds",
    ...                     "data", "images")          # holds versions 1.0.0 and 2.0.1
    >>> b = th.builder(path)
    >>> b.info.version, b.info.splits["train"].num_examples, b.info.features["label"].names[:2]
    ('2.0.1', 48, ['zero', 'one'])
    >>> ds = th.data_source(path, split="train[:25%]")
    >>> len(ds), ds[0]["image"].shape, type(ds[0]["label"]).__name__
    (12, (28, 28, 1), 'int')
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from thresher.errors import ConversionRequiredError
from thresher.sources.formats.tfds.info import TfdsInfo
from thresher.sources.formats.tfds.source import TfdsSource
from thresher.sources.remote.fs import is_url
from thresher.sources.remote.reader import RemoteReadOptions
from thresher.splits import SplitArg

__all__ = ["TfdsBuilder"]

SplitSelection = SplitArg | list | tuple | Any | None


class TfdsBuilder:
    """A dataset directory written by TensorFlow Datasets: its ``info`` and data sources.

    Args:
        path: a TFDS version directory (``~/tensorflow_datasets/mnist/3.0.1``) or a
            dataset directory holding version directories (the newest is read); either
            may be a URL (``gs://bucket/tensorflow_datasets/mnist``, ``s3://``,
            ``memory://``), read through fsspec.
        storage_options: fsspec options for a URL (credentials, endpoint).
        read_options: how records are read over byte ranges from a URL
            (:class:`~thresher.sources.remote.RemoteReadOptions`).

    ``as_data_source`` reads array_record shards, and tfrecord shards in place (each
    file's offset index is built once and cached; ``thresher convert`` still makes an
    ArrayRecord copy for those who want one); other formats raise
    ConversionRequiredError naming ``thresher convert``.
    """

    def __init__(self, path: str | os.PathLike[str], *,
                 storage_options: Mapping[str, Any] | None = None,
                 read_options: RemoteReadOptions | None = None) -> None:
        self.info: TfdsInfo = TfdsInfo.read(os.fspath(path), storage_options)
        self.data_dir = self.info.data_dir
        self._storage_options, self._read_options = storage_options, read_options

    def __repr__(self) -> str:
        return f"TfdsBuilder({self.data_dir!r})"

    def as_data_source(self, split: SplitSelection = None) -> Any:
        """Sources for ``split``: a dict of every split (None), one source (a split
        expression or split object, thresher's or TFDS's), or a list (a list of them)."""
        if not self.info.has_array_record and self.info.file_format != "tfrecord":
            raise ConversionRequiredError(self._conversion_message())
        if split is None:
            return {name: self._source(name) for name in self.info.splits}
        if isinstance(split, (list, tuple)):
            return [self._source(s) for s in split]
        return self._source(split)

    def _conversion_message(self) -> str:
        d, fmt = self.data_dir, self.info.file_format
        head = (f"the TFDS dataset {d!r} is stored as {fmt} shards, which have no random "
                "access. ")
        if is_url(d):
            return head + ("`thresher convert` works on local directories: copy it (e.g. "
                           f"`gsutil -m cp -r {d} DIR` or `aws s3 cp --recursive {d} DIR`), "
                           "run `thresher convert DIR`, then read DIR or upload the result; "
                           "or have TFDS write it with file_format='array_record'")
        return head + (f"Convert it once to ArrayRecord with `thresher convert {d}` (in place) "
                       f"or `thresher convert {d} --out DIR`, then read the converted directory")

    def _source(self, split: SplitArg) -> TfdsSource:
        instructions = self.info.splits.resolve(split)
        return TfdsSource(self.info, str(split), instructions,
                          storage_options=self._storage_options, read_options=self._read_options)
