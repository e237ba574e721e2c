"""Batch: group consecutive elements and stack them into NumPy arrays."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

import numpy as np

from thresher._validate import check_count
from thresher.errors import BatchError, ConfigError
from thresher.transforms.strided_stack import stack_strided

__all__ = ["Batch", "stack"]


class Batch:
    """Groups ``batch_size`` consecutive elements and stacks them leaf by leaf.

    Elements may be arrays, scalars, or pytrees of them (dicts, tuples, lists,
    namedtuples); each leaf becomes one NumPy array with a leading batch axis.
    Operations after a Batch see whole batches.

    A leaf whose values have different types in different elements (an int in one, a
    dict or a string in another) is refused with a BatchError naming the leaf and the two
    types, instead of becoming an object array (or a string array) silently; pass
    ``object_arrays=True`` to keep such values in an object array.

    Args:
        batch_size: elements per batch (per process), >= 1.
        drop_remainder: drop the last, smaller batch of a finite stream.
        object_arrays: stack a leaf whose types differ across elements into an object
            array instead of raising.

    Example:
        >>> import numpy as np
        >>> from thresher.transforms import Batch
        >>> b = Batch(2).stack([{"x": np.zeros(3), "y": 1}, {"x": np.ones(3), "y": 2}])
        >>> b["x"].shape, b["y"].tolist()
        ((2, 3), [1, 2])
    """

    def __init__(self, batch_size: int, drop_remainder: bool = False, *, object_arrays: bool = False) -> None:
        self.batch_size = check_count(batch_size, "Batch batch_size", minimum=1)
        self.drop_remainder = bool(drop_remainder)
        self.object_arrays = bool(object_arrays)

    @classmethod
    def coerce(cls, obj: Any, index: int) -> Batch | None:
        """thresher's Batch for thresher's own or Grain's ``Batch``/``BatchOperation`` (operation ``index``);
        None for anything else.

        Example:
            >>> import thresher as th
            >>> th.Batch.coerce(th.Batch(4), 0).batch_size, th.Batch.coerce(abs, 1)
            (4, None)
        """
        if isinstance(obj, cls):
            return obj
        if type(obj).__name__ not in ("Batch", "BatchOperation") or not hasattr(obj, "batch_size"):
            return None
        if getattr(obj, "batch_fn", None) is not None:
            raise ConfigError(
                f"operation {index} {obj!r} has a batch_fn, which thresher does not run: thresher's Batch stacks "
                "leaf by leaf; pass Batch(batch_size) and put your function in a map after it"
            )
        return cls(obj.batch_size, bool(getattr(obj, "drop_remainder", False)))

    def stack(self, elements: Sequence[Any], positions: Sequence[int] | np.ndarray | None = None) -> Any:
        """Stacks ``elements`` into one batch (see :func:`stack`)."""
        return stack(elements, positions, object_arrays=self.object_arrays)

    def describe(self) -> str:
        """``Batch(n, drop_remainder=...)`` (part of the pipeline's description)."""
        extra = ", object_arrays=True" if self.object_arrays else ""
        return f"Batch({self.batch_size}, drop_remainder={self.drop_remainder}{extra})"

    def __repr__(self) -> str:
        return self.describe()


def _where(i: int, positions: Sequence[int] | np.ndarray | None) -> str:
    return f"element {i}" + (f" (position {positions[i]})" if positions is not None else "")


def _path(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p!r}]" for p in path) or "<root>"


_NUMERIC = "biufc"

_empty: Callable[..., np.ndarray] = np.empty
"""Where stacked arrays are made (see :func:`set_array_allocator`)."""


def set_array_allocator(empty: Callable[..., np.ndarray] | None) -> None:
    """Makes ``Batch`` stack arrays into ``empty(shape, dtype)`` (None: ``np.empty``).

    Process workers stack into memory their result is sent in, without a copy (see
    ``thresher.loader.pool.shm.ResultArena``). Only the memory changes: same values,
    dtypes and shapes.

    Example:
        >>> import numpy as np
        >>> from thresher.transforms.batch import set_array_allocator, stack
        >>> made = []
        >>> set_array_allocator(lambda shape, dtype: made.append(shape) or np.empty(shape, dtype))
        >>> stack([np.zeros(3), np.ones(3)]).tolist(), made
        ([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]], [(2, 3)])
        >>> set_array_allocator(None)
    """
    global _empty
    _empty = np.empty if empty is None else empty


