"""Footer indexes kept on local disk (``RemoteReadOptions.footer_cache_dir``).

One ``.npz`` file per object, keyed by its URL, size and version by the caller, written
atomically (temporary file, then rename); a file that cannot be read, or is for another
size, is ignored (the footer is fetched again).

Example:
    >>> import os, tempfile
    >>> import numpy as np
    >>> from thresher.sources.remote.format import FileIndex
    >>> path = os.path.join(tempfile.mkdtemp(), "x.footer.npz")
    >>> write_cached(path, FileIndex(70000, 65536, 3, 1, np.array([0, 40, 80])))
    >>> read_cached(path, 70000).num_records, read_cached(path, 1) is None
    (3, True)
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from thresher.sources.remote.format import FileIndex

__all__ = ["read_cached", "write_cached"]


def read_cached(path: str, size: int) -> FileIndex | None:
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = [int(x) for x in z["meta"]]
            offsets = np.asarray(z["chunk_offsets"], dtype=np.int64)
    except (OSError, KeyError, ValueError):
        return None
    if len(meta) != 4 or meta[0] != size:
        return None
    return FileIndex(meta[0], meta[1], meta[2], meta[3], offsets)


def write_cached(path: str, index: FileIndex) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".footer-", suffix=".npz.tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, meta=np.asarray([index.size, index.footer_offset, index.num_records,
                                          index.group_size], dtype=np.int64),
                     chunk_offsets=index.chunk_offsets)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
