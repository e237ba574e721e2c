"""ArrayRecord files on object storage: the file format read over byte ranges, and fsspec.

``ArrayRecordSource("s3://bucket/part-*.array_record")`` uses this package; it reads the
footer index of each object once, then fetches only the chunks that hold the records
asked for, many requests at once. fsspec (and s3fs / gcsfs) and cramjam are the
``remote`` extra, imported only when a URL or a compressed chunk is read.

Example:
    >>> from thresher.sources.remote import RemoteReadOptions
    >>> RemoteReadOptions(max_concurrency=16, timeout=30).max_concurrency
    16
"""

from thresher.sources.remote.reader import RangeReader, RemoteReadOptions

__all__ = ["RangeReader", "RemoteReadOptions"]
