"""Stacking arrays whose last axis is short and contiguous but whose other axes are not.

A horizontally flipped HWC image (``image[:, ::-1]``) is a view whose pixels run
backwards: NumPy copies it one 3-byte pixel at a time, one inner loop per pixel, and
``np.stack`` of 256 such 224x224 images costs about 7 times a contiguous copy. Seen as
an array of 3-byte items (``np.void``), the same copy is one inner loop per row, about
twice as fast. The bytes of the result are those ``np.stack`` gives (the same dtype,
shape and values); anything this path does not cover returns None and is stacked by
``np.stack``.

Example:
    >>> import numpy as np
    >>> from thresher.transforms.strided_stack import stack_strided
    >>> images = [np.arange(24, dtype=np.uint8).reshape(2, 4, 3)[:, ::-1] for _ in range(3)]
    >>> out = stack_strided(images)
    >>> out.shape, bool(np.array_equal(out, np.stack(images)))
    ((3, 2, 4, 3), True)
    >>> stack_strided([np.zeros(4), np.ones(4)]) is None   # contiguous: np.stack is as fast
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["stack_strided"]

MAX_ITEM_BYTES = 64
"""Last axes up to this many bytes are copied as one item (a pixel, a small vector)."""

_KINDS = frozenset("biufcmM")  # plain numbers, booleans, datetimes: no objects, no structured dtypes


def stack_strided(elements: Sequence[Any], empty: Callable[..., np.ndarray] = np.empty) -> np.ndarray | None:
    """``np.stack(elements)`` for non-contiguous arrays with a short contiguous last axis, or None.

    ``empty(shape, dtype)`` makes the result (``np.empty``; in process workers, memory the
    result is sent in)."""
    first = elements[0]
    if type(first) is not np.ndarray or first.ndim < 2:
        return None
    dtype, shape = first.dtype, first.shape
    item = shape[-1] * dtype.itemsize
    if dtype.kind not in _KINDS or not dtype.isnative or not 0 < item <= MAX_ITEM_BYTES:
        return None
    strided = False
    for e in elements:
        if type(e) is not np.ndarray or e.dtype != dtype or e.shape != shape or e.strides[-1] != dtype.itemsize:
            return None
        strided = strided or not e.flags.c_contiguous
    if not strided:
        return None  # all contiguous: np.stack copies them as fast
    void = np.dtype((np.void, item))
    out = empty((len(elements), *shape), dtype)
    try:
        rows = out.view(void)
        for i, e in enumerate(elements):
            rows[i] = e.view(void)
    except ValueError:  # a NumPy that cannot view this layout with a larger item: np.stack does it
        return None
    return out
