"""Names on disk of a prepared dataset directory: the info file, shards, temp dirs.

Example:
    >>> from thresher.sources.formats.prepared.layout import shard_filename, is_temp_dir
    >>> shard_filename("mnist", "train", 0, 4)
    'mnist-train.array_record-00000-of-00004'
    >>> is_temp_dir("/data/.mnist.thresher-tmp-k3j2")
    True
"""

from __future__ import annotations

import os
import re
from typing import Union

from thresher.sources.temp_files import OLD_MARK, TEMP_MARK

__all__ = [
    "DATASET_NAME_RE",
    "FORMAT",
    "FORMAT_VERSION",
    "INFO_FILE",
    "TEMP_MARK",
    "PathLike",
    "is_temp_dir",
    "shard_filename",
]

PathLike = Union[str, "os.PathLike[str]"]

FORMAT = "thresher.prepared"
FORMAT_VERSION = 1
INFO_FILE = "dataset_info.json"
DATASET_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def shard_filename(name: str, split: str, index: int, count: int) -> str:
    """``{name}-{split}.array_record-{index:05d}-of-{count:05d}``."""
    return f"{name}-{split}.array_record-{index:05d}-of-{count:05d}"


def is_temp_dir(path: PathLike) -> bool:
    """True for the working directory of an unfinished (or running) ``prepare``."""
    base = os.path.basename(os.path.normpath(os.fspath(path)))
    return base.startswith(".") and (TEMP_MARK in base or OLD_MARK in base)
