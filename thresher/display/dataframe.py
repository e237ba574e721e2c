"""``as_dataframe``: the first records of a source as a pandas DataFrame.

One column per leaf feature (nested keys joined with ``/``); values are what the
source returns (arrays stay arrays). ClassLabel columns get a ``<key>_name`` column
beside them when the label has names.
"""

from __future__ import annotations

from typing import Any

from thresher._optional import require
from thresher.display.fields import fields, get
from thresher.errors import ConfigError

__all__ = ["as_dataframe"]


def _pandas() -> Any:
    return require("pandas", "as_dataframe")


def as_dataframe(ds: Any, info: Any = None, n: int | None = None) -> Any:
    """The first ``n`` records of ``ds`` (all if None) as a ``pandas.DataFrame``.

    Args:
        ds: a source from ``thresher.data_source`` (prepared or TFDS), or any sequence
            of example dicts.
        info: the dataset's info (``thresher.builder(path).info``); defaults to ``ds.info``.
        n: how many records (from key 0).

    See :mod:`thresher.display` for an example.
    """
    pd = _pandas()
    info = info if info is not None else getattr(ds, "info", None)
    count = len(ds) if n is None else min(int(n), len(ds))
    if count < 0:
        raise ConfigError(f"as_dataframe: n must be >= 0, got {n}")
    records = ds.__getitems__(list(range(count))) if hasattr(ds, "__getitems__") else [
        ds[k] for k in range(count)]
    leaves = fields(info.features) if info is not None else []
    if not leaves:
        return pd.DataFrame.from_records(records)
    columns: dict[str, list[Any]] = {}
    for f in leaves:
        values = [get(r, f.key) for r in records]
        columns[f.key] = values
        names = getattr(f.feature, "names", None)
        if f.kind == "label" and names:
            columns[f"{f.key}_name"] = [names[int(v)] for v in values]
    return pd.DataFrame(columns)
