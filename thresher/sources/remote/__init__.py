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

# Lazy: the ArrayRecord source imports this package's fs helpers for every local path, and the
# reader (http, the chunk cache, the format) only matters for URLs and reader="ranges"; a worker
# process that reads local files should not import it (about 20 ms of every worker's start).
from typing import TYPE_CHECKING

from thresher._optional import lazy_names

if TYPE_CHECKING:
    from thresher.sources.remote.options import RemoteReadOptions
    from thresher.sources.remote.reader import RangeReader

__getattr__, __dir__ = lazy_names(__name__, {
    "RangeReader": "thresher.sources.remote.reader",
    "RemoteReadOptions": "thresher.sources.remote.options",
    **{name: f"thresher.sources.remote.{name}" for name in (
        "block_hints", "chunk_cache", "compression", "footer_cache", "format", "fs", "highway", "lean",
        "lean_config", "native", "options", "reader", "sigv4", "varint")},
})

__all__ = ["RangeReader", "RemoteReadOptions"]
