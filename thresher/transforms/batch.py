"""Batch: group consecutive elements and stack them into NumPy arrays."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from thresher._validate import check_count
from thresher.errors import BatchError

__all__ = ["Batch", "stack"]


class Batch:
    """Groups ``batch_size`` consecutive elements and stacks them leaf by leaf.

    Elements may be arrays, scalars, or pytrees of them (dicts, tuples, lists,
    namedtuples); each leaf becomes one NumPy array with a leading batch axis.
    Operations after a Batch see whole batches.

    Args:
        batch_size: elements per batch (per process), >= 1.
        drop_remainder: drop the last, smaller batch of a finite stream.

    Example:
        >>> import numpy as np
        >>> from thresher.transforms import Batch
        >>> b = Batch(2).stack([{"x": np.zeros(3), "y": 1}, {"x": np.ones(3), "y": 2}])
        >>> b["x"].shape, b["y"].tolist()
        ((2, 3), [1, 2])
    """

    def __init__(self, batch_size: int, drop_remainder: bool = False) -> None:
        self.batch_size = check_count(batch_size, "Batch batch_size", minimum=1)
        self.drop_remainder = bool(drop_remainder)

    def stack(self, elements: Sequence[Any], positions: Sequence[int] | np.ndarray | None = None) -> Any:
        """Stacks ``elements`` into one batch (see :func:`stack`)."""
        return stack(elements, positions)

    def describe(self) -> str:
        """``Batch(n, drop_remainder=...)`` (part of the pipeline's description)."""
        return f"Batch({self.batch_size}, drop_remainder={self.drop_remainder})"

    def __repr__(self) -> str:
        return self.describe()


def _where(i: int, positions: Sequence[int] | np.ndarray | None) -> str:
    return f"element {i}" + (f" (position {positions[i]})" if positions is not None else "")


def _path(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p!r}]" for p in path) or "<root>"


def _stack_leaves(elements: Sequence[Any], positions: Sequence[int] | np.ndarray | None,
                  path: tuple[Any, ...]) -> np.ndarray:
    first = elements[0]
    if isinstance(first, np.ndarray):
        try:
            return np.stack(elements)
        except (ValueError, TypeError):
            pass
        shape = first.shape
        for i, e in enumerate(elements):
            s = np.shape(e)
            if s != shape:
                raise BatchError(
                    f"Batch cannot stack leaf {_path(path)}: {_where(0, positions)} has shape {shape} "
                    f"but {_where(i, positions)} has shape {s}. Resize or pad in a map before Batch"
                ) from None
        raise BatchError(f"Batch cannot stack leaf {_path(path)}: {[type(e).__name__ for e in elements[:4]]}")
    try:
        out = np.asarray(elements)
    except ValueError as e:
        raise BatchError(f"Batch cannot stack leaf {_path(path)} ({type(first).__name__} values): {e}") from None
    if out.dtype == object and not isinstance(first, (str, bytes)):
        shapes = [np.shape(e) for e in elements]
        for i, s in enumerate(shapes):
            if s != shapes[0]:
                raise BatchError(
                    f"Batch cannot stack leaf {_path(path)}: {_where(0, positions)} has shape {shapes[0]} "
                    f"but {_where(i, positions)} has shape {s}"
                )
    return out


def _stack(elements: Sequence[Any], positions: Sequence[int] | np.ndarray | None, path: tuple[Any, ...]) -> Any:
    first = elements[0]
    if isinstance(first, dict):
        keys = first.keys()
        for i, e in enumerate(elements):
            if not isinstance(e, dict) or e.keys() != keys:
                got = sorted(map(str, e.keys())) if isinstance(e, dict) else type(e).__name__
                raise BatchError(
                    f"Batch cannot stack {_path(path)}: {_where(0, positions)} has keys {sorted(map(str, keys))} "
                    f"but {_where(i, positions)} has {got}"
                )
        return {k: _stack([e[k] for e in elements], positions, path + (k,)) for k in keys}
    if isinstance(first, (tuple, list)):
        n = len(first)
        for i, e in enumerate(elements):
            if type(e) is not type(first) or len(e) != n:
                raise BatchError(
                    f"Batch cannot stack {_path(path)}: {_where(0, positions)} is a {type(first).__name__} "
                    f"of {n} but {_where(i, positions)} is a {type(e).__name__} of "
                    f"{len(e) if isinstance(e, (tuple, list)) else '?'}"
                )
        parts = [_stack([e[j] for e in elements], positions, path + (j,)) for j in range(n)]
        if hasattr(first, "_fields"):  # namedtuple
            return type(first)(*parts)
        return type(first)(parts)
    return _stack_leaves(elements, positions, path)


def stack(elements: Sequence[Any], positions: Sequence[int] | np.ndarray | None = None) -> Any:
    """Stacks a non-empty sequence of same-structured pytrees leaf by leaf.

    Raises BatchError naming the leaf path and the two shapes (and positions, when
    given) if the elements cannot be stacked.

    Example:
        >>> from thresher.transforms.batch import stack
        >>> stack([(1, 2.0), (3, 4.0)])
        (array([1, 3]), array([2., 4.]))
    """
    if not elements:
        raise BatchError("cannot stack an empty batch")
    return _stack(elements, positions, ())
