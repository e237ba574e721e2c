"""PaddedBatch: a Batch that pads variable-shaped leaves before stacking them.

Example:
    >>> import numpy as np
    >>> from thresher.dataset.padding import PaddedBatch
    >>> b = PaddedBatch(2, pad_to="max", padding_value=-1)
    >>> b.stack([np.array([1, 2, 3]), np.array([4])]).tolist()
    [[1, 2, 3], [4, -1, -1]]
    >>> PaddedBatch(2, pad_to=4).stack([{"t": np.array([1])}, {"t": np.array([2, 3])}])["t"].tolist()
    [[1, 0, 0, 0], [2, 3, 0, 0]]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from thresher._validate import is_int
from thresher.errors import BatchError, ConfigError
from thresher.transforms.batch import Batch, stack

__all__ = ["PaddedBatch"]

PadTo = Any  # "max", an int (the first axis), or a tuple of ints / None (None: the batch's max)


def _check_pad_to(pad_to: PadTo) -> None:
    if pad_to == "max":
        return
    if is_int(pad_to, minimum=0):
        return
    if isinstance(pad_to, tuple) and all(
            p is None or is_int(p, minimum=0) for p in pad_to):
        return
    raise ConfigError(f"pad_to must be 'max', an int >= 0 (the first axis) or a tuple of ints/None per axis; "
                      f"got {pad_to!r}")


def _flatten(x: Any, leaves: list[Any]) -> Callable[[list[Any]], Any]:
    """Appends the leaves of ``x`` and returns a function rebuilding it from new leaves."""
    if isinstance(x, dict):
        keys = list(x)
        builders = [_flatten(x[k], leaves) for k in keys]
        return lambda new: {k: b(new) for k, b in zip(keys, builders, strict=False)}
    if isinstance(x, (tuple, list)):
        builders = [_flatten(v, leaves) for v in x]
        if hasattr(x, "_fields"):
            return lambda new: type(x)(*[b(new) for b in builders])
        return lambda new: type(x)([b(new) for b in builders])
    i = len(leaves)
    leaves.append(x)
    return lambda new: new[i]


class PaddedBatch(Batch):
    """Batch that pads array leaves to a common shape with ``padding_value``.

    Args:
        batch_size, drop_remainder: as for ``Batch``.
        pad_to: ``"max"``: every axis to the largest size in the batch; an int: the
            first axis to that length (the others must agree); a tuple: one entry
            per axis, an int or None (the batch's largest).
        padding_value: what fills the padding (cast to each leaf's dtype).

    A leaf longer than a fixed ``pad_to`` raises BatchError naming its position.
    """

    def __init__(self, batch_size: int, drop_remainder: bool = False, *, pad_to: PadTo = "max",
                 padding_value: Any = 0) -> None:
        super().__init__(batch_size, drop_remainder)
        _check_pad_to(pad_to)
        self.pad_to = pad_to
        self.padding_value = padding_value

    def _target(self, shapes: list[tuple[int, ...]], positions: Sequence[int] | np.ndarray | None) -> tuple[int, ...]:
        ndim = len(shapes[0])
        biggest = tuple(max(s[a] for s in shapes) for a in range(ndim))
        if self.pad_to == "max":
            return biggest
        want = (self.pad_to,) if not isinstance(self.pad_to, tuple) else self.pad_to
        target = list(biggest)
        for a, p in enumerate(want[:ndim]):
            if p is None:
                continue
            if biggest[a] > p:
                i = next(j for j, s in enumerate(shapes) if s[a] > p)
                where = f"element {i}" + (f" (position {positions[i]})" if positions is not None else "")
                raise BatchError(f"{where} has shape {shapes[i]}, longer than pad_to={self.pad_to!r} on axis {a}; "
                                 "truncate it in a map before the batch or raise pad_to")
            target[a] = int(p)
        return tuple(target)

    def stack(self, elements: Sequence[Any], positions: Sequence[int] | np.ndarray | None = None) -> Any:
        if not elements:
            raise BatchError("cannot stack an empty batch")
        per_element: list[list[Any]] = []
        rebuild = None
        for e in elements:
            leaves: list[Any] = []
            r = _flatten(e, leaves)
            rebuild = rebuild or r
            per_element.append(leaves)
        if any(len(ls) != len(per_element[0]) for ls in per_element):
            return stack(elements, positions)  # let stack() name the mismatch
        for j in range(len(per_element[0])):
            column = [ls[j] for ls in per_element]
            if not all(isinstance(v, np.ndarray) and v.ndim >= 1 for v in column):
                continue
            if len({v.ndim for v in column}) != 1:
                continue  # stack() reports it
            shapes = [v.shape for v in column]
            target = self._target(shapes, positions)
            for i, v in enumerate(column):
                if v.shape != target:
                    out = np.full(target, self.padding_value, dtype=v.dtype)
                    out[tuple(slice(0, s) for s in v.shape)] = v
                    per_element[i][j] = out
        padded = [_flatten(e, [])(ls) for e, ls in zip(elements, per_element, strict=False)]
        return stack(padded, positions)

    def __repr__(self) -> str:
        return (f"PaddedBatch({self.batch_size}, drop_remainder={self.drop_remainder}, pad_to={self.pad_to!r}, "
                f"padding_value={self.padding_value!r})")
