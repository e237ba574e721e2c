"""An image folder's listing kept in the user cache, so worker processes skip listing it again.

The file is named by the listing's digest (``index/folder-DIGEST.npz`` under
:func:`~thresher.sources.formats.index_cache.cache_root`), holds the class names,
relative paths and labels (UTF-8 with surrogate escapes, no pickle), and is checked
against its digest when read: a file that does not match is ignored.

Example:
    >>> import tempfile
    >>> from thresher.sources.formats.image_folder.scan import Listing
    >>> listing = Listing(["cat"], ["cat/a.jpg"], [0])
    >>> save_listing(listing.digest(), listing)
    >>> load_listing(listing.digest()) == listing
    True
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from thresher.sources.formats.image_folder.scan import Listing
from thresher.sources.formats.index_cache import cache_root

__all__ = ["load_listing", "save_listing"]


def _path(digest: str) -> str:
    return os.path.join(cache_root(), "index", f"folder-{digest}.npz")


def _pack(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    blobs = [n.encode("utf-8", "surrogateescape") for n in names]
    ends = np.cumsum([len(b) for b in blobs], dtype=np.int64)
    return np.frombuffer(b"".join(blobs), dtype=np.uint8), ends


def _unpack(blob: np.ndarray, ends: np.ndarray) -> list[str]:
    data = blob.tobytes()
    starts = np.concatenate([[0], ends[:-1]]) if len(ends) else ends
    return [data[s:e].decode("utf-8", "surrogateescape") for s, e in zip(starts.tolist(), ends.tolist(),
                                                                        strict=True)]


def save_listing(digest: str, listing: Listing) -> None:
    """Writes the listing (atomically); does nothing when the cache is not writable."""
    path = _path(digest)
    if os.path.exists(path):
        return
    classes, class_ends = _pack(listing.classes)
    files, file_ends = _pack(listing.files)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".folder-", suffix=".tmp", dir=os.path.dirname(path))
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, classes=classes, class_ends=class_ends, files=files, file_ends=file_ends,
                     labels=np.asarray(listing.labels, dtype=np.int64))
        os.replace(tmp, path)
    except OSError:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_listing(digest: str) -> Listing | None:
    """The cached listing with this digest, or None (absent, unreadable or not matching)."""
    try:
        with np.load(_path(digest), allow_pickle=False) as z:
            listing = Listing(_unpack(z["classes"], z["class_ends"]), _unpack(z["files"], z["file_ends"]),
                              [int(x) for x in z["labels"]])
    except (OSError, ValueError, KeyError, EOFError, UnicodeDecodeError):
        return None
    return listing if listing.digest() == digest else None
