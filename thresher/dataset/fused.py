"""Fused operations: several consecutive maps (or filters) as one call per element.

The fused function is a plain Python function (cheap to call, picklable by
cloudpickle) named after its parts, so errors and ``explain()`` still say what
runs.

Example:
    >>> from thresher.dataset.fused import fused_filter, fused_map
    >>> f = fused_map((abs, str))
    >>> f(-3), f.__qualname__
    ('3', 'abs+str')
    >>> fused_filter((bool, lambda x: x > 2))(3)
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from thresher.dataset.nodes.base import fn_name

__all__ = ["fused_filter", "fused_map"]


def _compose2(f: Callable[[Any], Any], g: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def fused(x: Any, f: Callable[[Any], Any] = f, g: Callable[[Any], Any] = g) -> Any:
        return g(f(x))

    return fused


def fused_map(fns: Sequence[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    """``fns`` applied in order, as one function."""
    if len(fns) == 1:
        return fns[0]
    out = fns[0]
    for g in fns[1:]:
        out = _compose2(out, g)
    out.__qualname__ = out.__name__ = "+".join(fn_name(f) for f in fns)
    return out


def fused_filter(fns: Sequence[Callable[[Any], Any]]) -> Callable[[Any], bool]:
    """True when every predicate in ``fns`` holds (checked in order, stopping at the first False)."""
    if len(fns) == 1:
        fn = fns[0]
        return fn

    def fused(x: Any, fns: tuple[Callable[[Any], Any], ...] = tuple(fns)) -> bool:
        return all(f(x) for f in fns)

    fused.__qualname__ = fused.__name__ = "+".join(fn_name(f) for f in fns)
    return fused
