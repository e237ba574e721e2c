"""TFRecord files read in place: a cached offset index, then random access with CRC checks.

Example:
    >>> from thresher.sources.formats.tfrecord import INDEX_KIND
    >>> INDEX_KIND
    'tfrecord'
"""

from thresher.sources.formats.tfrecord.index import INDEX_KIND, INDEX_VERSION, check_record, check_records, scan_offsets
from thresher.sources.formats.tfrecord.source import TFRecordSource

__all__ = ["INDEX_KIND", "INDEX_VERSION", "TFRecordSource", "check_record", "check_records", "scan_offsets"]
