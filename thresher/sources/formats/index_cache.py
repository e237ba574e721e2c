"""Per-shard indexes (TFRecord offsets, tar members) built once and cached on disk.

An index is a dict of numpy arrays built by one pass over a shard. It is stored as an
``.npz`` file (read with ``allow_pickle=False``: no code from data) beside the shard,
in ``DIR/.thresher-index/NAME.KIND.npz``, when that directory is writable, else in the
user cache directory (``$THRESHER_CACHE_DIR``, else ``$XDG_CACHE_HOME/thresher``, else
``~/.cache/thresher``) under ``index/``. Each file records the shard's size and
version (``mtime_ns`` of a local file, the ETag or generation of an object) and the
index kind's format version: a cached index whose key differs is stale, never used,
and is rebuilt. Writes are atomic (a temporary file, then a rename), so workers that
open the same shard at once read a whole index or none.

Example:
    >>> import os, tempfile
    >>> import numpy as np
    >>> from thresher.sources.formats.shards import list_shards
    >>> path = os.path.join(tempfile.mkdtemp(), "x.bin")
    >>> _ = open(path, "wb").write(b"abc")
    >>> shard = list_shards(path)[0]
    >>> calls = []
    >>> def build():
    ...     calls.append(1)
    ...     return {"offsets": np.arange(3)}
    >>> load_or_build(shard, "demo", 1, build)["offsets"].tolist()
    [0, 1, 2]
    >>> load_or_build(shard, "demo", 1, build)["offsets"].tolist(), len(calls)  # cached
    ([0, 1, 2], 1)
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

from thresher.sources.formats.shards import Shard
from thresher.sources.remote.fs import is_url

__all__ = ["cache_root", "index_paths", "load_or_build"]

Index = dict[str, np.ndarray]
_META = "__meta__"


def cache_root() -> str:
    """The user cache directory for thresher's indexes (not created here)."""
    explicit = os.environ.get("THRESHER_CACHE_DIR")
    if explicit:
        return os.path.expanduser(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "thresher")


def index_paths(shard: Shard, kind: str) -> list[str]:
    """Where the index of ``shard`` may be cached, in the order tried: beside, then user cache."""
    name = shard.url.rstrip("/").rsplit("/", 1)[-1]
    digest = hashlib.sha256(shard.url.encode()).hexdigest()[:20]
    user = os.path.join(cache_root(), "index", f"{digest}-{name}.{kind}.npz")
    if is_url(shard.url):
        return [user]
    folder, base = os.path.split(shard.url)
    return [os.path.join(folder, ".thresher-index", f"{base}.{kind}.npz"), user]


def _key(shard: Shard, version: int) -> np.ndarray:
    text = f"{version}\0{shard.size}\0{shard.version}".encode()
    return np.frombuffer(text, dtype=np.uint8)


def _read(path: str, key: np.ndarray) -> Index | None:
    try:
        with np.load(path, allow_pickle=False) as z:
            if _META not in z.files or not np.array_equal(z[_META], key):
                return None  # stale: built for another size, version or index format
            return {name: z[name] for name in z.files if name != _META}
    except (OSError, ValueError, KeyError, EOFError):
        return None


def _write(path: str, key: np.ndarray, index: Index) -> bool:
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".index-", suffix=".tmp", dir=folder)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as fh:
            arrays: dict[str, Any] = {_META: key, **index}
            np.savez(fh, **arrays)
        os.replace(tmp, path)
        return True
    except OSError:
        if os.path.exists(tmp):
            os.remove(tmp)
        return False


def load_or_build(shard: Shard, kind: str, version: int, build: Callable[[], Index]) -> Index:
    """The cached index of ``shard`` when its key matches, else ``build()`` (then cached).

    ``kind`` names the index (``"tfrecord"``, ``"wds"``); ``version`` is its format
    version (bump it when ``build`` changes what it returns).
    """
    key = _key(shard, version)
    paths = index_paths(shard, kind)
    for path in paths:
        found = _read(path, key)
        if found is not None:
            return found
    index = build()
    for path in paths:
        if _write(path, key, index):
            break
    return index
