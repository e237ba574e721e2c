"""Listing an image folder by torchvision's ``ImageFolder`` rules.

- classes: the names of the entries of ``root`` that are directories (symbolic links to
  directories count, hidden ones too), sorted; class ``i`` is the ``i``-th name;
- files: for each class in that order, ``os.walk(root/class, followlinks=True)`` with the
  walk's ``(dirpath, ...)`` tuples sorted, then the file names of each sorted;
- a file is an image when its name, lowercased, ends with one of ``IMG_EXTENSIONS``;
- a class without any image is an error unless ``allow_empty``.

Example:
    >>> import os, tempfile
    >>> root = tempfile.mkdtemp()
    >>> for rel in ["dog/b.jpg", "dog/a.PNG", "cat/x.jpeg", "cat/notes.txt"]:
    ...     os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
    ...     open(os.path.join(root, rel), "wb").close()
    >>> listing = scan_folder(root)
    >>> listing.classes, listing.files, listing.labels
    (['cat', 'dog'], ['cat/x.jpeg', 'dog/a.PNG', 'dog/b.jpg'], [0, 1, 1])
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Sequence

from thresher.errors import ConfigError, SourceNotFoundError

__all__ = ["IMG_EXTENSIONS", "Listing", "scan_folder"]

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
"""torchvision's image extensions (``torchvision.datasets.folder.IMG_EXTENSIONS``)."""


@dataclasses.dataclass(frozen=True)
class Listing:
    """The classes of a folder, and its images (paths relative to the root) with their labels."""

    classes: list[str]
    files: list[str]
    labels: list[int]

    def digest(self) -> str:
        """A hash of the listing: the same folder contents give the same digest."""
        h = hashlib.sha256()
        for name in self.classes:
            h.update(b"c" + name.encode("utf-8", "surrogateescape") + b"\0")
        for rel, label in zip(self.files, self.labels, strict=True):
            h.update(f"{label}:".encode() + rel.encode("utf-8", "surrogateescape") + b"\0")
        return h.hexdigest()[:32]


def scan_folder(root: str, extensions: Sequence[str] = IMG_EXTENSIONS,
                allow_empty: bool = False) -> Listing:
    """The classes and images of ``root`` in torchvision's order (see the module doc)."""
    if not os.path.isdir(root):
        raise SourceNotFoundError(f"image folder {root!r} does not exist or is not a directory")
    exts = tuple(e.lower() for e in extensions)
    with os.scandir(root) as entries:
        classes = sorted(e.name for e in entries if e.is_dir())
    if not classes:
        raise ConfigError(f"image folder {root!r} has no class subfolders: expected "
                          f"{os.path.join(root, 'CLASS_NAME', 'image.jpg')}")
    files: list[str] = []
    labels: list[int] = []
    empty: list[str] = []
    for label, name in enumerate(classes):
        before = len(files)
        for dirpath, _, names in sorted(os.walk(os.path.join(root, name), followlinks=True)):
            for fname in sorted(names):
                if fname.lower().endswith(exts):
                    files.append(os.path.relpath(os.path.join(dirpath, fname), root))
                    labels.append(label)
        if len(files) == before:
            empty.append(name)
    if empty and not allow_empty:
        raise SourceNotFoundError(
            f"image folder {root!r}: class folder(s) {empty[:5]} hold no image with an "
            f"extension in {exts}; add images, remove the folders, or pass allow_empty=True")
    if not files:
        raise SourceNotFoundError(f"image folder {root!r} holds no image ({', '.join(exts)})")
    return Listing(classes, files, labels)
