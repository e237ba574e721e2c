"""Grain's data sources, as thresher sources with Grain's signatures.

Example:
    >>> import thresher.grain as grain
    >>> src = grain.RangeDataSource(0, 10, 2)
    >>> len(src), src[3]
    (5, 6)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Union

from thresher.errors import ConfigError
from thresher.sources.formats.array_record.source import ArrayRecordSource
from thresher.sources.in_memory import InMemoryDataSource as _InMemoryDataSource
from thresher.sources.protocol import RandomAccessDataSource
from thresher.sources.range import RangeDataSource

__all__ = ["ArrayRecordDataSource", "InMemoryDataSource", "RandomAccessDataSource", "RangeDataSource",
           "SharedMemoryDataSource"]

PathLike = Union[str, "os.PathLike[str]"]


class ArrayRecordDataSource(ArrayRecordSource):
    """ArrayRecord files (a path, a glob or a list) read as one index space; records are bytes.

    Example:
        >>> import os, tempfile
        >>> import thresher as th, thresher.grain as grain
        >>> path = os.path.join(tempfile.mkdtemp(), "d.array_record")
        >>> _ = th.sources.write_array_record(path, [b"a", b"b"])
        >>> grain.ArrayRecordDataSource([path])[1]
        b'b'
    """

    def __init__(self, paths: PathLike | Sequence[PathLike]) -> None:
        super().__init__(paths)


class InMemoryDataSource(_InMemoryDataSource):
    """Grain's InMemoryDataSource (a SharedMemoryDataSource there): the elements, in memory.

    thresher sends the elements to worker processes once, when they start; Grain's
    ``name=`` (attaching to a shared list by name) is not supported.

    Example:
        >>> import thresher.grain as grain
        >>> grain.InMemoryDataSource(range(5))[4]
        4
    """

    def __init__(self, elements: Sequence[Any] | None = None, *, name: str | None = None) -> None:
        if name is not None or elements is None:
            raise ConfigError("InMemoryDataSource(name=...) attaches to a Grain shared-memory list, which thresher "
                              "does not have: pass the elements, InMemoryDataSource(elements)")
        super().__init__(list(elements))


SharedMemoryDataSource = InMemoryDataSource
