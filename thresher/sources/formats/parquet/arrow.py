"""pyarrow, imported where used, with the ``pip install`` that provides it.

Example:
    >>> from thresher.sources.formats.parquet.arrow import pyarrow
    >>> pyarrow().__name__
    'pyarrow'
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["pyarrow", "pyarrow_parquet"]


def _require(name: str, extra: str, what: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise ImportError(f"{what} needs {name.split('.')[0]}: pip install 'thresher[{extra}]'") from e


def pyarrow(what: str = "reading Parquet") -> ModuleType:
    """The ``pyarrow`` module (ImportError naming ``thresher[parquet]`` if it is missing)."""
    return _require("pyarrow", "parquet", what)


def pyarrow_parquet(what: str = "reading Parquet") -> ModuleType:
    """The ``pyarrow.parquet`` module (ImportError naming ``thresher[parquet]`` if missing)."""
    return _require("pyarrow.parquet", "parquet", what)
