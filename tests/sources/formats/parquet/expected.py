"""What pyarrow says a row holds, and thresher's values put in the same plain form."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from thresher.sources.formats.parquet import gather as gather_module


@contextmanager
def gather_path(native: bool) -> Iterator[None]:
    """Sources whose first read comes inside read their batches with the C gatherer (``native``)
    or with Arrow's take and merged tables."""
    saved = gather_module.NATIVE_GATHER
    gather_module.NATIVE_GATHER = native
    try:
        yield
    finally:
        gather_module.NATIVE_GATHER = saved


def typed(value: Any) -> Any:
    """``value`` with every leaf's type (and dtype) beside it: equal only where the values are
    equal and of the same types."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [typed(v) for v in value]
    if isinstance(value, np.ndarray):
        return ("ndarray", str(value.dtype), value.shape, value.tobytes())
    if isinstance(value, np.generic):
        return (type(value).__name__, str(value.dtype), value.tobytes())
    return (type(value).__name__, value)


def plain(value: Any) -> Any:
    """NumPy arrays and scalars as Python lists and scalars, recursively."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()] if value.ndim else value.item()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def pyarrow_rows(paths: list[str], columns: list[str] | None = None) -> list[dict[str, Any]]:
    """Every row of ``paths`` in order, as pyarrow's ``to_pylist`` gives it (maps as dicts)."""
    rows: list[dict[str, Any]] = []
    for p in paths:
        rows.extend(pq.read_table(p, columns=columns).to_pylist(maps_as_pydicts="strict"))
    return [plain(r) for r in rows]
