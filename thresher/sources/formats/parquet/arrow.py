"""pyarrow, imported where used, through :func:`thresher._optional.require` (the error names
``pip install "thresher[parquet]"``).

Example:
    >>> from thresher.sources.formats.parquet.arrow import pyarrow
    >>> pyarrow().__name__
    'pyarrow'
"""

from __future__ import annotations

from types import ModuleType

from thresher._optional import require

__all__ = ["pyarrow", "pyarrow_parquet"]


def pyarrow(what: str = "reading Parquet") -> ModuleType:
    """The ``pyarrow`` module (MissingExtraError naming ``thresher[parquet]`` if it is missing)."""
    return require("pyarrow", what, extra="parquet")


def pyarrow_parquet(what: str = "reading Parquet") -> ModuleType:
    """The ``pyarrow.parquet`` module (ImportError naming ``thresher[parquet]`` if missing)."""
    return require("pyarrow.parquet", what, extra="parquet")
