"""ArrayRecord files: the source (:mod:`.source`), its open-file cache and record counts
(:mod:`.files`), and the atomic writer (:mod:`.writer`).

Example:
    >>> from thresher.sources.formats.array_record import ArrayRecordSource, write_array_record
    >>> ArrayRecordSource.__name__, write_array_record.__name__
    ('ArrayRecordSource', 'write_array_record')
"""

from thresher.sources.formats.array_record.source import ArrayRecordSource
from thresher.sources.formats.array_record.writer import ArrayRecordWriter, write_array_record

__all__ = ["ArrayRecordSource", "ArrayRecordWriter", "write_array_record"]
