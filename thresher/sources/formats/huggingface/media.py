"""Image and audio columns of Hugging Face datasets: encoded bytes, and helpers to decode them.

``datasets`` stores an ``Image()`` or ``Audio()`` feature as a struct of the encoded file
(``bytes``) and its original ``path``. :class:`~thresher.sources.HuggingFaceSource` returns
the encoded bytes (cheap to send between processes); decode them in a Map with
:func:`decode_image` (Pillow) or :func:`decode_audio` (soundfile), or ask the source for
``decode=True``.

Example:
    >>> import io
    >>> import numpy as np
    >>> from PIL import Image
    >>> buf = io.BytesIO()
    >>> Image.fromarray(np.full((2, 3, 3), 7, np.uint8)).save(buf, format="PNG")
    >>> decode_image(buf.getvalue()).shape
    (2, 3, 3)
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from thresher._optional import require
from thresher.errors import FeatureError

__all__ = ["MEDIA_TYPES", "decode_audio", "decode_image", "media_columns"]

MEDIA_TYPES = ("Image", "Audio")


def decode_image(data: bytes) -> np.ndarray:
    """The pixels of an encoded image (PNG, JPEG, ...) as a uint8 array (H, W[, C])."""
    Image = require("PIL.Image", "decode_image", extra="images")
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im)


def decode_audio(data: bytes) -> tuple[np.ndarray, int]:
    """The samples of an encoded audio file (WAV, FLAC, OGG, ...) and its sampling rate,
    read with soundfile (``pip install soundfile``)."""
    try:
        import soundfile
    except ImportError as e:
        raise ImportError("decode_audio needs soundfile: pip install soundfile") from e
    samples, rate = soundfile.read(io.BytesIO(data))
    return np.asarray(samples), int(rate)


def media_columns(features: Mapping[str, Any] | None) -> dict[str, str]:
    """The top-level columns whose feature is ``Image`` or ``Audio``: name -> type name.

    ``features`` is a ``datasets.Features.to_dict()`` (or the ``features`` of a
    ``dataset_info.json``).

    Example:
        >>> media_columns({"img": {"_type": "Image"}, "y": {"dtype": "int64", "_type": "Value"}})
        {'img': 'Image'}
    """
    out: dict[str, str] = {}
    for name, spec in (features or {}).items():
        if isinstance(spec, Mapping) and spec.get("_type") in MEDIA_TYPES:
            out[str(name)] = str(spec["_type"])
    return out


def features_from_schema(schema: Any) -> dict[str, Any] | None:
    """The features ``datasets`` stored in an Arrow schema's metadata, if any."""
    meta = schema.metadata or {}
    raw = meta.get(b"huggingface")
    if raw is None:
        return None
    try:
        features = json.loads(raw)["info"]["features"]
    except (ValueError, KeyError, TypeError):
        return None
    return features if isinstance(features, dict) else None


def media_value(value: Any, column: str, kind: str, key: int, decode: bool) -> Any:
    """The encoded bytes of one image/audio struct (decoded when ``decode``)."""
    if value is None:
        return None
    data = value.get("bytes") if isinstance(value, dict) else None
    if data is None:
        raise FeatureError(
            f"column {column!r} ({kind}) of record {key} holds only a path ({value.get('path')!r}), not "
            "the encoded file: thresher reads no file that the data names. Embed the files first "
            "(save_to_disk embeds them), or read the path in a Map yourself")
    if not decode:
        return data
    return decode_image(data) if kind == "Image" else decode_audio(data)
