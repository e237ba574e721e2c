"""The earlier import path of the ArrayRecord reader, kept: it moved to :mod:`thresher.sources.formats.array_record`.

Example:
    >>> from thresher.sources.array_record import ArrayRecordSource
    >>> import thresher as th
    >>> ArrayRecordSource is th.sources.ArrayRecordSource
    True
"""

from thresher.sources.formats.array_record import ArrayRecordSource
from thresher.sources.formats.array_record.source import resolve_paths

__all__ = ["ArrayRecordSource", "resolve_paths"]
