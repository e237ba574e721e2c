"""Checking and decoding the image files of an image folder, naming the file at fault.

``check_signature`` looks at the first bytes only (cheap, done on every read): an empty
file, or one whose content is not the format its extension says (an HTML error page
saved as ``.jpg``), is an error naming the path. ``decode_image`` decodes fully with
Pillow to an ``(height, width, 3)`` uint8 RGB array; a truncated or corrupt file is a
CorruptSourceError naming the path. For ImageNet-style training, decode with
:func:`thresher.vision.decode_random_resized_crop` instead (reduced-scale JPEG decode).

Example:
    >>> import io
    >>> from PIL import Image
    >>> buf = io.BytesIO()
    >>> Image.new("RGB", (4, 3), "red").save(buf, "PNG")
    >>> record = {"image": buf.getvalue(), "label": 0, "path": "red/a.png"}
    >>> decode_image(record).shape
    (3, 4, 3)
    >>> try:
    ...     decode_image({"image": b"<html>", "label": 0, "path": "red/b.png"})
    ... except Exception as e:
    ...     print(type(e).__name__)
    CorruptSourceError
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from thresher.errors import CorruptSourceError

__all__ = ["check_signature", "decode_image"]

_SIGNATURES: dict[str, tuple[bytes, ...]] = {
    ".jpg": (b"\xff\xd8\xff",),
    ".jpeg": (b"\xff\xd8\xff",),
    ".png": (b"\x89PNG\r\n\x1a\n",),
    ".bmp": (b"BM",),
    ".gif": (b"GIF87a", b"GIF89a"),
    ".tif": (b"II*\x00", b"MM\x00*"),
    ".tiff": (b"II*\x00", b"MM\x00*"),
    ".ppm": (b"P3", b"P6"),
    ".pgm": (b"P2", b"P5"),
}


def check_signature(data: bytes, path: str) -> None:
    """Raises CorruptSourceError naming ``path`` if ``data`` cannot be the image its extension says."""
    if not data:
        raise CorruptSourceError(f"image file {path!r} is empty; remove or replace it "
                                 "(or read with errors='skip')")
    ext = os.path.splitext(path)[1].lower()
    if ext == ".webp":
        ok = data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    else:
        ok = data.startswith(_SIGNATURES.get(ext, (b"",)))
    if not ok:
        raise CorruptSourceError(f"image file {path!r} does not hold a {ext[1:].upper()} image "
                                 f"(it starts {bytes(data[:8])!r}); remove or replace it "
                                 "(or read with errors='skip')")


def decode_image(record: Mapping[str, Any], mode: str = "RGB") -> np.ndarray:
    """The pixels of an image-folder record (``record["image"]``) as a uint8 array.

    ``mode`` is Pillow's (``"RGB"``: ``(h, w, 3)``; ``"L"``: ``(h, w)``), as torchvision's
    default loader converts. Errors name ``record["path"]``.
    """
    try:
        from PIL import Image
    except ImportError as e:
        raise ImportError("decoding images needs Pillow: pip install 'thresher[images]'") from e
    data, path = record["image"], record.get("path", "<image>")
    try:
        with Image.open(io.BytesIO(data)) as im:
            return np.asarray(im.convert(mode) if im.mode != mode else im.copy())
    except Exception as e:  # Pillow raises OSError, SyntaxError, ValueError, DecompressionBombError
        raise CorruptSourceError(f"image file {path!r} cannot be decoded ({type(e).__name__}: "
                                 f"{e}); remove or replace it (or read with errors='skip')") from None
