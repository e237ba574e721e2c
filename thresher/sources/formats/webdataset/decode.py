"""Decoders for the usual WebDataset member extensions, chosen by the last part of the extension.

``jpg jpeg png webp ppm pgm bmp``: an ``(h, w, 3)`` uint8 RGB array (Pillow); ``cls``
``cls2`` ``index``: an int; ``json`` ``jsn``: the parsed JSON; ``txt`` ``text``: a str;
``npy``: the array (``allow_pickle=False``). Other members stay bytes. A member that
does not decode is an error naming the sample's key and the member.

Example:
    >>> decode_sample({"__key__": "a", "cls": b"7", "json": b'{"x": 1}', "bin": b"\\x00"})
    {'__key__': 'a', 'cls': 7, 'json': {'x': 1}, 'bin': b'\\x00'}
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from thresher.errors import CorruptSourceError

__all__ = ["DECODERS", "decode_sample"]


def _image(data: bytes) -> np.ndarray:
    try:
        from PIL import Image
    except ImportError as e:
        raise ImportError("decoding images needs Pillow: pip install 'thresher[images]'") from e
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB"))


def _npy(data: bytes) -> np.ndarray:
    return np.asarray(np.load(io.BytesIO(data), allow_pickle=False))


DECODERS: dict[str, Callable[[bytes], Any]] = {
    **{ext: _image for ext in ("jpg", "jpeg", "png", "webp", "ppm", "pgm", "bmp")},
    **{ext: (lambda b: int(b.decode("ascii").strip())) for ext in ("cls", "cls2", "index")},
    "json": json.loads, "jsn": json.loads,
    "txt": lambda b: b.decode("utf-8"), "text": lambda b: b.decode("utf-8"),
    "npy": _npy,
}
"""The default decoder of each extension (matched on the part after the extension's last dot)."""


def decode_sample(sample: Mapping[str, Any], decoders: Mapping[str, Callable[[bytes], Any]] | None = None,
                  where: str = "") -> dict[str, Any]:
    """``sample`` with each member whose extension has a decoder decoded (keys ``__...__`` kept)."""
    table = DECODERS if decoders is None else decoders
    out: dict[str, Any] = {}
    for ext, value in sample.items():
        fn = None if ext.startswith("__") else table.get(ext.rsplit(".", 1)[-1])
        if fn is None:
            out[ext] = value
            continue
        try:
            out[ext] = fn(value)
        except Exception as e:
            raise CorruptSourceError(f"{where}sample {sample.get('__key__')!r}: member .{ext} does not decode "
                                     f"({type(e).__name__}: {e})") from None
    return out