def _stack_arrays(elements: Sequence[Any]) -> np.ndarray:
    """``np.stack(elements)``, into ``_empty``'s memory when the arrays are all alike."""
    if _empty is np.empty:
        return np.stack(elements)
    first = elements[0]
    dtype, shape = first.dtype, first.shape
    for e in elements:
        if type(e) is not np.ndarray or e.dtype != dtype or e.shape != shape:
            return np.stack(elements)
    return np.stack(elements, out=_empty((len(elements), *shape), dtype))


def _kind(x: Any) -> str:
    """What a leaf value is, for the type check: numbers (and numeric arrays) mix freely."""
    if isinstance(x, (bool, int, float, complex, np.number, np.bool_)):
        return "number"
    if isinstance(x, np.ndarray):
        return "number" if x.dtype.kind in _NUMERIC else f"ndarray of {x.dtype}"
    return type(x).__name__


def _single_type(elements: Sequence[Any]) -> bool:
    """All of one Python type, not an array type (whose kind is its dtype's): of one kind
    (checked at C speed; see ``_one_type``)."""
    types = set(map(type, elements))
    return len(types) == 1 and not issubclass(next(iter(types)), np.ndarray)


def _one_type(elements: Sequence[Any], positions: Sequence[int] | np.ndarray | None,
              path: tuple[Any, ...], object_arrays: bool) -> np.ndarray | None:
    """Raises BatchError when the leaf's values differ in type (or, if allowed, returns them
    as an object array); None when they are all of one type."""
    if _single_type(elements):
        return None
    first = _kind(elements[0])
    for i, e in enumerate(elements):
        if _kind(e) != first:
            if object_arrays:
                out = np.empty(len(elements), dtype=object)
                for j, v in enumerate(elements):
                    out[j] = v
                return out
            raise BatchError(
                f"Batch cannot stack leaf {_path(path)}: {_where(0, positions)} is {_a(elements[0])} but "
                f"{_where(i, positions)} is {_a(e)}. Make the map before the Batch return one type for "
                "every record, or pass Batch(..., object_arrays=True) to keep such values in an object array"
            )
    return None


def _a(x: Any) -> str:
    name = type(x).__name__ if not isinstance(x, np.ndarray) else f"ndarray of {x.dtype}"
    return f"an {name}" if name[:1].lower() in "aeio" or name.startswith("ndarray") else f"a {name}"


def _stack_leaves(elements: Sequence[Any], positions: Sequence[int] | np.ndarray | None,
                  path: tuple[Any, ...], object_arrays: bool = False) -> np.ndarray:
    first = elements[0]
    if isinstance(first, np.ndarray):
        try:
            strided = stack_strided(elements, _empty)
            out = _stack_arrays(elements) if strided is None else strided
        except (ValueError, TypeError):
            pass
        else:
            if out.dtype.kind == first.dtype.kind or (out.dtype.kind in _NUMERIC and first.dtype.kind in _NUMERIC):
                return out
            mixed = _one_type(elements, positions, path, object_arrays)
            return out if mixed is None else mixed
        shape = first.shape
        for i, e in enumerate(elements):
            s = np.shape(e)
            if s != shape:
                raise BatchError(
                    f"Batch cannot stack leaf {_path(path)}: {_where(0, positions)} has shape {shape} "
                    f"but {_where(i, positions)} has shape {s}. Resize or pad in a map before Batch"
                ) from None
        raise BatchError(f"Batch cannot stack leaf {_path(path)}: {[type(e).__name__ for e in elements[:4]]}")
    kind = type(first)
    if issubclass(kind, (np.number, np.bool_)) and kind is not np.timedelta64 and _single_type(elements):
        # NumPy numbers of one type (a label as np.int64): that type is the dtype (np.array told
        # it is 3x faster than finding it value by value).
        return np.array(elements, dtype=kind)
    try:
        out = np.asarray(elements)
    except ValueError as e:
        mixed = _one_type(elements, positions, path, object_arrays)
        if mixed is not None:
            return mixed
        raise BatchError(f"Batch cannot stack leaf {_path(path)} ({type(first).__name__} values): {e}") from None
    if out.dtype.kind in "OUS" or isinstance(first, (str, bytes)):
        # The cheap numeric case is done; strings and objects are checked value by value.
        mixed = _one_type(elements, positions, path, object_arrays)
        if mixed is not None:
            return mixed
    if out.dtype == object and not isinstance(first, (str, bytes)):
        shapes = [np.shape(e) for e in elements]
        for i, s in enumerate(shapes):
            if s != shapes[0]:
                raise BatchError(
                    f"Batch cannot stack leaf {_path(path)}: {_where(0, positions)} has shape {shapes[0]} "
                    f"but {_where(i, positions)} has shape {s}"
                )
    return out


