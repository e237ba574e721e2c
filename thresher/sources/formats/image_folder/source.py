"""ImageFolderSource: a folder of class subfolders of images, read in place.

Example:
    >>> import io, os, tempfile
    >>> from PIL import Image
    >>> import thresher as th
    >>> root = tempfile.mkdtemp()
    >>> for rel in ["dog/1.jpg", "cat/1.jpg", "cat/2.jpg"]:
    ...     os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
    ...     Image.new("RGB", (8, 6)).save(os.path.join(root, rel), "JPEG")
    >>> src = th.sources.ImageFolderSource(root)
    >>> len(src), src.class_names, src[2]["label"], src[2]["image"][:3]
    (3, ['cat', 'dog'], 1, b'\\xff\\xd8\\xff')
    >>> th.sources.formats.image_folder.decode_image(src[0]).shape
    (6, 8, 3)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from thresher.errors import SourceError, SourceNotFoundError
from thresher.sources.formats.descriptors import no_descriptor_error, out_of_descriptors
from thresher.sources.formats.image_folder.decode import check_signature, decode_image
from thresher.sources.formats.image_folder.listing_cache import load_listing, save_listing
from thresher.sources.formats.image_folder.scan import IMG_EXTENSIONS, scan_folder
from thresher.sources.protocol import check_key, check_keys, join_blocks

__all__ = ["ImageFolderSource"]


def _read_file(path: str) -> bytes:
    """The bytes of ``path`` in three system calls where ``open().read()`` makes six or more."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size + 1)
        if len(data) != size:  # it grew since fstat, or a network file system read short: read to the end
            parts = [data]
            while more := os.read(fd, 1 << 20):
                parts.append(more)
            data = b"".join(parts)
        return data
    finally:
        os.close(fd)


class ImageFolderSource:
    """The images of ``root/CLASS/.../FILE`` as ``{"image": bytes, "label": int, "path": str}``.

    Classes and files are ordered by torchvision's ``ImageFolder`` rules
    (:mod:`~thresher.sources.formats.image_folder.scan`), so key ``k`` is the same image
    as ``torchvision.datasets.ImageFolder(root).samples[k]``. ``image`` is the file's
    bytes as stored (a JPEG stays a JPEG: decode it in an operation, with
    :func:`~thresher.sources.formats.image_folder.decode_image` or
    :mod:`thresher.vision`); ``decode=True`` gives RGB pixels instead. Each read checks
    the file's first bytes against its extension; an unreadable, empty or mislabelled
    file (and with ``decode=True`` a corrupt one) raises an error naming its path, and
    ``DataLoader(..., errors="skip")`` drops it deterministically.

    Args:
        root: the folder (``~`` expanded).
        extensions: which files are images (lowercase suffixes; torchvision's by default).
        allow_empty: accept class folders without images (torchvision's flag).
        decode: return decoded ``(h, w, 3)`` uint8 RGB arrays instead of bytes.

    The source pickles as its root and a digest of the listing: a worker reads the
    listing from the index cache (or lists the folder again) and refuses a folder
    whose contents changed.
    """

    def __init__(self, root: str | os.PathLike[str], *, extensions: Sequence[str] = IMG_EXTENSIONS,
                 allow_empty: bool = False, decode: bool = False) -> None:
        self.root = os.path.expanduser(os.fspath(root))
        self.extensions = tuple(extensions)
        self.allow_empty = bool(allow_empty)
        self.decode = bool(decode)
        self._listing = scan_folder(self.root, self.extensions, self.allow_empty)
        self._digest = self._listing.digest()
        save_listing(self._digest, self._listing)
        self._init_arrays()

    def _init_arrays(self) -> None:
        labels = np.asarray(self._listing.labels, dtype=np.int64)
        self._labels = labels
        self._bounds = np.concatenate([[0], np.flatnonzero(np.diff(labels)) + 1, [len(labels)]])

    def __getstate__(self) -> dict[str, Any]:
        return {"root": self.root, "extensions": self.extensions, "allow_empty": self.allow_empty,
                "decode": self.decode, "digest": self._digest}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.root, self.extensions = state["root"], tuple(state["extensions"])
        self.allow_empty, self.decode, self._digest = state["allow_empty"], state["decode"], state["digest"]
        listing = load_listing(self._digest)
        if listing is None:
            listing = scan_folder(self.root, self.extensions, self.allow_empty)
            if listing.digest() != self._digest:
                raise SourceError(f"image folder {self.root!r} changed after the source was made "
                                  "(files were added, removed or renamed); make the source again")
        self._listing = listing
        self._init_arrays()

    @property
    def class_names(self) -> list[str]:
        """The class names; label ``i`` is ``class_names[i]``."""
        return list(self._listing.classes)

    @property
    def class_to_idx(self) -> dict[str, int]:
        """torchvision's mapping from class name to label."""
        return {c: i for i, c in enumerate(self._listing.classes)}

    @property
    def paths(self) -> list[str]:
        """The image files in key order."""
        return [os.path.join(self.root, rel) for rel in self._listing.files]

    def __len__(self) -> int:
        return len(self._listing.files)

    def __repr__(self) -> str:
        return (f"ImageFolderSource({self.root!r}, {len(self)} images, "
                f"{len(self._listing.classes)} classes)")

    def block_boundaries(self, min_records: int = 1) -> np.ndarray:
        """The first key of each natural block (one per class folder, consecutive ones joined until a block
        holds at least ``min_records``), as :class:`thresher.sources.protocol.BlockedSource` asks;
        ``thresher.BlockShuffle.of_source`` uses them."""
        return join_blocks(self._bounds, min_records)

    def record_locations(self, record_keys: Sequence[int]) -> list[tuple[str, int]]:
        """The file of each key (index 0: one image per file); nothing is read."""
        keys = check_keys(record_keys, len(self), repr(self))
        return [(os.path.join(self.root, self._listing.files[int(k)]), 0) for k in keys]

    def _read(self, k: int) -> dict[str, Any]:
        path = os.path.join(self.root, self._listing.files[k])
        try:
            data = _read_file(path)
        except FileNotFoundError:
            raise SourceNotFoundError(f"image file {path!r} (key {k}) no longer exists; the folder "
                                      "changed after the source was made") from None
        except OSError as e:
            if out_of_descriptors(e):
                raise no_descriptor_error(path, e) from None
            raise SourceError(f"image file {path!r} (key {k}) cannot be read: {e}") from None
        check_signature(data, path)
        record: dict[str, Any] = {"image": data, "label": int(self._labels[k]), "path": path}
        if self.decode:
            record["image"] = decode_image(record)
        return record

    def __getitem__(self, record_key: int) -> dict[str, Any]:
        return self._read(check_key(record_key, len(self), repr(self)))

    def __getitems__(self, record_keys: Sequence[int]) -> list[dict[str, Any]]:
        keys = check_keys(record_keys, len(self), repr(self))
        return [self._read(int(k)) for k in keys]


