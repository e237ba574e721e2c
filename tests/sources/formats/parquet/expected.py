"""What pyarrow says a row holds, and thresher's values put in the same plain form."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow.parquet as pq


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
    """Every row of ``paths`` in order, as pyarrow's ``to_pylist`` gives it."""
    rows: list[dict[str, Any]] = []
    for p in paths:
        rows.extend(pq.read_table(p, columns=columns).to_pylist())
    return [plain(r) for r in rows]