def _same_dicts(elements: Sequence[Any], n: int) -> bool:
    """Every element a plain dict of ``n`` keys (checked at C speed; see ``_stack``)."""
    return set(map(type, elements)) == {dict} and set(map(len, elements)) == {n}


def _stack(elements: Sequence[Any], positions: Sequence[int] | np.ndarray | None, path: tuple[Any, ...],
           object_arrays: bool = False) -> Any:
    first = elements[0]
    if object_arrays and isinstance(first, (dict, tuple, list)):
        mixed = _one_type(elements, positions, path, object_arrays)
        if mixed is not None:
            return mixed
    if isinstance(first, dict):
        keys = first.keys()
        if type(first) is dict and _same_dicts(elements, len(keys)):
            try:  # the same number of keys, each of the first's in every one: the same keys
                columns = {k: list(map(itemgetter(k), elements)) for k in keys}
            except KeyError:
                pass
            else:
                return {k: _stack(v, positions, (*path, k), object_arrays) for k, v in columns.items()}
        for i, e in enumerate(elements):
            if not isinstance(e, dict):
                raise BatchError(f"Batch cannot stack {_path(path)}: {_where(0, positions)} is a dict but "
                                 f"{_where(i, positions)} is {_a(e)}")
            if e.keys() != keys:
                got = sorted(map(str, e.keys()))
                raise BatchError(
                    f"Batch cannot stack {_path(path)}: {_where(0, positions)} has keys {sorted(map(str, keys))} "
                    f"but {_where(i, positions)} has {got}"
                )
        return {k: _stack([e[k] for e in elements], positions, (*path, k), object_arrays) for k in keys}
    if isinstance(first, (tuple, list)):
        n = len(first)
        for i, e in enumerate(elements):
            if type(e) is not type(first) or len(e) != n:
                raise BatchError(
                    f"Batch cannot stack {_path(path)}: {_where(0, positions)} is a {type(first).__name__} "
                    f"of {n} but {_where(i, positions)} is a {type(e).__name__} of "
                    f"{len(e) if isinstance(e, (tuple, list)) else '?'}"
                )
        parts = [_stack([e[j] for e in elements], positions, (*path, j), object_arrays) for j in range(n)]
        if hasattr(first, "_fields"):  # namedtuple
            return type(first)(*parts)
        return type(first)(parts)
    return _stack_leaves(elements, positions, path, object_arrays)


def stack(elements: Sequence[Any], positions: Sequence[int] | np.ndarray | None = None, *,
          object_arrays: bool = False) -> Any:
    """Stacks a non-empty sequence of same-structured pytrees leaf by leaf.

    Raises BatchError naming the leaf path and the two shapes, or the two types (and
    positions, when given), if the elements cannot be stacked. With ``object_arrays``,
    a leaf whose values differ in type becomes an object array instead.

    Example:
        >>> from thresher.transforms.batch import stack
        >>> stack([(1, 2.0), (3, 4.0)])
        (array([1, 3]), array([2., 4.]))
        >>> stack([{"y": 1}, {"y": "one"}], positions=[10, 11])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        thresher.errors.BatchError: Batch cannot stack leaf ['y']: element 0 (position 10) is an int but element 1 ...
        >>> stack([{"y": 1}, {"y": "one"}], object_arrays=True)["y"]
        array([1, 'one'], dtype=object)
    """
    if not elements:
        raise BatchError("cannot stack an empty batch")
    return _stack(elements, positions, (), object_arrays)
