"""The files of a TFDS directory, on a local disk or behind a URL (``gs://``, ``s3://``).

:class:`DatasetDir` answers what a TFDS reader asks of a directory: which names it holds
(one listing, kept), the text of a small file (``dataset_info.json``, ``features.json``,
label files) and the path of a file in it. Local paths use ``os``; URLs go through fsspec
(:mod:`thresher.sources.remote.fs`), with the caller's ``storage_options``.

Example:
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "label.labels.txt"), "w") as f:
    ...     _ = f.write("cat\\ndog\\n")
    >>> files = DatasetDir(d)
    >>> files.has("label.labels.txt"), files.has("features.json"), files.read_text("label.labels.txt")
    (True, False, 'cat\\ndog\\n')
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from thresher.errors import SourceNotFoundError
from thresher.sources.paths import inside
from thresher.sources.remote.fs import is_url, list_names, read_bytes

__all__ = ["DatasetDir"]


class DatasetDir:
    """A directory (local path or URL) whose listing is read once, on first use."""

    def __init__(self, path: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.path = path.rstrip("/") if is_url(path) else path
        self.storage_options = storage_options
        self._names: frozenset[str] | None = None

    def __repr__(self) -> str:
        return f"DatasetDir({self.path!r})"

    @property
    def is_url(self) -> bool:
        return is_url(self.path)

    def join(self, name: str, field: str = "a file name") -> str:
        """The path (or URL) of ``name`` inside this directory; DatasetInfoError naming
        ``field`` when ``name`` would leave it (:func:`thresher.sources.paths.inside`)."""
        return inside(self.path, name, field, self.path)

    def sub(self, name: str) -> DatasetDir:
        """The subdirectory ``name``."""
        return DatasetDir(self.join(name), self.storage_options)

    def names(self) -> frozenset[str]:
        """The names of the entries directly in this directory (empty if it does not exist)."""
        if self._names is None:
            if self.is_url:
                self._names = frozenset(list_names(self.path, self.storage_options) or ())
            elif os.path.isdir(self.path):
                self._names = frozenset(os.listdir(self.path))
            else:
                self._names = frozenset()
        return self._names

    def has(self, name: str) -> bool:
        """Whether ``name`` is in this directory."""
        return name in self.names()

    def read_bytes(self, name: str) -> bytes:
        """The content of the file ``name``; SourceNotFoundError naming it if it is absent."""
        path = self.join(name)
        if self.is_url:
            return read_bytes(path, self.storage_options)
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise SourceNotFoundError(f"{path!r} does not exist") from None

    def read_text(self, name: str) -> str:
        """The UTF-8 text of the file ``name`` (UnicodeDecodeError if it is not UTF-8)."""
        return self.read_bytes(name).decode("utf-8")
