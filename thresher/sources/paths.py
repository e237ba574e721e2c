"""Paths that dataset metadata names, kept inside the dataset's directory or bucket prefix.

A ``dataset_info.json`` names files by template or by name (TFDS's ``filepathTemplate``,
shard names, ``<feature>.labels.txt``, a cache sidecar's part files). Metadata is data: an
absolute name or one with a ``..`` component would make a reader serve files from elsewhere
and a writer (``thresher convert``) overwrite them. :func:`inside` joins a name to its
dataset directory only when the result stays inside it, and otherwise raises
DatasetInfoError naming the metadata field. The check is on the names (lexical): a
symbolic link the user placed inside the directory is followed, as any reader would.

Example:
    >>> from thresher.sources.paths import inside
    >>> inside("/data/mnist/3.0.1", "mnist-train.array_record-00000-of-00001", "shard name",
    ...        "dataset_info.json")
    '/data/mnist/3.0.1/mnist-train.array_record-00000-of-00001'
    >>> try:
    ...     inside("/data/mnist/3.0.1", "../../home/me/notes.txt", "filepathTemplate",
    ...            "dataset_info.json")
    ... except ValueError as e:
    ...     print(str(e).split(", which")[0])
    dataset_info.json: filepathTemplate gives '../../home/me/notes.txt'
"""

from __future__ import annotations

import os
import re

from thresher.errors import DatasetInfoError
from thresher.sources.remote.fs import is_url, join

__all__ = ["inside", "outside_reason"]

_SEPARATORS = re.compile(r"[/\\]")
_DRIVE = re.compile(r"[A-Za-z]:")


def outside_reason(name: object) -> str | None:
    """Why the relative name ``name`` would leave its directory (None when it stays inside)."""
    if not isinstance(name, str) or not name:
        return "it is not a non-empty string"
    if "\x00" in name:
        return "it holds a NUL character"
    if name.startswith(("/", "\\")) or _DRIVE.match(name) or os.path.isabs(name):
        return "it is an absolute path"
    if is_url(name):
        return "it is a URL"
    if ".." in _SEPARATORS.split(name):
        return "it has a '..' component"
    return None


def inside(base: str, name: str, field: str, where: str) -> str:
    """``base/name``, or DatasetInfoError naming ``field`` (and the file ``where`` it was read)
    when ``name`` is absolute, a URL or climbs out with ``..``."""
    why = outside_reason(name)
    if why is None and not is_url(base):
        root = os.path.normpath(os.path.abspath(base))
        full = os.path.normpath(os.path.join(root, name))
        if os.path.commonpath([root, full]) != root or full == root:
            why = "it does not name a file inside the directory"
    if why is not None:
        raise DatasetInfoError(
            f"{where}: {field} gives {name!r}, which is not inside the dataset directory "
            f"{base!r} ({why}); thresher reads and writes only inside a dataset's directory "
            "or bucket prefix. The metadata was edited or damaged: restore it from the "
            "original dataset")
    return join(base, name)
